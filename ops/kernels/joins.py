"""Joining DArrays along a sharded axis without gathering: re-cut, then join block by block.

``np.concatenate``'s rule joins blocks that hold the whole joining axis, so an
operand sharded along it would first be replicated along its mesh dims (an
all-gather). :func:`join` instead gives the result balanced blocks along
the joining axis and moves to each rank the parts of each operand that fall
in its block, the pieces of all the operands in one all-to-all at most
(:class:`JoinPlan`); each rank writes them, in operand order, into its block.
Every rank derives the same plan from the layouts, so the messages match,
and the plan is kept: a repeated join of the same specs is a lookup, the
copies and the one exchange.

Calls of ``np.concatenate``, ``np.vstack`` and ``np.stack`` whose operands'
specs were seen before are kept too (:func:`seen`): what the first call did
(such a join, or each rank joining its own blocks) runs again without the
checks, the parse and the decision.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

import dmesh.collectives as coll
from dmesh import _hooks
from dmesh.collectives import tracing
from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError
from dmesh.core.layout import Layout
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.core.transfers import transfer_crosses, transfer_plan
from dmesh.darray import DArray

__all__ = [
    "JoinPlan", "as_darray", "join", "local_join_spec", "local_run", "planned_join",
    "remember", "replayed", "run_join", "run_local_join", "seen", "seen_key", "sharded_along",
    "unseen",
]  # fmt: skip


def as_darray(x: Any, mesh: Any) -> DArray:
    """``x`` as a DArray on ``mesh``: a plain value is the same on every rank, so replicated."""
    if isinstance(x, DArray):
        return x
    from dmesh.convert import distribute

    return distribute(np.asarray(x), mesh, [Replicate()] * mesh.ndim)


def sharded_along(x: Any, axis: int) -> bool:
    """Whether some mesh dim shards ``x`` (a DArray) along ``axis``."""
    return isinstance(x, DArray) and any(p.is_shard(axis) for p in x.placements)


Slices = tuple[slice, ...]


class JoinPlan(NamedTuple):
    """What a join of DArrays already laid out with the result's placements does on this
    rank, from the specs alone: the pieces of each operand it keeps, sends and receives,
    all in one all-to-all over the mesh (every rank derives the same counts)."""

    spec: DArraySpec  # the result's
    local_shape: tuple[int, ...]  # this rank's block of it
    kept: tuple[tuple[int, Slices, Slices], ...]  # (operand, from its block, into ours)
    sends: tuple[tuple[int, Slices, int, tuple[int, ...]], ...]  # (operand, slices, start,
    # shape) in the send buffer, rank after rank (operand after operand for each)
    receives: tuple[tuple[Slices, int, tuple[int, ...]], ...]  # (into ours, start, shape)
    send_counts: tuple[int, ...]
    recv_counts: tuple[int, ...]
    crosses: bool  # some piece travels (the same answer on every rank: the layouts say)
    local: bool  # every operand's block is its piece of ours: each rank concatenates
    axis: int  # normalized


# (operand specs, axis, cut) -> the join's plan. Bounded: specs hold meshes.
_plans: dict[tuple[Any, ...], JoinPlan] = {}


def _plan_join(
    items: Sequence[DArray], targets: Sequence[Layout], spec: DArraySpec, axis: int
) -> JoinPlan:
    """The plan that moves each of ``items`` to its ``targets`` layout (its part of the
    result's blocks) and joins them into blocks of ``spec``, on a member rank: the pieces
    of every operand between each pair of ranks travel together (one all-to-all, where
    moving the operands one by one would make one each)."""
    mesh = spec.mesh
    coord = mesh.coordinate
    assert coord is not None  # join returns before planning on a rank outside the mesh
    ranks = tuple(range(mesh.size()))
    me = mesh.comm().Get_rank()
    kept: list[tuple[int, Slices, Slices]] = []
    outgoing: dict[int, list[tuple[int, Slices]]] = {}
    incoming: dict[int, list[Slices]] = {}
    crosses = False
    offset = 0  # where the operand's part starts along the axis in this rank's block
    for i, (x, target) in enumerate(zip(items, targets)):
        source = x._spec.layout
        sends, receives = transfer_plan(source, target, ranks, ranks, me)
        crosses = crosses or transfer_crosses(source, target, ranks, ranks)
        for rank, index in sends:
            if rank != me:
                outgoing.setdefault(rank, []).append((i, index))
        for rank, index in receives:
            into = tuple(
                slice(cut.start + offset, cut.stop + offset) if d == axis else cut
                for d, cut in enumerate(index)
            )
            if rank == me:
                kept.append((i, dict(sends)[me], into))
            else:
                incoming.setdefault(rank, []).append(into)
        offset += target.local_shape(coord)[axis]
    send_counts, recv_counts = [0] * len(ranks), [0] * len(ranks)
    send_plan: list[tuple[int, Slices, int, tuple[int, ...]]] = []
    start = 0
    for rank in sorted(outgoing):
        for i, index in outgoing[rank]:
            shape = tuple(cut.stop - cut.start for cut in index)
            send_plan.append((i, index, start, shape))
            send_counts[rank] += math.prod(shape)
            start += math.prod(shape)
    receive_plan: list[tuple[Slices, int, tuple[int, ...]]] = []
    start = 0
    for rank in sorted(incoming):
        for into in incoming[rank]:
            shape = tuple(cut.stop - cut.start for cut in into)
            receive_plan.append((into, start, shape))
            recv_counts[rank] += math.prod(shape)
            start += math.prod(shape)
    return JoinPlan(
        spec=spec,
        local_shape=spec.local_shape(),
        kept=tuple(kept),
        sends=tuple(send_plan),
        receives=tuple(receive_plan),
        send_counts=tuple(send_counts),
        recv_counts=tuple(recv_counts),
        crosses=crosses,
        local=all(t == x._spec.layout for x, t in zip(items, targets)),
        axis=axis,
    )


def run_join(plan: JoinPlan, arrays: Sequence[DArray]) -> DArray:
    """A planned join of ``arrays`` (of the plan's specs): this rank's pieces copied into
    its block of the result, the others exchanged in one all-to-all (collective)."""
    blocks = [x._local for x in arrays]
    first = blocks[0]
    xp = np if type(first) is np.ndarray else array_module(first)
    dtype = plan.spec.dtype
    out = xp.empty(plan.local_shape, dtype)
    for i, source, into in plan.kept:
        out[into] = blocks[i][source]
    if plan.crosses:
        send = xp.empty(sum(plan.send_counts), dtype)  # (cast to the result's dtype)
        for i, source, start, shape in plan.sends:
            send[start : start + math.prod(shape)].reshape(shape)[...] = blocks[i][source]
        comm = plan.spec.mesh.comm()
        flat = coll.all_to_all(send, 0, 0, comm, split_sizes=plan.send_counts,
                               concat_sizes=plan.recv_counts)  # fmt: skip
        for into, start, shape in plan.receives:
            out[into] = flat[start : start + math.prod(shape)].reshape(shape)
    return DArray(out, plan.spec)


def planned_join(arrays: Sequence[Any], axis: int, result: DArray) -> Run | None:
    """What :func:`join` does again for ``arrays`` (DArrays) joined along ``axis`` (no
    ``cut``), having made ``result``: ``np.concatenate``'s next call of these specs."""
    if not all(type(x) is DArray for x in arrays):
        return None
    plan = _plans.get((tuple(x._spec for x in arrays), axis, None))
    if plan is None or plan.spec is not result._spec:
        return None
    if plan.local:  # every block where it is
        return functools.partial(run_local_join, "concatenate", plan.axis, plan.spec)
    return functools.partial(run_join, plan)


def local_join_spec(specs: Sequence[DArraySpec], axis: int, stacked: bool) -> DArraySpec | None:
    """The spec of ``np.concatenate`` (``stacked``: ``np.stack``) of arrays of ``specs``
    along ``axis`` (normalized) when each rank's join of its own blocks is its block of
    the result: every operand on one mesh, with the same placements, none sharding
    ``axis`` (concatenated), and the same lengths and bounds off it. None otherwise, or
    on a rank outside the mesh."""
    first = specs[0]
    mesh, layout = first.mesh, first.layout
    placements = layout.placements
    if mesh.coordinate is None or (not stacked and any(p.is_shard(axis) for p in placements)):
        return None
    ndim = len(layout.shape)
    off_axis = [d for d in range(ndim) if stacked or d != axis]
    for spec in specs[1:]:
        other = spec.layout
        if (
            spec.mesh is not mesh
            or other.placements != placements
            or len(other.shape) != ndim
            or any(other.shape[d] != layout.shape[d] for d in off_axis)
            or any(other.bounds[d] != layout.bounds[d] for d in off_axis)
        ):
            return None
    shape = list(layout.shape)
    bounds = list(layout.bounds)
    if stacked:  # a new axis: the dims from ``axis`` on move one up
        shape.insert(axis, len(specs))
        bounds.insert(axis, None)
        placements = tuple(
            Shard(p.dim + 1 if p.dim >= axis else p.dim) if isinstance(p, Shard) else p
            for p in placements
        )
    else:
        shape[axis] = sum(spec.layout.shape[axis] for spec in specs)
    dtype = np.result_type(*[spec.dtype for spec in specs])
    result = Layout(layout.mesh_shape, placements, tuple(shape), tuple(bounds))
    return DArraySpec(mesh, result, dtype)


def run_local_join(name: str, axis: int, spec: DArraySpec, arrays: Sequence[DArray]) -> DArray:
    """``np.<name>`` (``concatenate`` or ``stack``) of each rank's blocks: its block of
    the result of ``spec`` (as :func:`local_join_spec` found it)."""
    blocks = [x._local for x in arrays]
    first = blocks[0]
    if type(first) is not np.ndarray:
        return DArray(getattr(array_module(first), name)(blocks, axis=axis), spec)
    if name == "stack":  # np.stack's own steps, without its checks (the specs agree)
        expand = (slice(None),) * axis + (None,)
        blocks = [block[expand] for block in blocks]
    return DArray(np.concatenate(blocks, axis=axis), spec)


def join(arrays: Sequence[Any], axis: int, cut: Sequence[int] | None = None) -> DArray:
    """``np.concatenate(arrays, axis)`` that never gathers an operand sharded along ``axis``.

    Without such an operand this is ``np.concatenate`` (its rule). Otherwise
    the result takes the placements of the first operand sharded along
    ``axis`` (``Partial`` ones reduced) and balanced blocks along it, or the
    boundaries ``cut`` when given (``np.roll`` keeps the input's). Collective.
    """
    key = None
    if all(type(x) is DArray for x in arrays):
        key = (tuple(x._spec for x in arrays), axis, None if cut is None else tuple(cut))
        planned = _plans.get(key)
        if planned is not None:  # the same specs joined before: moves and result known
            return run_join(planned, arrays)
    mesh = next(x for x in arrays if isinstance(x, DArray)).mesh
    items = [as_darray(x, mesh) for x in arrays]
    first = items[0]
    if any(x.ndim != first.ndim for x in items) or first.ndim == 0:
        raise ArgumentError(
            "all the input arrays must have the same number of dimensions (at least 1); "
            f"got shapes {[x.shape for x in items]}"
        )
    axis = _axis(axis, first.ndim)
    for x in items:
        if any(n != f for d, (n, f) in enumerate(zip(x.shape, first.shape)) if d != axis):
            raise ArgumentError(
                f"all the input array dimensions except for the concatenation axis must match "
                f"exactly; got shapes {[y.shape for y in items]} joined along axis {axis}"
            )
    if not any(sharded_along(x, axis) for x in items):
        joined: DArray = np.concatenate(items, axis)  # type: ignore[assignment]  # dispatched
        return joined
    reference = next(x for x in items if sharded_along(x, axis))
    placements: tuple[Placement, ...] = tuple(
        Replicate() if p.is_partial() else p for p in reference.placements
    )
    items = [x if x.placements == placements else x.redistribute(mesh, placements) for x in items]
    reference = next(x for x in items if sharded_along(x, axis))
    shape = list(first.shape)
    shape[axis] = sum(x.shape[axis] for x in items)
    out_cut = Layout.balanced(mesh.shape, placements, tuple(shape)).bounds[axis]
    assert out_cut is not None  # the axis is sharded in ``placements``
    if cut is not None and len(cut) == len(out_cut) and cut[-1] == shape[axis]:
        out_cut = tuple(int(b) for b in cut)
    bounds = list(reference.spec.layout.bounds)
    targets: list[Layout] = []  # each operand's part of the result's blocks
    offset = 0
    for x in items:
        n = x.shape[axis]
        bounds[axis] = tuple(min(max(b - offset, 0), n) for b in out_cut)
        targets.append(Layout(mesh.shape, placements, x.shape, tuple(bounds)))
        offset += n
    bounds[axis] = out_cut
    layout = Layout(mesh.shape, placements, tuple(shape), tuple(bounds))
    dtype = np.result_type(*[x.dtype for x in items])
    spec = DArraySpec(mesh, layout, dtype)
    if _hooks.recorder is not None or any(type(x) is not DArray for x in items):
        # dmesh.compile records each operand's move (stand-ins: no blocks to join here).
        pieces = [x.with_layout(t).local for x, t in zip(items, targets)]
        if mesh.coordinate is not None:
            local = array_module(pieces[0]).concatenate(pieces, axis=axis)
            return DArray(local.astype(dtype, copy=False), spec)
    if mesh.coordinate is None:  # not a member: an empty block of the right shape
        return DArray(array_module(first.local).empty(spec.local_shape(), dtype), spec)
    plan = _plan_join(items, targets, spec, axis)
    if key is not None and all(x is y for x, y in zip(items, arrays)):  # (none redistributed)
        if len(_plans) >= 1024:
            _plans.clear()
        _plans[key] = plan
    return run_join(plan, items)


def _axis(axis: Any, ndim: int) -> int:
    value = int(axis)
    if not -ndim <= value < ndim:
        raise np.exceptions.AxisError(value, ndim)
    return value % ndim


# -- calls seen before ---------------------------------------------------------------
# ("concatenate" | "vstack" | "stack", axis as given, *operand specs) -> what a call of
# these does again, known from the specs: a planned join (run_join), each rank joining
# its own blocks (run_local_join), or None: the general path, each call. Bounded: specs
# hold meshes. (Kept by ops/rules/joining.py's np.concatenate, np.vstack, np.stack.)
Run = Callable[[Sequence[Any]], DArray]
_seen: dict[tuple[Any, ...], Run | None] = {}


def unseen(arrays: Sequence[Any]) -> DArray:  # (a marker: never called)
    """What :func:`seen` gives for a call not seen yet."""
    raise AssertionError("a join of unseen specs ran")  # pragma: no cover


def seen_key(name: str, axis: Any, arrays: Any) -> tuple[Any, ...] | None:
    """The key of a call of DArrays (a list or tuple of them, an int axis), or None:
    other operands, or a debug tool or ``dmesh.compile`` watching (their path)."""
    if type(arrays) not in (list, tuple) or not arrays or type(axis) is not int:
        return None
    if tracing.hooked or _hooks.recorder is not None:
        return None
    key: list[Any] = [name, axis]
    for x in arrays:
        if type(x) is not DArray:
            return None
        key.append(x._spec)
    return tuple(key)


def seen(key: tuple[Any, ...], default: Run | None = unseen) -> Run | None:
    """What the call of ``key`` does again (``default`` when not seen)."""
    return _seen.get(key, default)


def replayed(key: tuple[Any, ...] | None, arrays: Any) -> tuple[Any, tuple[Any, ...] | None]:
    """``(result, key)`` of a join call keyed ``key``: the result of what an earlier call of
    that key did (key None), or None and the key still to remember (never seen), or None
    and None (seen, and it took the general path: nothing to remember)."""
    if key is None:
        return None, None
    run = seen(key)
    if run is unseen:
        return None, key
    return (None if run is None else run(arrays)), None


def remember(key: tuple[Any, ...], run: Run | None) -> None:
    """Keep what the call of ``key`` does again (None: the general path)."""
    if len(_seen) >= 1024:
        _seen.clear()
    _seen[key] = run


def local_run(name: str, arrays: Sequence[DArray], axis: int, result: DArray) -> Run | None:
    """Each rank's join (``np.<name>``) of its blocks, where the general path's ``result``
    is that (its spec the one :func:`local_join_spec` finds); else None."""
    spec = local_join_spec([x._spec for x in arrays], axis, name == "stack")
    if spec is None or spec is not result._spec:
        return None
    return functools.partial(run_local_join, name, axis, spec)
