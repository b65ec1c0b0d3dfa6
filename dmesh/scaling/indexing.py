"""Traffic of fancy indexing: ``a[idx]``, ``np.take``, ``a[mask]``, ``a[idx] = v`` (pure).

``dmesh/ops/indexing/fancy.py`` answers integer-array indices by request and
response, over the ``k`` ranks of the mesh dims that shard the indexed axis
(its *group*; no group: a local take). Each rank handles its block of the
index points (the index is cut along its dim 0 over the group, balanced,
or kept in a DArray index's own layout when that already fits); a point
goes to the block of the axis that holds it. Per rank, with ``q_r`` its
points and ``a_r`` the points the others ask of it (``sum a_r = sum q_r``),
``w`` the bytes of one indexed row (the block's other dims times ``s``):

=======================  ===================================  ===============  ===============
call                     when                                 sent             received
=======================  ===================================  ===============  ===============
index move               a DArray index not yet laid out so   its block        its new block
``all_reduce`` (p)       a DArray index (bound check)         16               16
``all_to_all`` (k)       a DArray index (request counts)      ``8 k``          ``8 k``
``all_to_all`` (k)       the requests (int64 offsets)         ``8 q_r``        ``8 a_r``
``all_to_all`` (k)       the answers (``a[idx]``)             ``w a_r``        ``w q_r``
``all_to_all`` (k)       ``a[idx] = v``: offset + value rows  ``(8 + w) q_r``  ``(8 + w) a_r``
=======================  ===================================  ===============  ===============

An index the same on every rank (a list or ndarray) needs no bound check and
no counts: every rank computes them. Uniform random indices, ``m`` of them
into ``n`` rows over ``k`` blocks: ``q_r = a_r = m/k``, of which ``(k-1)/k``
travel; the worst case asks every point of one block (``a_r = m`` there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.scaling.redistribution import layout_traffic
from dmesh.scaling.traffic import Call, Traffic, per_rank

__all__ = ["mask_assign", "mask_select", "setitem", "take"]

BoundsArg = Sequence[Sequence[int] | None] | None


def _index_layout(
    view: Layout, axis: int, shape: tuple[int, ...], source: Layout | None, keep: bool
) -> Layout:
    """Where the index points live (``fancy._index_layout`` for one indexed axis)."""
    group = sharding_mesh_dims(view.placements, axis)
    placements: list[Placement] = []
    for m, p in enumerate(view.placements):
        q = source.placements[m] if source is not None else Replicate()
        if m in group:
            placements.append(Shard(0) if shape else Replicate())
        elif keep and isinstance(p, Replicate) and isinstance(q, Shard):
            placements.append(q)
        else:
            placements.append(Replicate())
    if source is not None and source.placements == tuple(placements):
        return source
    return Layout.balanced(view.mesh_shape, tuple(placements), shape)


def _fancy(
    view: Layout,
    axis: int,
    itemsize: int,
    index: np.ndarray,
    source: Layout | None,
    index_itemsize: int,
    write: bool,
) -> list[Traffic]:
    """Every rank's calls in ``view[.., index, ..]`` along ``axis`` (or the assignment)."""
    mesh_shape = view.mesh_shape
    n = view.shape[axis]
    values = np.where(index < 0, index + n, index).astype(np.int64)
    layout = _index_layout(view, axis, tuple(index.shape), source, keep=not write)
    group = sharding_mesh_dims(view.placements, axis)
    k = math.prod(mesh_shape[m] for m in group)
    p = math.prod(mesh_shape)
    cut = view.bounds[axis]
    coords = list(np.ndindex(*mesh_shape))
    asks: dict[tuple[int, ...], np.ndarray] = {}
    for coord in coords:  # how many points each rank asks of each block of its group
        points = values[layout.slices(coord)].reshape(-1)
        owners = np.searchsorted(np.asarray(cut), points, side="right") - 1 if cut else points * 0
        asks[coord] = np.bincount(owners, minlength=k)
    moves = layout_traffic(source, layout, index_itemsize) if source is not None else None

    def calls_at(coord: tuple[int, ...]) -> list[Call]:
        me = int(np.ravel_multi_index(coord, mesh_shape)) if coord else 0
        calls: list[Call] = []
        if moves is not None:
            calls += [*moves[me], Call("all_reduce", p, 16, 16)]
        if not group:
            return calls
        block = view.local_shape(coord)
        row = math.prod(b for d, b in enumerate(block) if d != axis) * itemsize
        mine = view.block_number(coord, axis)
        others = [c for c in coords if all(c[m] == coord[m] for m in range(len(coord))
                                           if m not in group)]  # fmt: skip
        asked = sum(int(asks[c][mine]) for c in others)
        points = int(asks[coord].sum())
        if source is not None:
            calls.append(Call("all_to_all", k, 8 * k, 8 * k))
        if write:
            return [*calls, Call("all_to_all", k, (8 + row) * points, (8 + row) * asked)]
        return [
            *calls,
            Call("all_to_all", k, 8 * points, 8 * asked),
            Call("all_to_all", k, row * asked, row * points),
        ]

    return per_rank(mesh_shape, calls_at)


def _source(
    mesh_shape: tuple[int, ...],
    index: np.ndarray,
    placements: Sequence[Placement] | None,
    bounds: BoundsArg,
) -> Layout | None:
    if placements is None:
        return None
    if bounds is None:
        return Layout.balanced(mesh_shape, tuple(placements), tuple(index.shape))
    return Layout.with_bounds(mesh_shape, tuple(placements), tuple(index.shape), bounds)


def take(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    placements: Sequence[Placement],
    index: np.ndarray,
    axis: int = 0,
    index_placements: Sequence[Placement] | None = None,
    index_bounds: BoundsArg = None,
) -> list[Traffic]:
    """Every rank's calls in ``np.take(a, idx, axis)`` (``a[idx]`` is ``axis=0``, ``a[:, idx]`` 1).

    ``a`` is balanced in ``placements``; ``index`` holds the index's values
    (after ``mode`` wrap or clip; at least 1-D). ``index_placements`` None:
    the index is a list or ndarray every rank holds; else a DArray of
    ``index.itemsize``-byte integers in those placements (cut at
    ``index_bounds``; None: balanced). See the module's table. Even blocks,
    ``m`` uniform random indices into a ``(S(axis),)`` array over ``k``
    ranks, ``w = n s / n_axis`` (one row), an ndarray index: two
    ``all_to_all``, ``(8 + w) m/k`` bytes each way, time
    ``2 (k-1) alpha + (k-1)/k^2 (8 + w) m beta``; a DArray index adds
    ``2 L alpha + (k-1) alpha`` (bound check and counts).
    """
    mesh_shape = tuple(mesh_shape)
    index = np.asarray(index)
    view = Layout.balanced(mesh_shape, tuple(placements), tuple(shape))
    source = _source(mesh_shape, index, index_placements, index_bounds)
    return _fancy(view, axis % len(shape), itemsize, index, source, index.itemsize, False)


def setitem(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    placements: Sequence[Placement],
    index: np.ndarray,
    axis: int = 0,
    index_placements: Sequence[Placement] | None = None,
    index_bounds: BoundsArg = None,
) -> list[Traffic]:
    """Every rank's calls in ``a[idx] = v`` along ``axis`` (``a[:, idx] = v`` for 1), ``v`` a
    scalar or an array every rank holds.

    As :func:`take`, but the index points are cut over the group alone (a
    DArray index sharded elsewhere moves), and one ``all_to_all`` carries
    rows of the int64 offset and the ``w`` value bytes: ``(8 + w) q_r`` in,
    ``(8 + w) a_r`` out. Uniform random indices, even blocks: time
    ``(k-1) alpha + (k-1)/k^2 (8 + w) m beta``. Along an unsharded axis: local.
    """
    mesh_shape = tuple(mesh_shape)
    index = np.asarray(index)
    view = Layout.balanced(mesh_shape, tuple(placements), tuple(shape))
    source = _source(mesh_shape, index, index_placements, index_bounds)
    return _fancy(view, axis % len(shape), itemsize, index, source, index.itemsize, True)


def _select_counts(layout: Layout) -> list[Traffic]:
    """The ``all_gather`` of one count over the mesh dims sharding dim 0 (``masks.row_selection``);
    none where those dims hold one rank in all (a single block along dim 0)."""
    dims = sharding_mesh_dims(layout.placements, 0)
    k = math.prod(layout.mesh_shape[m] for m in dims)
    calls = (Call("all_gather", k, 8, 8 * k),) if k > 1 else ()
    return per_rank(layout.mesh_shape, lambda coord: calls)


def _row_placements(placements: Sequence[Placement]) -> tuple[Placement, ...]:
    """Every sharding mesh dim sharding dim 0 instead (``masks.row_layout``)."""
    return tuple(Shard(0) if isinstance(p, Shard) else Replicate() for p in placements)


def mask_select(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    placements: Sequence[Placement],
    mask_placements: Sequence[Placement] | None = None,
) -> list[Traffic]:
    """Every rank's calls in ``a[mask]`` for a bool DArray ``mask`` of ``a``'s shape.

    Whatever the data: ``a`` is laid out with only dim 0 sharded (a move
    when another dim is sharded: ``S(d) -> S(0)``, one ``all_to_all`` of
    the block), the mask is laid out like it (1-byte elements; no move when
    its placements are ``a``'s, the default), then one ``all_gather`` of each
    block's selected count over the ``k`` ranks sharding dim 0: 8 bytes in,
    ``8 k`` out, time ``L alpha + 8 (k-1) beta``. No selected element moves;
    the result keeps uneven blocks.
    """
    mesh_shape, shape = tuple(mesh_shape), tuple(shape)
    src = Layout.balanced(mesh_shape, tuple(placements), shape)
    rows = src
    if any(isinstance(p, Shard) and p.dim != 0 for p in src.placements):
        rows = Layout.balanced(mesh_shape, _row_placements(placements), shape)
    mask_src = (
        src
        if mask_placements is None
        else Layout.balanced(mesh_shape, tuple(mask_placements), shape)
    )
    parts = [layout_traffic(src, rows, itemsize), layout_traffic(mask_src, rows, 1),
             _select_counts(rows)]  # fmt: skip
    return [tuple(c for part in parts for c in part[r]) for r in range(math.prod(mesh_shape))]


def mask_assign(
    mesh_shape: Sequence[int],
    length: int,
    itemsize: int,
    placements: Sequence[Placement],
    positions: np.ndarray,
    mask_placements: Sequence[Placement] | None = None,
    scalar: bool = True,
) -> list[Traffic]:
    """Every rank's calls in ``a[mask] = v`` for 1-D ``a`` and ``mask`` (``v`` scalar or ndarray).

    ``positions`` are the True positions (``np.flatnonzero(mask)``; the
    count is all that matters). The mask is laid out like ``a`` (no call
    when its placements are ``a``'s; otherwise its move, 1-byte elements),
    then each rank writes its own block. A scalar ``v``: nothing else is
    sent. An array ``v``: each block's selected count is shared first (one
    ``all_gather`` over the ranks sharding dim 0, as :func:`mask_select`),
    which says the part of ``v`` each rank writes.
    """
    del itemsize, positions  # no element of a or v moves
    mesh_shape = tuple(mesh_shape)
    target = Layout.balanced(mesh_shape, tuple(placements), (length,))
    mask_layout = Layout.balanced(
        mesh_shape, tuple(placements if mask_placements is None else mask_placements), (length,)
    )
    moved = layout_traffic(mask_layout, target, 1)
    counts = _select_counts(target) if not scalar else [()] * math.prod(mesh_shape)
    return [tuple(moved[r]) + tuple(counts[r]) for r in range(math.prod(mesh_shape))]
