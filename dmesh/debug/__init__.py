"""Tools to see inside a dmesh program: what it communicates, why, and where ranks diverge.

* :class:`CommMode` records the collectives a block of code makes (count,
  bytes, mesh dim, the NumPy call or redistribution that caused each).
* :func:`explain` runs a call and reports, per op, the strategy chosen, the
  redistributions done and their estimated cost.
* :func:`checking` (or ``DMESH_CHECK=1``) makes the ranks compare each
  collective before running it and raise :class:`CollectiveMismatchError` on
  every rank when they differ, instead of hanging.
* :func:`visualize` prints which block of a DArray each rank holds.
* ``DMESH_HANG_TIMEOUT=seconds`` starts a watchdog that prints, per rank,
  the collective and call site it is blocked in, then aborts the job.

Nothing here costs anything while it is off: the collectives read one flag,
and the NumPy dispatch hooks are swapped only while a tool watches.
"""

from dmesh.collectives.errors import CollectiveMismatchError
from dmesh.debug.block_table import visualize
from dmesh.debug.checking import checking
from dmesh.debug.comm_mode import CollectiveRecord, CommMode
from dmesh.debug.explain import Explanation, OpReport, explain

__all__ = [
    "CollectiveMismatchError",
    "CollectiveRecord",
    "CommMode",
    "Explanation",
    "OpReport",
    "checking",
    "explain",
    "visualize",
]
