"""The scaling model: what each communicating operation sends, and what it costs.

For each operation that communicates, a *formula* function gives every rank's
collective calls (:class:`dmesh.scaling.Call`: the collective, its group size, the bytes of
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

The formulas live in one module per family of operations:

* ``dmesh.scaling.redistribution``: every redistribution transition, the
  general transfer, moves to another mesh;
* ``dmesh.scaling.reductions``: reductions and what makes their ``Partial``
  results values, var/std, norms, the nan forms, argmax/argmin, scans;
* ``dmesh.scaling.contractions``: matmul, dot, tensordot, einsum and the
  strategy dmesh picks for each layout pair;
* ``dmesh.scaling.halo`` and ``dmesh.scaling.fft``: halo exchange and
  ``map_overlap``, slab and pencil FFTs, the four-step 1-D FFT, fftshift;
* ``dmesh.scaling.sorting`` and ``dmesh.scaling.indexing``: sample sort,
  unique, fancy indexing and boolean masks;
* ``dmesh.scaling.io``: ``save``/``load`` and checkpoints, with the file bytes.

Nothing here communicates: it is pure arithmetic on shapes.
"""

from __future__ import annotations

from dmesh.scaling import (
    contractions,
    fft,
    halo,
    indexing,
    io,
    redistribution,
    reductions,
    sorting,
)
from dmesh.scaling.network import Network, fit, messages_and_bytes
from dmesh.scaling.traffic import Call, Traffic, block_sizes, per_rank, total_bytes

__all__ = [
    "Call",
    "Network",
    "Traffic",
    "block_sizes",
    "contractions",
    "fft",
    "fit",
    "halo",
    "indexing",
    "io",
    "messages_and_bytes",
    "per_rank",
    "redistribution",
    "reductions",
    "sorting",
    "total_bytes",
]
