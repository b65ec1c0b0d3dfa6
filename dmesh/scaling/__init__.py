"""The scaling model: what each communicating operation sends, and what it costs.

For each operation that communicates, a *formula* function gives every rank's
collective calls (:class:`Call`: the collective, its group size, the bytes of
this rank's input and result) as a function of the mesh shape, the array
shape and dtype, and the placements, computed from the same block boundaries
dmesh uses, uneven ones included. ``tests/test_scaling_*.py`` check every
formula against what :class:`dmesh.debug.CommMode` records at 1-4 ranks on 1-D
and 2-D meshes, exactly.

:class:`Network` turns calls into time under a latency-bandwidth model
(``alpha + beta * bytes`` per message, with the message counts of the usual
MPI algorithms), so a formula evaluated at 4,096 ranks predicts what a job
there spends communicating. ``docs/scaling.md`` gives the closed forms, and
``scripts/bench_scaling.py --model`` fits the network to a machine.

Nothing here communicates: it is pure arithmetic on shapes.
"""

from __future__ import annotations

from dmesh.scaling.network import Network, fit, messages_and_bytes
from dmesh.scaling.traffic import Call, Traffic, block_sizes, per_rank, total_bytes

__all__ = [
    "Call",
    "Network",
    "Traffic",
    "block_sizes",
    "fit",
    "messages_and_bytes",
    "per_rank",
    "total_bytes",
]
