"""Functional collectives on NumPy and CuPy arrays over MPI.

Every function takes an array and a ``group`` (an ``MPI.Intracomm``, a 1-D
mesh, ``(mesh, mesh_dim)``, a list of world ranks, or ``None`` for
``COMM_WORLD``) and returns a new array; inputs are never modified. Every
function is collective: all ranks of the group call it, in the same order.
``async_op=True`` starts the MPI non-blocking operation and returns an
:class:`AsyncArray` that waits on first use.

Reduce ops are named by strings: ``"sum"``, ``"prod"``, ``"min"``, ``"max"``,
``"avg"`` and, for integer and bool data, ``"band"``, ``"bor"``, ``"bxor"``,
``"land"``, ``"lor"``, ``"lxor"``.

This package knows nothing of dmesh or ops (it is the bottom layer).

Importing it raises glibc's mmap threshold so that large result arrays reuse
heap memory (see ``collectives._memory``; ``DMESH_MALLOC_TUNING=0`` opts out).
"""

if (
    __name__ != "dmesh.collectives"
):  # the repository's collectives/ folder, imported by its folder name
    raise ImportError(
        f"this is dmesh's collectives layer, imported as {__name__!r}; import it as "
        "'dmesh.collectives' (the repository folder collectives/ installs as dmesh/collectives)"
    )


from dmesh.collectives._memory import tune_malloc
from dmesh.collectives.async_array import AsyncArray
from dmesh.collectives.coalesced import (
    all_gather_coalesced,
    all_reduce_coalesced,
    reduce_scatter_coalesced,
)
from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    CollectiveMismatchError,
    DMeshError,
)
from dmesh.collectives.exchange import all_to_all, permute
from dmesh.collectives.gathers import all_gather, broadcast, gather, scatter
from dmesh.collectives.group import Group, MeshLike, resolve_group
from dmesh.collectives.reduce_ops import REDUCE_OPS
from dmesh.collectives.reductions import all_reduce, reduce_scatter

tune_malloc()

__all__ = [
    "REDUCE_OPS",
    "ArgumentError",
    "ArgumentTypeError",
    "AsyncArray",
    "CollectiveMismatchError",
    "DMeshError",
    "Group",
    "MeshLike",
    "all_gather",
    "all_gather_coalesced",
    "all_reduce",
    "all_reduce_coalesced",
    "all_to_all",
    "broadcast",
    "gather",
    "permute",
    "reduce_scatter",
    "reduce_scatter_coalesced",
    "resolve_group",
    "scatter",
]
