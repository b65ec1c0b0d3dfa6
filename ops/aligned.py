"""Elementwise ufuncs over operands whose blocks are cut differently, computed in pieces.

Shifted slices of one sharded array (``u[1:] - u[:-1]``, the eight
neighbours of Game of Life, a 5-point stencil) have the same placements and
block boundaries shifted by a few cells. Aligning them the general way
moves each shifted operand into the result's layout: a new block, filled
from the operand's own block and a few cells of its neighbours'. Here the
result block is computed piece by piece instead: it is cut where any moved
operand's piece changes hands, each piece of the result is the ufunc of the
operands' pieces (views of their own blocks where the rank holds them, the
received cells elsewhere), and only the cells that cross ranks travel: one
message per pair of ranks for all moved operands (their bytes packed
together), point to point on buffers kept with the cached step. The pieces
that need no received cells are computed while the messages travel, so a
rank rarely waits for its neighbour. Nothing of a block is copied, so a
stencil costs the arithmetic and one message round per op, not a copy of
each operand. (One ``Alltoallv`` per op, made blocking, measured 37 us for
a row-shifted 256^2 add at 2 ranks against 35 this way and 24 for the same
add without a halo; a debug tool watching gets the ``Alltoallv`` through
:func:`dmesh.collectives.all_to_all`.)

Applies to a ufunc call with one output and no keywords whose moved
operands have the result's shape, no partial placements and moves on the
same mesh (the pieces come from :func:`~dmesh.core.transfers.transfer_plan`,
pure and cached); anything else takes the general path.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
from mpi4py import MPI

from dmesh.collectives import tracing
from dmesh.collectives.blocks import offsets_of
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.scalars import KEY_SCALARS, KIND_TYPED
from dmesh.core.transfers import transfer_crosses, transfer_plan
from dmesh.darray import DArray
from dmesh.ops import halo_messages as messages
from dmesh.ops.halo_messages import Kept
from dmesh.ops.propagation import Decision

__all__ = ["Moved", "Piecewise", "Prepared", "plan", "possible", "prepare", "run"]


class Moved(NamedTuple):
    """One moved operand's part in a piecewise call, on one rank."""

    operand: int  # the operand's position
    kept: tuple[tuple[slice, ...], tuple[slice, ...]] | None  # (in its block, in the result block)
    incoming: tuple[
        tuple[int, tuple[slice, ...]], ...
    ]  # (sender, slices in the result block), rank order
    outgoing: tuple[
        tuple[int, tuple[slice, ...]], ...
    ]  # (receiver, slices in its block), rank order


class Piecewise(NamedTuple):
    """A planned piecewise call: the moved operands, whether any cell crosses ranks, the cuts."""

    moved: tuple[Moved, ...]
    crosses: bool  # the same on every rank: from the layouts alone
    boxes: tuple[tuple[slice, ...], ...]  # the result block cut where any moved piece changes hands


def _ranks(mesh: Any) -> tuple[int, ...]:
    return tuple(range(mesh.size()))


@lru_cache(maxsize=1024)
def plan(
    sources: tuple[Layout | None, ...],
    targets: tuple[Layout | None, ...],
    result: Layout,
    me: int,
    nranks: int,
    coord: tuple[int, ...],
) -> Piecewise | None:
    """The piecewise plan of a call, or None when it does not apply (pure, cached).

    ``sources``/``targets``: each operand's layout before and after the
    decision (None for an operand that does not move or is no DArray).
    """
    ranks = tuple(range(nranks))
    moved: list[Moved] = []
    crosses = False
    out_shape = result.local_shape(coord)
    for i, (src, dst) in enumerate(zip(sources, targets)):
        if src is None or dst is None:
            continue
        if src.shape != result.shape or any(
            p.is_partial() for p in src.placements + dst.placements
        ):
            return None
        sends, receives = transfer_plan(src, dst, ranks, ranks, me)
        kept_src = next((index for rank, index in sends if rank == me), None)
        kept_dst = next((index for rank, index in receives if rank == me), None)
        kept = None if kept_src is None or kept_dst is None else (kept_src, kept_dst)
        incoming = tuple((r, index) for r, index in receives if r != me)
        outgoing = tuple((r, index) for r, index in sends if r != me)
        moved.append(Moved(i, kept, incoming, outgoing))
        crosses = crosses or transfer_crosses(src, dst, ranks, ranks)  # (from the layouts)
    if not moved:
        return None
    cuts: list[set[int]] = [{0, n} for n in out_shape]
    for m in moved:
        held = ([m.kept[1]] if m.kept is not None else []) + [index for _, index in m.incoming]
        for box in held:
            for d, s in enumerate(box):
                cuts[d].update((s.start, s.stop))
    intervals = [sorted(c) for c in cuts]
    boxes = tuple(
        tuple(slice(lo, hi) for lo, hi in box)
        for box in itertools.product(*(list(itertools.pairwise(c)) for c in intervals))
        if all(hi > lo for lo, hi in box)
    )
    return Piecewise(tuple(moved), crosses, boxes)


def possible(decision: Decision, specs: tuple[Any, ...]) -> bool:
    """Whether :func:`run` may apply to a call of this decision on operands of ``specs``
    (None for a scalar): what it and :func:`plan` check of the layouts alone. The step
    cache keys both, so a cached call where this is False skips :func:`run`."""
    result = decision.result
    if not result.shape or any(p.is_partial() for p in result.placements):
        return False
    for spec, target, move in zip(specs, decision.operands, decision.moves):
        if not move or target is None:
            continue
        placements = spec.placements + target.placements
        if spec.shape != result.shape or any(p.is_partial() for p in placements):
            return False
    return any(decision.moves)


class Prepared(NamedTuple):
    """A piecewise call planned down to its buffers and views, for operands of fixed specs.

    Everything here follows from the step (operand specs, scalar types, the
    decision) and the rank, so a cached step computes it once
    (``run`` keeps it under the step) and each later call only packs, sends and computes.
    """

    out_shape: tuple[int, ...]
    dtype: Any  # the result's
    crosses: bool  # whether any cell crosses ranks, so messages are sent (alike on every rank)
    outgoing: tuple[tuple[int, tuple[slice, ...]], ...]  # (operand, its block's cells), packed
    send: tuple[list[int], list[int]]  # byte counts and displacements, per rank
    receive: tuple[list[int], list[int]]
    incoming: tuple[tuple[int, int, tuple[int, ...], Any], ...]  # (begin, nbytes, shape, dtype)
    # Per box of the result block: (box, per operand (source, key)); the source
    # is an operand's position (its block), ~slot (received cells), or None (a
    # scalar operand, passed as it is).
    tasks: tuple[tuple[tuple[slice, ...], tuple[tuple[int | None, Any], ...]], ...]
    local_tasks: int  # how many of the tasks (first) read no received cells
    # Where the crossing cells are few (a halo, at most KEPT_BYTES): the
    # messages on buffers kept with the plan (None: made per call).
    kept: Kept | None


def prepare(func: np.ufunc, decision: Decision, operands: list[Any], mesh: Any) -> Prepared | None:
    """The :class:`Prepared` call, or None where computing in pieces does not apply."""
    coord = mesh.coordinate
    if coord is None or func.nout != 1 or func.signature is not None or not decision.result.shape:
        return None
    if any(p.is_partial() for p in decision.result.placements):
        return None
    for x, move in zip(operands, decision.moves):
        if isinstance(x, DArray) and not move and not _fits(x._spec.layout, decision.result):
            return None
    sources = tuple(x._spec.layout if move else None for x, move in zip(operands, decision.moves))
    targets = tuple(t if move else None for t, move in zip(decision.operands, decision.moves))
    comm = mesh.comm()
    nranks = comm.Get_size()
    piecewise = plan(sources, targets, decision.result, comm.Get_rank(), nranks, coord)
    if piecewise is None:
        return None
    dtypes: list[Any] = [x.dtype if isinstance(x, DArray) else None for x in operands]
    empty = [
        np.empty((0,) * x.ndim, dtypes[i]) if dtypes[i] is not None else x
        for i, x in enumerate(operands)
    ]
    dtype = func(*empty).dtype
    # The bytes: per receiving rank, the moved operands' cells in operand order.
    send_parts: list[list[tuple[int, tuple[slice, ...], int]]] = [[] for _ in range(nranks)]
    receive_parts: list[list[tuple[int, tuple[slice, ...], int]]] = [[] for _ in range(nranks)]
    for m in piecewise.moved:
        item = dtypes[m.operand].itemsize
        for rank, index in m.outgoing:
            send_parts[rank].append((m.operand, index, item * _size(index)))
        for rank, index in m.incoming:
            receive_parts[rank].append((m.operand, index, item * _size(index)))
    send_counts = [sum(n for *_, n in parts) for parts in send_parts]
    receive_counts = [sum(n for *_, n in parts) for parts in receive_parts]
    slots: dict[tuple[int, int], int] = {}
    incoming: list[tuple[int, int, tuple[int, ...], Any]] = []
    at = 0
    for rank, parts in enumerate(receive_parts):
        for operand, index, nbytes in parts:
            slots[operand, rank] = len(incoming)
            shape = tuple(s.stop - s.start for s in index)
            incoming.append((at, nbytes, shape, dtypes[operand]))
            at += nbytes
    moved = {m.operand: m for m in piecewise.moved}
    shape = decision.result.shape
    tasks = []
    for box in piecewise.boxes:
        getters: list[tuple[int | None, Any]] = []
        for i, x in enumerate(operands):
            part = moved.get(i)
            if part is not None:
                getters.append(_piece(part, slots, box))
            elif isinstance(x, DArray):
                getters.append((i, _broadcast_box(x.shape, shape, box)))
            else:
                getters.append((None, i))
        tasks.append((box, tuple(getters)))
    outgoing = tuple((operand, index) for parts in send_parts for operand, index, _ in parts)
    send = (send_counts, offsets_of(send_counts))
    receive = (receive_counts, offsets_of(receive_counts))
    # The tasks that read no received cells first: they run while the messages
    # travel. (Reordered, the boxes are written all the same: each once, disjoint.)
    tasks.sort(key=lambda task: any(src is not None and src < 0 for src, _ in task[1]))
    local_tasks = sum(
        1 for _, getters in tasks if all(src is None or src >= 0 for src, _ in getters)
    )
    kept = None
    if piecewise.crosses and max(sum(send_counts), sum(receive_counts)) <= messages.KEPT_BYTES:
        kept = messages.kept(operands, outgoing, send, receive, incoming, reused=True)
    return Prepared(
        decision.result.local_shape(coord),
        dtype,
        piecewise.crosses,
        outgoing,
        send,
        receive,
        tuple(incoming),
        tuple(tasks),
        local_tasks,
        kept,
    )


# id(step) -> (step, its Prepared or None): a cached step's operand specs and
# scalar types fix everything a Prepared holds (dmesh.core.scalars: a scalar's
# type is its dtype). The step is kept so that its id is not reused meanwhile.
_prepared: dict[int, tuple[Any, Prepared | None]] = {}
_LIMIT = 1024


def run(
    func: np.ufunc,
    decision: Decision,
    operands: list[Any],
    mesh: Any,
    donor: int = -1,
    step: Any = None,
    into: Any = None,
) -> DArray | None:
    """``func(*operands)`` computed in pieces (see the module); None where it does not apply.

    ``donor``: an operand that stays in place whose block may hold the result
    (a temporary, ``dmesh._elision``); used when it has the result block's
    shape and dtype. Each piece of the result then reads the same cells of
    that block as it writes, which an elementwise ufunc allows. ``step``: the
    cached step of the call, under which the preparation is kept. ``into``:
    the block of ``out=`` (laid out as the result), written in place of a new
    one; an operand whose block shares memory with it other than as the very
    same block (``u[1:] += u[:-1]``) is read from a local copy of its block,
    as NumPy reads overlapping inputs.
    """
    keyed = step is not None and KIND_TYPED
    for x in operands:
        kind = type(x)
        if kind is DArray:
            if type(x._local) is not np.ndarray:
                return None  # (NumPy blocks only: the pieces are computed into np.empty)
        elif kind not in KEY_SCALARS:
            if isinstance(x, DArray) or (hasattr(x, "ndim") and x.ndim):
                return None
            keyed = False  # (a 0-d array: its dtype is not in the step's key)
    entry = _prepared.get(id(step)) if keyed else None
    if entry is not None and entry[0] is step:
        ready = entry[1]
    else:
        ready = prepare(func, decision, operands, mesh)
        if keyed:
            if len(_prepared) >= _LIMIT:
                _prepared.clear()
            _prepared[id(step)] = (step, ready)
    if ready is None:
        return None
    if into is not None and not np.can_cast(ready.dtype, into.dtype, "same_kind"):
        return None  # (the general path raises NumPy's casting error on every rank)
    requests: list[MPI.Request] = []
    tasks = ready.tasks
    first = len(tasks)
    if ready.crosses and not tracing.hooked:
        # Receives posted, crossing cells packed and sent, then the local pieces
        # while they travel. Every rank takes this path alike (crosses is from
        # the layouts; a debug tool watches every rank or none).
        kept = ready.kept or messages.kept(
            operands, ready.outgoing, ready.send, ready.receive, ready.incoming
        )
        requests = messages.start(kept, operands, mesh.comm())
        received = kept.received
        first = ready.local_tasks
    elif ready.crosses:  # a debug tool watches: the Alltoallv it sees
        received = messages.watched(
            operands, ready.outgoing, ready.send, ready.receive, ready.incoming, mesh.comm()
        )
    else:
        received = []
    try:
        if into is not None:
            out = into
            operands = _unaliased(operands, into)
        else:
            out = _donated(operands, decision, donor, ready.out_shape, ready.dtype)
            if out is None:
                out = np.empty(ready.out_shape, ready.dtype)
        _compute(func, tasks[:first], operands, received, out)
    finally:
        if requests:
            MPI.Request.Waitall(requests)
    _compute(func, tasks[first:], operands, received, out)
    return DArray(out, decision.result_spec(mesh, ready.dtype))


def _compute(
    func: np.ufunc, tasks: Any, operands: list[Any], received: list[Any], out: Any
) -> None:
    """``func`` over each task's pieces, into its box of ``out``."""
    for box, getters in tasks:
        args = []
        for source, key in getters:
            if source is None:  # a scalar
                args.append(operands[key])
            elif source >= 0:  # a view of the operand's own block
                args.append(operands[source]._local[key])
            else:  # received cells
                args.append(received[~source][key])
        func(*args, out=out[box])


def _unaliased(operands: list[Any], into: Any) -> list[Any]:
    """``operands`` with each DArray whose block may share memory with ``into`` (other than
    being ``into`` itself, read at the very cells it writes) replaced by one over a copy of
    its block. Local: whatever each rank finds, every rank makes the same calls."""
    copied = list(operands)
    for i, x in enumerate(operands):
        if type(x) is DArray and x._local is not into and np.may_share_memory(x._local, into):
            copied[i] = DArray(x._local.copy(), x._spec)
    return copied


def _donated(
    operands: list[Any], decision: Decision, donor: int, shape: tuple[int, ...], dtype: Any
) -> Any:
    """The donor's block, where it can hold the result block; else None."""
    if donor < 0 or decision.moves[donor]:
        return None
    x = operands[donor]
    block = x._local
    if type(block) is not np.ndarray or block.shape != shape or block.dtype != dtype:
        return None
    if any(move and y is x for y, move in zip(operands, decision.moves)):
        return None  # (it is read shifted too: its cells must outlive their pieces)
    return block


def _fits(x: Layout, result: Layout) -> bool:
    """Whether an operand laid out as ``x`` has the result's blocks on every dim it does not
    broadcast (and is whole on those it does). From the layouts alone: every rank agrees."""
    lead = len(result.shape) - len(x.shape)
    if lead < 0:
        return False
    for d in range(len(x.shape)):
        mesh_dims = sharding_mesh_dims(x.placements, d)
        if x.shape[d] == 1 and result.shape[d + lead] != 1:
            if mesh_dims:
                return False
        elif x.bounds[d] != result.bounds[d + lead] or mesh_dims != sharding_mesh_dims(
            result.placements, d + lead
        ):
            return False
    return True


def _size(index: tuple[slice, ...]) -> int:
    return math.prod(s.stop - s.start for s in index)


def _broadcast_box(
    own: tuple[int, ...], shape: tuple[int, ...], box: tuple[slice, ...]
) -> tuple[slice, ...]:
    """``box`` of the result as a key into an operand of global shape ``own`` that broadcasts."""
    lead = len(shape) - len(own)
    return tuple(
        slice(None) if own[d - lead] == 1 and shape[d] != 1 else box[d]
        for d in range(lead, len(shape))
    )


def _inside(box: tuple[slice, ...], index: tuple[slice, ...]) -> bool:
    return all(i.start <= b.start and b.stop <= i.stop for b, i in zip(box, index))


def _piece(
    m: Moved, slots: dict[tuple[int, int], int], box: tuple[slice, ...]
) -> tuple[int, tuple[slice, ...]]:
    """Where moved operand ``m``'s cells at the result's ``box`` are: ``(operand, key)`` in
    its block, or ``(~slot, key)`` in the received cells."""
    if m.kept is not None and _inside(box, m.kept[1]):
        src, dst = m.kept
        return m.operand, tuple(
            slice(s.start + b.start - t.start, s.start + b.stop - t.start)
            for s, t, b in zip(src, dst, box)
        )
    for rank, index in m.incoming:
        if _inside(box, index):
            key = tuple(slice(b.start - i.start, b.stop - i.start) for i, b in zip(index, box))
            return ~slots[m.operand, rank], key
    raise AssertionError(f"no piece covers {box}")  # pragma: no cover - the boxes follow the cuts
