"""``np.pad`` in ``constant``, ``empty`` and ``edge`` modes, each rank padding its own block.

Along a sharded axis the cells ``np.pad`` adds lie next to the first and the
last block, and in these modes they are made from those blocks alone (a
value, or the edge cell the block holds). So the padded array keeps the
input's placements and block boundaries, shifted by the width before, the
first block grown by it and the last by the width after; each rank
allocates its padded block once, copies its block in, and fills the cells it
adds, axis after axis as NumPy does (axis ``i`` over the full extent of the
axes before it and the original extent of the axes after it, so the corners
come out as NumPy's). No message, one copy: the general path joins three
pieces per axis (:mod:`dmesh.ops.rules.padding`), a copy of the whole array
per padded axis.

:func:`pad_blocks` returns None where that does not hold (partial terms, a
first or last block with no cells along a padded sharded axis); every rank
decides from the layout alone, so all take the same path.
"""

from __future__ import annotations

from typing import Any

from dmesh.collectives.device import array_module
from dmesh.core.layout import Layout
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = ["LOCAL_MODES", "pad_blocks"]

LOCAL_MODES = frozenset(("constant", "empty", "edge"))


def pad_blocks(x: DArray, widths: Any, mode: str, values: Any) -> DArray | None:
    """``np.pad(x, widths, mode)`` block by block, or None where it needs the general path.

    ``widths``: one ``(before, after)`` pair of ints per axis; ``values``: one
    ``(before, after)`` pair of fill values per axis (``constant``), else None.
    """
    layout = x._spec.layout
    if mode not in LOCAL_MODES or any(p.is_partial() for p in layout.placements):
        return None
    pairs = tuple((int(b), int(a)) for b, a in widths)
    key = (x._spec, pairs, mode)
    plan = _plans.get(key)
    if plan is None:
        plan = _plan(x, pairs, mode)
        if plan is None:
            return None
        if len(_plans) >= 256:  # bounded: specs hold meshes
            _plans.clear()
        _plans[key] = plan
    spec, local_shape, inner, fills = plan
    block = x._local
    out = array_module(block).empty(local_shape, x.dtype)
    if mode == "constant":  # each value converted as NumPy's write converts it, on
        # every rank (an empty write): a value the dtype cannot hold raises everywhere,
        # not only on the ranks whose blocks get padded cells
        for d, (before, after) in enumerate(pairs):
            for width, value in zip((before, after), values[d]):
                if width:
                    out.reshape(-1)[:0] = value
    if inner is None:  # not a member: an empty block of the padded shape
        return DArray(out, spec)
    out[inner] = block
    for region, source, d, side in fills:
        if mode == "edge":
            out[region] = out[source]
        elif mode == "constant":
            out[region] = values[d][side]
        else:  # empty: NumPy leaves them undefined; zeros, so every rank agrees
            out[region] = 0
    return DArray(out, spec)


# (spec, widths, mode) -> this rank's plan of the pad (see _plan): a repeated pad of
# an array of that spec (a time step's boundary) computes only the copies.
_plans: dict[tuple[Any, ...], tuple[DArraySpec, tuple[int, ...], Any, tuple[Any, ...]]] = {}


def _plan(
    x: DArray, pairs: tuple[tuple[int, int], ...], mode: str
) -> tuple[DArraySpec, tuple[int, ...], Any, tuple[Any, ...]] | None:
    """The padded spec, this rank's padded block shape, where its block goes (None off the
    mesh) and the fills ``(region, edge source or None, axis, side)`` in NumPy's order; None
    where the general path is needed. From the layout alone: every rank agrees."""
    layout = x._spec.layout
    for d, (before, after) in enumerate(pairs):
        if mode == "edge" and (before or after) and not x.shape[d]:
            return None  # (no edge to repeat: the general path raises NumPy's error)
        cut = layout.bounds[d]
        if cut is not None and (before or after) and (cut[1] == cut[0] or cut[-1] == cut[-2]):
            return None  # an edge block without cells: its neighbour holds the edge
    shape = tuple(n + b + a for n, (b, a) in zip(x.shape, pairs))
    bounds = tuple(
        None if cut is None else (0, *(c + b for c in cut[1:-1]), n)
        for cut, (b, _), n in zip(layout.bounds, pairs, shape)
    )
    spec = DArraySpec(x.mesh, Layout(layout.mesh_shape, layout.placements, shape, bounds), x.dtype)
    coord = x.mesh.coordinate
    if coord is None:
        return spec, (0,) * x.ndim, None, ()
    local_shape = spec.local_shape(coord)
    # Per axis: the cells this rank adds before and after its block, and where it sits.
    block_shape = layout.local_shape(coord)
    first = [_edge(layout, coord, d, 0) for d in range(x.ndim)]
    last = [_edge(layout, coord, d, -1) for d in range(x.ndim)]
    adds = [(b if first[d] else 0, a if last[d] else 0) for d, (b, a) in enumerate(pairs)]
    inner = tuple(slice(b, b + n) for (b, _), n in zip(adds, block_shape))
    fills = []
    for d, (before, after) in enumerate(adds):
        # Axes before d over their full (padded) extent, axes after d over the block's.
        roi = [slice(None)] * d + [slice(None)] + list(inner[d + 1 :])
        size = local_shape[d]
        for width, side in ((before, 0), (after, 1)):
            if not width:
                continue
            region = list(roi)
            region[d] = slice(0, width) if side == 0 else slice(size - width, size)
            source = None
            if mode == "edge":
                at = before if side == 0 else size - after - 1
                source_list = list(roi)
                source_list[d] = slice(at, at + 1)
                source = tuple(source_list)
            fills.append((tuple(region), source, d, side))
    return spec, local_shape, inner, tuple(fills)


def _edge(layout: Layout, coord: Any, d: int, which: int) -> bool:
    """Whether the block at ``coord`` is the first (``which`` 0) or last (-1) along ``d``."""
    cut = layout.bounds[d]
    if cut is None:
        return True
    number = layout.block_number(coord, d)
    return number == (0 if which == 0 else len(cut) - 2)
