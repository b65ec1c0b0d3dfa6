"""Integer-array ("fancy") indexing of DArrays by request and response: no rank gathers the array.

``a[idx]``, ``a[i, j]``, ``a[:, idx, 1:]``, ``a[idx] = v`` and ``np.take`` follow
NumPy's rules for advanced indices: the index arrays (and any int next to
them) broadcast to one shape ``S``; the result has ``S`` in place of the
indexed dims when those items are adjacent in the key, and first otherwise.
A bool ndarray counts as its ``nonzero()`` arrays. Indices may be negative
and are bounds-checked (``IndexError``, as in NumPy). The key is checked and
split by :mod:`dmesh.ops.indexing.keys`.

**Contract**: a list or ndarray in the key is the same on every rank (like
an int index; it is never sent). A DArray index (integer dtype, on the
array's mesh, any layout) is distributed; its bound check is an all-reduce.

**Result layout**: the basic items (slices, ``None``, ``...``) are applied
first, as a view (:mod:`dmesh.ops.indexing.basic`). Call ``M`` the mesh dims that shard
the indexed dims. The result's first index dim is sharded over ``M`` with
balanced blocks (a DArray index of shape ``S`` already sharded so keeps its
blocks, and ``a[idx]`` keeps its sharding over mesh dims where the array is
replicated); the other dims keep their placements, ``Partial`` included
(taking elements is linear). With ``M`` empty the take is local.

**Algorithm**, in each slice of the mesh along ``M`` (whose ranks hold the
same part of the other dims): each rank holds its block of the index points
(its block of the result); it finds the owner of each point from the block
boundaries of the layout, sends the points (as offsets in the owner's block)
to their owners with one all-to-all, and the owners answer with the elements
in a second. A DArray index needs the request counts first (an all-to-all of
one int per rank); for a replicated index every rank computes them.

**Assignment** routes ``(offsets, values)`` rows, packed as bytes, with one
all-to-all. With repeated indices, each owner receives its points in the
C order of the broadcast index and writes them with one NumPy assignment, so
the outcome is NumPy's for the same indices on one process (in practice the
last value wins; NumPy does not promise that, and neither does dmesh).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.device import array_module, to_host
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.indexing.keys import Plan, is_advanced, is_darray, parse

__all__ = ["block_of", "broadcast_layout", "getitem", "is_advanced", "setitem", "take"]


def _group(view: Layout, plan: Plan) -> tuple[int, ...]:
    """The mesh dims that shard the indexed dims, in mesh-dim order."""
    return tuple(
        m for m, p in enumerate(view.placements) if isinstance(p, Shard) and p.dim in plan.axes
    )


def _index_layout(view: Layout, plan: Plan, keep: bool) -> Layout:
    """Which block of the broadcast index points each rank handles (its block of the result).

    The first index dim is sharded over the group. With ``keep``, a DArray
    index of shape S also stays sharded over mesh dims where the view is
    replicated (no index moves); an assignment must not (the replicas would
    then write different elements).
    """
    group = _group(view, plan)
    first = next((i for i in plan.indices if is_darray(i) and i.shape == plan.shape), None)
    placements: list[Placement] = []
    for m, p in enumerate(view.placements):
        q = first.placements[m] if first is not None else Replicate()
        if m in group:
            placements.append(Shard(0) if plan.shape else Replicate())
        elif keep and isinstance(p, Replicate) and isinstance(q, Shard):
            placements.append(q)
        else:
            placements.append(Replicate())
    if first is not None and first.placements == tuple(placements):
        kept: Layout = first.spec.layout  # keeps uneven blocks rather than moving indices
        return kept
    return Layout.balanced(view.mesh_shape, tuple(placements), plan.shape)


def _result_layout(view: Layout, plan: Plan, index: Layout) -> Layout:
    """The view's other dims with the index dims (laid out as ``index``) at ``plan.position``."""
    rest = [d for d in range(len(view.shape)) if d not in plan.axes]
    s, pos = len(plan.shape), plan.position
    new = {d: i if i < pos else i + s for i, d in enumerate(rest)}
    shape = [view.shape[d] for d in rest]
    bounds = [view.bounds[d] for d in rest]
    shape[pos:pos] = plan.shape
    bounds[pos:pos] = index.bounds
    placements: list[Placement] = []
    for p, q in zip(view.placements, index.placements):
        if isinstance(q, Shard):
            placements.append(Shard(pos + q.dim))
        elif isinstance(p, Shard) and p.dim in new:
            placements.append(Shard(new[p.dim]))
        else:
            placements.append(p if isinstance(p, Partial) else Replicate())
    return Layout(view.mesh_shape, tuple(placements), tuple(shape), tuple(bounds))


def block_of(x: Any, layout: Layout, coord: tuple[int, ...]) -> Any:
    """This rank's block of ``x`` broadcast to ``layout.shape`` (collective if ``x`` is a DArray).

    A DArray is first laid out like ``layout`` on its own dims (replicated
    along the dims it is broadcast over), so only the block's elements come here.
    """
    if not is_darray(x):
        return array_module(x).broadcast_to(x, layout.shape)[layout.slices(coord)]
    local = x.with_layout(broadcast_layout(layout, x.shape)).local
    return array_module(local).broadcast_to(local, layout.local_shape(coord))


def broadcast_layout(layout: Layout, shape: tuple[int, ...]) -> Layout:
    """The layout of an array of ``shape`` that broadcasts to ``layout.shape`` so that its
    blocks meet ``layout``'s: cut as ``layout`` on the dims it does not broadcast over,
    replicated along the others (pure)."""
    lead = len(layout.shape) - len(shape)
    own = [d >= lead and shape[d - lead] == layout.shape[d] for d in range(len(layout.shape))]
    placements = tuple(
        Shard(q.dim - lead) if isinstance(q, Shard) and own[q.dim] else Replicate()
        for q in layout.placements
    )
    bounds = tuple(layout.bounds[d] if own[d] else None for d in range(lead, len(layout.shape)))
    return Layout(layout.mesh_shape, placements, shape, bounds)


def _points(plan: Plan, index: Layout, coord: tuple[int, ...], mesh: Any) -> np.ndarray:
    """This rank's index points, ``(n, len(axes))`` int64 in bounds (collective with DArrays)."""
    columns = [
        to_host(block_of(i, index, coord)).astype(np.int64).reshape(-1) for i in plan.indices
    ]
    distributed = [j for j, i in enumerate(plan.indices) if is_darray(i)]
    if distributed:  # reduce the verdict of the bound check so that every rank raises
        low = np.iinfo(np.int64).min
        extremes = [
            v
            for j in distributed
            for v in ((columns[j].max(), -columns[j].min()) if columns[j].size else (low, low))
        ]
        worst = coll.all_reduce(np.array(extremes, dtype=np.int64), "max", mesh.comm())
        for k, j in enumerate(distributed):
            n, high, low_neg = plan.sizes[j], int(worst[2 * k]), int(worst[2 * k + 1])
            if high >= n or low_neg > n:
                value = high if high >= n else -low_neg
                raise IndexError(
                    f"index {value} is out of bounds for axis {plan.dims[j]} with size {n}"
                )
            columns[j] = np.where(columns[j] < 0, columns[j] + n, columns[j])
    return np.stack(columns, axis=1)


def _route(view: Layout, plan: Plan, group: tuple[int, ...], points: Any) -> tuple[Any, Any]:
    """Owner (rank in the group's communicator) and offsets in its block of each point."""
    owners = np.zeros(points.shape[0], np.int64)
    offsets = points.copy()
    for j, axis in enumerate(plan.axes):
        cut = view.bounds[axis]
        if cut is None:
            continue
        cuts = np.asarray(cut, np.int64)
        # The last block starting at or before the point (empty blocks are skipped).
        block = np.searchsorted(cuts, points[:, j], side="right") - 1
        offsets[:, j] -= cuts[block]
        dims = sharding_mesh_dims(view.placements, axis)
        coords = np.unravel_index(block, [view.mesh_shape[m] for m in dims])
        for m, c in zip(dims, coords):
            owners += c * math.prod(view.mesh_shape[g] for g in group if g > m)
    return owners, offsets


def _incoming(
    view: Layout, plan: Plan, index: Layout, group: tuple[int, ...], me: int, ranks: int
) -> list[int] | None:
    """How many points each rank of the group asks of this one, if every rank can know."""
    if any(is_darray(i) for i in plan.indices):
        return None
    shape = plan.shape
    every = np.stack([np.broadcast_to(i, shape).reshape(-1) for i in plan.indices], axis=1)
    owners, _ = _route(view, plan, group, every)
    mine = np.flatnonzero(owners == me)
    if not shape:  # every rank asks for the one point
        return [mine.size] * ranks
    rows = mine // max(1, math.prod(shape[1:]))
    asking = np.searchsorted(np.asarray(index.bounds[0]), rows, side="right") - 1
    return [int(c) for c in np.bincount(asking, minlength=ranks)]


@dataclass
class _Exchange:
    """This rank's side of the routing: the points sorted by owner, and the counts."""

    comm: Any
    order: Any  # point order -> sorted by owner
    offsets: Any  # (n, len(axes)) offsets in the owners' blocks, sorted
    sent: list[int]  # points this rank asks of each group rank
    received: list[int]  # points each group rank asks of this one


def _exchange(a: DArray, view: Layout, plan: Plan, index: Layout, points: Any) -> _Exchange:
    group = _group(view, plan)
    comm = a.mesh[group].comm()
    ranks, me = comm.Get_size(), comm.Get_rank()
    owners, offsets = _route(view, plan, group, points)
    order = np.argsort(owners, kind="stable")  # keeps the C order of the points per owner
    sent = np.bincount(owners, minlength=ranks).astype(np.int64)
    received = _incoming(view, plan, index, group, me, ranks)
    if received is None:
        received = coll.all_to_all(
            sent, 0, 0, comm, concat_sizes=[1] * ranks, sizes_agree=True
        ).tolist()
    return _Exchange(comm, order, offsets[order], sent.tolist(), received)


def _swap(x: Any, sent: list[int], received: list[int], comm: Any) -> Any:
    """``coll.all_to_all`` of rows: ``sent[q]`` rows of ``x`` to rank ``q``, ``received[q]`` back.

    The counts differ between ranks, so no ``sizes_agree`` promise is made:
    every rank then takes ``Alltoallv`` whatever its own counts look like.
    """
    return coll.all_to_all(x, 0, 0, comm, split_sizes=sent, concat_sizes=received)


def _columns(xp: Any, offsets: Any) -> tuple[Any, ...]:
    return tuple(xp.asarray(offsets[:, j]) for j in range(offsets.shape[1]))


def getitem(a: DArray, key: Any) -> DArray:
    """``a[key]`` with integer arrays in the key (collective when an indexed dim is sharded)."""

    plan = parse(a.spec, key)
    view = a[plan.basic]
    index = _index_layout(view.spec.layout, plan, keep=True)
    layout = _result_layout(view.spec.layout, plan, index)
    spec = DArraySpec(a.mesh, layout, a.dtype)
    xp = array_module(a.local)
    coord = a.mesh.coordinate
    if coord is None:
        return DArray(xp.empty(spec.local_shape(), a.dtype), spec)
    points = _points(plan, index, coord, a.mesh)
    k = len(plan.axes)
    block = xp.moveaxis(view.local, plan.axes, tuple(range(k)))  # indexed dims first
    if not _group(view.spec.layout, plan):
        picked = block[_columns(xp, points)]
    else:
        ex = _exchange(a, view.spec.layout, plan, index, points)
        asked = _swap(ex.offsets, ex.sent, ex.received, ex.comm)
        answer = xp.ascontiguousarray(block[_columns(xp, asked)])
        got = _swap(answer, ex.received, ex.sent, ex.comm)
        picked = xp.empty_like(got)
        picked[xp.asarray(ex.order)] = got
    s = len(plan.shape)
    out = picked.reshape(index.local_shape(coord) + block.shape[k:])
    out = xp.moveaxis(out, tuple(range(s)), tuple(range(plan.position, plan.position + s)))
    return DArray(out, spec)


def setitem(a: DArray, key: Any, value: Any) -> None:
    """``a[key] = value`` with integer arrays in the key (collective if an indexed dim is sharded).

    ``value`` is a scalar, an array every rank holds or a DArray, broadcastable
    to the selection ``a[key]``.
    """
    plan = parse(a.spec, key)
    view = a[plan.basic]  # a view: writing into its blocks writes into a's
    index = _index_layout(view.spec.layout, plan, keep=False)
    layout = _result_layout(view.spec.layout, plan, index)
    if is_darray(value) and value.mesh is not a.mesh:
        raise ArgumentTypeError("the assigned DArray must be on the array's mesh")
    xp = array_module(a.local)
    if not is_darray(value):
        value = np.asarray(value) if xp is np else xp.asarray(value)
    extra = 0  # NumPy drops leading length-1 dims of a value with more dims than the selection
    while value.ndim - extra > len(layout.shape) and value.shape[extra] == 1:
        extra += 1
    try:
        if np.broadcast_shapes(value.shape[extra:], layout.shape) != layout.shape:
            raise ValueError
    except ValueError as exc:
        raise ArgumentError(
            f"shape mismatch: value array of shape {value.shape} could not be broadcast to "
            f"indexing result of shape {layout.shape}"
        ) from exc
    coord = a.mesh.coordinate
    if coord is None:
        return
    if extra:
        value = np.reshape(value, value.shape[extra:])  # a view, also of a DArray
    points = _points(plan, index, coord, a.mesh)
    s, pos, k = len(plan.shape), plan.position, len(plan.axes)
    values = xp.asarray(block_of(value, layout, coord)).astype(a.dtype, copy=False)
    values = xp.moveaxis(values, tuple(range(pos, pos + s)), tuple(range(s)))
    block = xp.moveaxis(view.local, plan.axes, tuple(range(k)))  # a view of a's block
    rest = block.shape[k:]
    values = xp.ascontiguousarray(values).reshape((points.shape[0], *rest))
    if not _group(view.spec.layout, plan):
        block[_columns(xp, points)] = values
        return
    ex = _exchange(a, view.spec.layout, plan, index, points)
    rows = _pack(xp, ex.offsets, values[xp.asarray(ex.order)])
    got = _swap(rows, ex.sent, ex.received, ex.comm)
    offsets, written = _unpack(xp, got, k, a.dtype, rest)
    block[_columns(xp, offsets)] = written


def _pack(xp: Any, offsets: Any, values: Any) -> Any:
    """One byte row per point: its offsets (int64), then its values, for a single all-to-all."""
    n = offsets.shape[0]
    head = xp.ascontiguousarray(xp.asarray(offsets, dtype=np.int64)).view(np.uint8)
    width = math.prod(values.shape[1:])
    body = xp.ascontiguousarray(values).reshape(n, width).view(np.uint8)
    return xp.concatenate([head, body], axis=1)  # a view as uint8 widens the last dim


def _unpack(xp: Any, rows: Any, k: int, dtype: np.dtype, rest: tuple[int, ...]) -> tuple[Any, Any]:
    n = rows.shape[0]
    offsets = xp.ascontiguousarray(rows[:, : 8 * k]).view(np.int64).reshape(n, k)
    values = xp.ascontiguousarray(rows[:, 8 * k :]).view(dtype).reshape((n, *rest))
    return offsets, values


def take(a: DArray, indices: Any, axis: int | None = None, mode: str = "raise") -> DArray:
    """``np.take(a, indices, axis, mode=mode)``: ``a[..., indices, ...]`` along ``axis``.

    ``axis=None`` takes from the flattened array. ``mode`` is ``"raise"``,
    ``"wrap"`` or ``"clip"``, as in NumPy. Collective when ``axis`` is sharded.
    """
    array: Any = a
    if axis is None:
        array, axis = np.ravel(a), 0
    if not -array.ndim <= axis < array.ndim:
        raise np.exceptions.AxisError(axis, array.ndim)
    axis %= array.ndim
    n = array.shape[axis]
    if mode not in ("raise", "wrap", "clip"):
        raise ArgumentError(f"np.take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    if not is_darray(indices):
        indices = np.asarray(indices)
        if indices.size == 0:
            indices = indices.astype(np.intp)  # [] reads as floats
    if mode != "raise" and indices.size:
        if n == 0:
            raise IndexError("cannot do a non-empty take from an empty axes.")
        # On a DArray these are elementwise ops (dispatched), no communication.
        indices = np.mod(indices, n) if mode == "wrap" else np.clip(indices, 0, n - 1)
    result: DArray = getitem(array, (slice(None),) * axis + (indices,))
    return result
