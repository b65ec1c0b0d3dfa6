"""What a compiled plan can pack into one MPI call: reductions and gathers of a move.

A move that is one all-reduce, reduce-scatter (``Reduction``) or all-gather
(``Gather``) over one mesh dim can share a call with others of its kind;
``packable`` tells which a move is, ``packs_with`` whether two can share.
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.blocks import balanced_sizes
from dmesh.core.layout import Layout
from dmesh.core.plan import plan_redistribution
from dmesh.core.spec import DArraySpec

__all__ = [
    "GATHER_PACK_BYTES",
    "SHORT_MESSAGE",
    "Gather",
    "Reduction",
    "from_front",
    "packable",
    "packs_with",
    "reduce_many",
    "to_front",
    "wait",
]


def reduce_many(
    blocks: list[Any], op: str, comm: Any, axis: int, async_op: bool = False
) -> list[Any]:
    """Each of ``blocks`` all-reduced (``axis`` < 0) or reduce-scattered along ``axis`` into
    balanced pieces over ``comm``, in one MPI call; each keeps its dtype, as in ``run_steps``.
    With ``async_op``, started: the results to :func:`wait` for."""
    if len(blocks) == 1:  # the plain collective, as run_steps makes it (half the cost)
        block = blocks[0]
        if axis < 0:
            reduced = [coll.all_reduce(block, op, comm, async_op=async_op)]
        else:
            sizes = balanced_sizes(block.shape[axis], comm.Get_size())
            reduced = [coll.reduce_scatter(block, op, axis, comm, sizes=sizes, async_op=async_op)]
    elif axis < 0:
        reduced = coll.all_reduce_coalesced(blocks, op, comm, async_op=async_op)
    else:
        reduced = coll.reduce_scatter_coalesced(blocks, op, axis, comm, async_op=async_op)
    if async_op:
        return [(r, b.dtype) for r, b in zip(reduced, blocks)]
    return [r.astype(b.dtype, copy=False) for r, b in zip(reduced, blocks)]


def wait(started: list[Any]) -> list[Any]:
    """The results of a started collective (:func:`reduce_many`, :func:`_gather_many`)."""
    return [r.wait().astype(dtype, copy=False) for r, dtype in started]


# MPICH picks its reduction algorithm by the message's size, and the algorithms add a
# float's terms in different orders. Packs of float sums stay within this many bytes
# (recursive doubling or halving, as each short message alone), so a packed result has
# the bits of the separate ones.
SHORT_MESSAGE = int(os.environ.get("MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE", "2048"))


class Reduction(NamedTuple):
    """A move that is one reduction over one mesh dim: an all-reduce (``axis`` -1) or a
    reduce-scatter into balanced pieces along ``axis`` (a ``Partial`` made ``Replicate`` or
    ``Shard``). Moves that agree on the first four fields can share one MPI call."""

    mesh_dim: int
    op: str
    dtype: np.dtype
    axis: int
    nbytes: int

    def exact(self) -> bool:
        """Whether the reduction's result does not depend on the order of its terms."""
        return self.op in ("max", "min") or self.dtype.kind in "biu"


class Gather(NamedTuple):
    """A move that is one all-gather along ``axis`` over one mesh dim (a ``Shard`` made
    ``Replicate``), the ranks' lengths along it ``sizes``. Moves that agree on the first
    three fields can share one MPI call (data moves unchanged: any pack has the same bits)."""

    mesh_dim: int
    dtype: np.dtype
    axis: int
    sizes: tuple[int, ...]
    nbytes: int


# Gathers are packed while the pack stays this small: above it, separate calls cost
# no more than the copies into and out of one buffer.
GATHER_PACK_BYTES = 1 << 20


def packable(spec: DArraySpec, target: Layout) -> Reduction | Gather | None:
    """The move of an array of ``spec`` to ``target`` as one :class:`Reduction` or
    :class:`Gather` (what can share an MPI call with others), or None."""
    steps = plan_redistribution(spec.layout, target, True)
    local = spec.local_shape()
    nbytes = math.prod(local) * spec.dtype.itemsize
    if len(steps) == 1 and steps[0][0] == "all_gather" and len(local):
        _, m, d, sizes = steps[0]
        return Gather(m, spec.dtype, d, tuple(sizes), nbytes)
    if len(steps) != 1 or steps[0][0] not in ("all_reduce", "reduce_scatter"):
        return None
    if steps[0][0] == "all_reduce":
        _, m, op = steps[0]
        return Reduction(m, op, spec.dtype, -1, nbytes)
    _, m, op, axis, sizes = steps[0]
    if tuple(sizes) != balanced_sizes(local[axis], spec.mesh.shape[m]):
        return None  # uneven pieces: the coalesced call cuts balanced ones
    return Reduction(m, op, spec.dtype, axis, nbytes)


def packs_with(pack: list[Reduction | Gather], kind: Reduction | Gather) -> bool:
    """Whether ``kind`` can join ``pack`` in one MPI call (same collective, mesh dim, dtype,
    axis and op; float sums only while the pack stays a short message)."""
    first = pack[0]
    if type(kind) is not type(first):
        return False
    total = sum(x.nbytes for x in pack) + kind.nbytes
    if isinstance(first, Gather):
        return kind[:3] == first[:3] and total <= GATHER_PACK_BYTES
    return kind[:4] == first[:4] and (first.exact() or total <= SHORT_MESSAGE)


def to_front(block: np.ndarray, axis: int, dtype: Any = None) -> np.ndarray:
    """A C-contiguous copy of a NumPy ``block`` with ``axis`` first (as the collectives
    pack it; no copy when already so)."""
    return np.ascontiguousarray(block if axis == 0 else np.moveaxis(block, axis, 0), dtype=dtype)


def from_front(buffer: np.ndarray, axis: int) -> np.ndarray:
    """Undo :func:`to_front`: the first axis back at ``axis``, C-contiguous."""
    return buffer if axis == 0 else np.ascontiguousarray(np.moveaxis(buffer, 0, axis))
