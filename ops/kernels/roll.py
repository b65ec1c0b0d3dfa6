"""``np.roll`` along a sharded axis: the rolled array in the input's layout, one message.

Rolling by ``s`` along an axis of length ``n`` moves rows ``[0, n - s)`` to
``[s, n)`` and rows ``[n - s, n)`` to ``[0, s)``. Each of the two moves is a
transfer between re-based views of the one layout
(:func:`dmesh.core.transfers.transfer_pieces` plans both from the layouts
alone), so every rank knows which rows it keeps, which it sends and which it
receives. The result keeps the input's block boundaries: a rank copies the
rows it keeps straight into its new block, and the rows that change holder
(``s`` rows per block boundary for a small shift) travel in one message per
pair of ranks for both moves, point to point on a host mesh and sent
before the kept rows are copied, so that the copy (most of the block) hides
the message and the neighbour's lag (one ``Alltoallv`` after the copy
where a debug tool watches, or for device blocks). Joining the two slices instead
(:func:`dmesh.ops.kernels.joins.join`) moves each slice into place (one
message and one copy each) and then concatenates (a third copy).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
from mpi4py import MPI

import dmesh.collectives as coll
from dmesh.collectives import tracing
from dmesh.collectives.device import array_module
from dmesh.core.layout import Layout
from dmesh.core.transfers import transfer_pieces
from dmesh.darray import DArray

__all__ = ["RollPlan", "roll_blocks", "roll_plan"]

Slices = tuple[slice, ...]


class RollPlan(NamedTuple):
    """What one rank does to roll its block: copies, sends and receives (block-relative)."""

    kept: tuple[tuple[Slices, Slices], ...]  # (in its block, in its new block)
    sends: tuple[tuple[int, Slices], ...]  # (receiver, in its block), receiver order
    receives: tuple[tuple[int, Slices], ...]  # (sender, in its new block), sender order
    crosses: bool  # whether any row changes rank (the same on every rank)


@lru_cache(maxsize=256)
def roll_plan(layout: Layout, shift: int, axis: int, nranks: int, me: int) -> RollPlan:
    """The roll by ``shift`` (``0 < shift < n``) along ``axis`` of an array laid out as
    ``layout`` on a mesh of ``nranks`` ranks in row-major coordinate order (pure)."""
    n = layout.shape[axis]
    ranks = tuple(range(nranks))
    coords = list(np.ndindex(*layout.mesh_shape))
    mine = layout.block(coords[me])
    kept: list[tuple[Slices, Slices]] = []
    sends: list[tuple[int, Slices]] = []
    receives: list[tuple[int, Slices]] = []
    crosses = False
    # (first source row, first target row, rows): the two moves, in this order on every rank.
    for source, target, rows in ((0, shift, n - shift), (n - shift, 0, shift)):
        pieces = transfer_pieces(
            _rows(layout, axis, source, rows), _rows(layout, axis, target, rows), ranks, ranks
        )
        for sender, receiver, box in pieces:
            crosses = crosses or sender != receiver
            if me not in (sender, receiver):
                continue
            into_source = _local(box, mine, axis, source)
            into_target = _local(box, mine, axis, target)
            if sender == receiver:
                kept.append((into_source, into_target))
            elif sender == me:
                sends.append((receiver, into_source))
            else:
                receives.append((sender, into_target))
    by_rank = lambda move: move[0]  # noqa: E731 - stable: each move's order kept within a rank
    return RollPlan(
        tuple(kept), tuple(sorted(sends, key=by_rank)), tuple(sorted(receives, key=by_rank)),
        crosses,
    )  # fmt: skip


def _rows(layout: Layout, axis: int, first: int, rows: int) -> Layout:
    """``layout`` restricted to ``rows`` rows from ``first`` along ``axis``, re-based at 0."""
    cut = layout.bounds[axis]
    assert cut is not None  # (a sharded axis)
    bounds = list(layout.bounds)
    bounds[axis] = tuple(min(max(b - first, 0), rows) for b in cut)
    shape = list(layout.shape)
    shape[axis] = rows
    return Layout(layout.mesh_shape, layout.placements, tuple(shape), tuple(bounds))


def _local(box: Any, block: Any, axis: int, first: int) -> Slices:
    """A box of a re-based layout (rows from ``first`` along ``axis``) as slices of ``block``."""
    return tuple(
        slice(lo + (first if d == axis else 0) - start, hi + (first if d == axis else 0) - start)
        for d, ((lo, hi), (start, _)) in enumerate(zip(box, block))
    )


def roll_blocks(a: DArray, shift: int, axis: int) -> DArray | None:
    """``np.roll(a, shift, axis)`` for an axis some mesh dim shards (collective), or None
    where it does not apply (partial terms): every rank decides from the layout alone."""
    layout = a._spec.layout
    if layout.bounds[axis] is None or any(p.is_partial() for p in layout.placements):
        return None
    n = a.shape[axis]
    shift %= n
    mesh = a.mesh
    block = a._local
    xp = array_module(block)
    if mesh.coordinate is None:  # not a member: an empty block, no message
        return DArray(xp.empty_like(block), a._spec)
    comm = mesh.comm()
    plan = roll_plan(layout, shift, axis, comm.Get_size(), comm.Get_rank())
    out = xp.empty(layout.local_shape(mesh.coordinate), a.dtype)
    if plan.crosses and mesh.device == "cpu" and not tracing.hooked:
        _overlapped(plan, block, out, comm)
        return DArray(out, a._spec)
    for source, target in plan.kept:
        out[target] = block[source]
    if plan.crosses:  # (a debug tool watching sees the all_to_all; device blocks stage)
        nranks = comm.Get_size()
        send_counts = [0] * nranks
        receive_counts = [0] * nranks
        for rank, index in plan.sends:
            send_counts[rank] += _count(index)
        for rank, index in plan.receives:
            receive_counts[rank] += _count(index)
        send = xp.empty(sum(send_counts), a.dtype)
        at = 0
        for _, index in plan.sends:  # in receiver order, each move in plan order
            part = block[index]
            send[at : at + part.size].reshape(part.shape)[...] = part
            at += part.size
        flat = coll.all_to_all(
            send, 0, 0, comm, split_sizes=send_counts, concat_sizes=receive_counts
        )
        at = 0
        for _, index in plan.receives:  # in sender order, as all_to_all concatenates
            shape = tuple(s.stop - s.start for s in index)
            out[index] = flat[at : at + math.prod(shape)].reshape(shape)
            at += math.prod(shape)
    return DArray(out, a._spec)


_TAG = 0xA12  # roll's point-to-point messages, each complete before roll_blocks returns


def _overlapped(plan: RollPlan, block: np.ndarray, out: np.ndarray, comm: MPI.Intracomm) -> None:
    """The crossing rows point to point, one message per pair of ranks, while the kept rows
    (most of the block) are copied: a rank rarely waits for its neighbour's rows."""
    receives = _grouped(plan.receives, block.dtype)
    sends = _grouped(plan.sends, block.dtype)
    # (as bytes: any dtype a block may have, float16 and records included)
    requests = [comm.Irecv(buf.view(np.uint8), rank, _TAG) for rank, (buf, _) in receives.items()]
    for rank, (buffer, parts) in sends.items():
        at = 0
        for index in parts:  # each receiver's parts in plan order, as it unpacks them
            part = block[index]
            buffer[at : at + part.size].reshape(part.shape)[...] = part
            at += part.size
        requests.append(comm.Isend(buffer.view(np.uint8), rank, _TAG))
    try:
        for source, target in plan.kept:
            out[target] = block[source]
    finally:
        MPI.Request.Waitall(requests)
    for buffer, parts in receives.values():
        at = 0
        for index in parts:
            shape = tuple(s.stop - s.start for s in index)
            out[index] = buffer[at : at + math.prod(shape)].reshape(shape)
            at += math.prod(shape)


def _grouped(
    moves: tuple[tuple[int, Slices], ...], dtype: np.dtype
) -> dict[int, tuple[np.ndarray, list[Slices]]]:
    """Per peer rank (in rank order): one buffer for all its parts, and the parts in order."""
    parts: dict[int, list[Slices]] = {}
    for rank, index in moves:
        parts.setdefault(rank, []).append(index)
    return {
        rank: (np.empty(sum(_count(i) for i in indices), dtype), indices)
        for rank, indices in parts.items()
    }


def _count(index: Slices) -> int:
    return math.prod(s.stop - s.start for s in index)
