"""``np.roll`` along a sharded axis: the rolled array in the input's layout, one message.

Rolling by ``s`` along an axis of length ``n`` moves rows ``[0, n - s)`` to
``[s, n)`` and rows ``[n - s, n)`` to ``[0, s)``. Each of the two moves is a
transfer between re-based views of the one layout
(:func:`dmesh.core.transfers.transfer_pieces` plans both from the layouts
alone), so every rank knows which rows it keeps, which it sends and which it
receives. The result keeps the input's block boundaries: a rank copies the
rows it keeps straight into its new block, and the rows that change holder
(``s`` rows per block boundary for a small shift) travel in one message per
pair of ranks for both moves: on a host mesh point to point
(:mod:`dmesh.ops.halo_messages`, as shifted-slice ops send theirs), sent
before the kept rows are copied so that the copy (most of the block) hides
the message and the neighbour's lag; one ``all_to_all`` after the copy
where a debug tool watches, or for device blocks. Joining the two slices instead
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
from dmesh.collectives.blocks import offsets_of
from dmesh.collectives.device import array_module
from dmesh.core.layout import Layout
from dmesh.core.transfers import transfer_pieces
from dmesh.darray import DArray
from dmesh.ops import halo_messages as messages

__all__ = [
    "RollPlan", "placed_empty", "roll_blocks", "roll_plan", "roll_whole", "rolled_block",
]  # fmt: skip

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
    prepared = _prepared.get((a._spec, shift, axis))
    if prepared is None:
        prepared = _prepare(a, shift, axis, comm)
    plan, parts, kept = prepared
    out = placed_empty(block, layout.local_shape(mesh.coordinate))
    if not plan.crosses:
        _copy_kept(plan, block, out)
    elif mesh.device == "cpu":
        outgoing, send, receive, incoming = parts
        if tracing.hooked:  # a debug tool watching sees one all_to_all
            _copy_kept(plan, block, out)
            received = messages.watched([a], outgoing, send, receive, incoming, comm)
        else:  # the crossing rows sent first: the copy of the kept rows hides them
            kept = kept or messages.kept([a], outgoing, send, receive, incoming)
            requests = messages.start(kept, [a], comm)
            try:
                _copy_kept(plan, block, out)
            finally:
                MPI.Request.Waitall(requests)
            received = kept.received
        for (_, index), cells in zip(plan.receives, received):
            out[index] = cells
    else:  # device blocks: one all_to_all of elements (the collectives stage them)
        _copy_kept(plan, block, out)
        _device_exchange(plan, block, out, comm)
    return DArray(out, a._spec)


# Blocks from this size get a placed result (placed_empty); below it the copy is short
# and a fresh page-aligned chunk is not what the allocator returns anyway.
PLACED_BYTES = 1 << 16
_GAP = 2048  # bytes between the source and its copy, mod 4096


def placed_empty(block: Any, shape: tuple[int, ...]) -> Any:
    """An empty NumPy block of ``shape`` in ``block``'s dtype for a roll of ``block``,
    starting 2 KiB (mod 4 KiB) after it.

    A roll copies its source shifted by a few elements (rows of the same length): when
    the destination lies 8-32 bytes after the source modulo 4 KiB, each load aliases a
    store just made (the CPU's 4K aliasing) and the copy runs up to 8x slower (measured:
    1024^2 int64 rolled by -1 along its rows, 0.29 ms at most offsets, 2.5 ms at 16 bytes).
    Where the allocator puts a fresh block is chance, and a compiled plan's reuse of
    blocks repeats the same unlucky offset every call; so large blocks are cut from a
    buffer 4 KiB longer, at the offset that puts them half a page away. The result is a
    view of that buffer (its only user). Device blocks and small ones: a plain ``empty``.
    """
    xp = array_module(block)
    dtype = block.dtype
    nbytes = math.prod(shape) * dtype.itemsize
    if xp is not np or nbytes < PLACED_BYTES:
        return xp.empty(shape, dtype)
    raw = np.empty(nbytes + 4096, np.uint8)
    start = (_GAP + block.ctypes.data - raw.ctypes.data) % 4096
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def roll_whole(block: Any, shift: int, axis: int) -> Any:
    """``np.roll(block, shift, axis)`` for ``0 < shift < n``, into a placed block
    (:func:`placed_empty`): a rank's roll along an axis its block holds whole."""
    out = placed_empty(block, block.shape)
    n = block.shape[axis]
    head = (slice(None),) * axis
    out[head + (slice(shift, None),)] = block[head + (slice(0, n - shift),)]
    out[head + (slice(0, shift),)] = block[head + (slice(n - shift, None),)]
    return out


def rolled_block(block: Any, *, spec: Any, shift: int, axis: int) -> Any:
    """This rank's block of ``np.roll`` by ``0 < shift < n`` along ``axis`` of an array of
    ``spec``, without partial terms, whose block is ``block`` (collective where ``axis``
    is sharded): the node a ``dmesh.compile`` trace records for ``np.roll``."""
    if spec.layout.bounds[axis] is None:  # every block holds the whole axis
        return roll_whole(block, shift, axis)
    rolled = roll_blocks(DArray(block, spec), shift, axis)
    assert rolled is not None  # (no partial terms: the caller checked)
    return rolled._local


# (spec, shift, axis) -> (the rank's plan, its messages' parts, their buffers or None):
# what a repeated roll of an array of that spec needs but its data. The buffers
# (up to messages.KEPT_BYTES) are reused: each roll completes its messages
# before it returns. Bounded: specs hold meshes.
_prepared: dict[tuple[Any, int, int], tuple[RollPlan, Any, messages.Kept | None]] = {}


def _prepare(
    a: DArray, shift: int, axis: int, comm: MPI.Intracomm
) -> tuple[RollPlan, Any, messages.Kept | None]:
    """The plan, message parts and (small) kept buffers of rolling ``a`` by ``shift``."""
    plan = roll_plan(a._spec.layout, shift, axis, comm.Get_size(), comm.Get_rank())
    parts = None
    kept = None
    if plan.crosses:
        parts = _messages(plan, a.dtype, comm.Get_size())
        outgoing, send, receive, incoming = parts
        if sum(send[0]) + sum(receive[0]) <= messages.KEPT_BYTES:
            kept = messages.kept([a], outgoing, send, receive, incoming, reused=True)
    if len(_prepared) >= 256:
        _prepared.clear()
    entry = (plan, parts, kept)
    _prepared[(a._spec, shift, axis)] = entry
    return entry


def _copy_kept(plan: RollPlan, block: Any, out: Any) -> None:
    for source, target in plan.kept:
        out[target] = block[source]


def _messages(plan: RollPlan, dtype: np.dtype, nranks: int) -> tuple[Any, Any, Any, Any]:
    """The roll's crossing rows as :mod:`dmesh.ops.halo_messages` takes them: the cells
    sent (of the one operand, in receiver order), byte counts and displacements per
    rank, and where each received part lies (in sender order)."""
    item = dtype.itemsize
    send_counts = [0] * nranks
    receive_counts = [0] * nranks
    for rank, index in plan.sends:
        send_counts[rank] += _count(index) * item
    incoming = []
    at = 0
    for rank, index in plan.receives:
        shape = tuple(s.stop - s.start for s in index)
        nbytes = math.prod(shape) * item
        receive_counts[rank] += nbytes
        incoming.append((at, nbytes, shape, dtype))
        at += nbytes
    outgoing = tuple((0, index) for _, index in plan.sends)
    send = (send_counts, offsets_of(send_counts))
    return outgoing, send, (receive_counts, offsets_of(receive_counts)), incoming


def _device_exchange(plan: RollPlan, block: Any, out: Any, comm: MPI.Intracomm) -> None:
    """The crossing rows of device blocks in one ``all_to_all`` of elements."""
    xp = array_module(block)
    nranks = comm.Get_size()
    send_counts = [0] * nranks
    receive_counts = [0] * nranks
    for rank, index in plan.sends:
        send_counts[rank] += _count(index)
    for rank, index in plan.receives:
        receive_counts[rank] += _count(index)
    send = xp.empty(sum(send_counts), block.dtype)
    at = 0
    for _, index in plan.sends:  # in receiver order, each move in plan order
        part = block[index]
        send[at : at + part.size].reshape(part.shape)[...] = part
        at += part.size
    flat = coll.all_to_all(send, 0, 0, comm, split_sizes=send_counts, concat_sizes=receive_counts)
    at = 0
    for _, index in plan.receives:  # in sender order, as all_to_all concatenates
        shape = tuple(s.stop - s.start for s in index)
        out[index] = flat[at : at + math.prod(shape)].reshape(shape)
        at += math.prod(shape)


def _count(index: Slices) -> int:
    return math.prod(s.stop - s.start for s in index)
