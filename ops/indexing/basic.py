"""Basic indexing of DArrays: slices, integers, ``None`` and ``...``.

Slicing a sharded dim keeps every element where it is: the result's block
boundaries are counted from what each block keeps, so ``a[1:]`` is an uneven
layout (first-class; dispatch aligns operands that differ). An integer index
on a sharded dim selects one block's element: the ranks holding it keep it,
the others hold the sum's identity (``-0.0`` for floats and complex numbers:
``x + -0.0`` is ``x`` for every ``x``, ``-0.0`` included, where ``+0.0`` would
turn a selected ``-0.0`` into ``+0.0``), and the result is ``Partial("sum")``
along those mesh dims, reduced only when needed. Partial inputs stay partial
(every selected element copies one term).

A negative step on a sharded dim reverses the order of the blocks, so it is
the one basic selection that moves data: ``a[7:1:-3]`` is the ascending
selection ``a[4:8:3]`` (a view, as above) with its blocks mirrored, block
``j`` of ``k`` going, reversed, to the holder of block ``k - 1 - j`` (one
message per non-empty block over the mesh dims that shard the dim, nested
ones included; nothing is gathered). The boundaries are mirrored too, so
uneven blocks stay uneven and nothing moves twice. The result is a copy, not
a view. ``np.flip`` is this selection. Assigning through such a key
(``a[::-1] = b``) writes ``b`` reversed into the ascending selection; a
replicated ``b`` is reversed locally. With integer arrays in the key too,
only reading is supported.
"""

from __future__ import annotations

import itertools
import math
import operator
from typing import Any, NamedTuple

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Partial, Placement, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.indexing import fancy as fancy_indexing
from dmesh.ops.indexing import masks, views
from dmesh.ops.indexing.mirror import mirror_blocks
from dmesh.redistribution import partial_term

__all__ = [
    "NOT_HELD", "IndexPlan", "absent_term", "block_indexing", "expand_key", "getitem",
    "nonzero", "plan_index",
]  # fmt: skip

NOT_HELD = object()  # an int index whose element lives on another rank


class IndexPlan(NamedTuple):
    """What every rank computes from a basic key, before any data is read."""

    layout: Layout  # of the selection, with ascending steps on the ``mirrored`` dims
    local: tuple[Any, ...]  # this rank's key into its block (None, NOT_HELD, ints, slices)
    owners: dict[int, int]  # mesh dim -> its coordinate holding an int-indexed element
    mirrored: tuple[int, ...]  # result dims sharded and stepped backwards: blocks to mirror


def expand_key(key: Any, ndim: int) -> list[Any]:
    """The key as one item per input dim, plus ``None`` items for new dims."""
    items = list(key) if isinstance(key, tuple) else [key]
    for item in items:
        if not (item is None or item is Ellipsis or isinstance(item, slice)):
            try:
                operator.index(item)
            except TypeError as exc:
                raise UnsupportedError(
                    f"indexing DArrays with {type(item).__name__} is not supported; basic "
                    "indexing (slices, ints, None, ...) and integer arrays are"
                ) from exc
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise ArgumentTypeError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for a {ndim}-d DArray: {used} were given")
    return views.expand(tuple(items), ndim)


def plan_index(spec: DArraySpec, key: Any) -> IndexPlan:
    """The result layout, this rank's key into its block, int owners and dims to mirror.

    The local key has ``None`` for new axes and :data:`NOT_HELD` for an int
    index whose element another rank holds. ``owners`` maps each mesh dim that
    shards an int-indexed dim to its coordinate holding the element. A
    negative step on a sharded dim is planned as the ascending slice of the
    same elements, and its result dim is listed in ``mirrored``.
    """
    layout = spec.layout
    items = expand_key(key, spec.ndim)
    coord = spec.mesh.coordinate
    out_shape: list[int] = []
    out_bounds: list[tuple[int, ...] | None] = []
    out_dim_of: dict[int, int] = {}
    local: list[Any] = []
    owners: dict[int, int] = {}
    mirrored: list[int] = []
    d = 0
    for item in items:
        if item is None:
            out_shape.append(1)
            out_bounds.append(None)
            local.append(None)
            continue
        n = layout.shape[d]
        mesh_dims = sharding_mesh_dims(layout.placements, d)
        cut = layout.bounds[d]
        start = stop = 0
        if coord is not None and cut is not None:
            b = layout.block_number(coord, d)
            start, stop = cut[b], cut[b + 1]
        elif cut is None:
            start, stop = 0, n
        if isinstance(item, slice):
            first, last, step = item.indices(n)
            length = len(range(first, last, step))
            if cut is None:
                local.append(item)
                out_bounds.append(None)
            else:
                if step < 0 and length:  # the same elements, ascending; blocks mirrored later
                    first, last, step = first + (length - 1) * step, first + 1, -step
                    mirrored.append(len(out_shape))
                elif step < 0:
                    first, last, step = 0, 0, 1
                counts = [_count(first, last, step, lo, hi) for lo, hi in itertools.pairwise(cut)]
                bounds = [0]
                for c in counts:
                    bounds.append(bounds[-1] + c)
                out_bounds.append(tuple(bounds))
                local.append(_local_slice(first, last, step, start, stop))
            out_dim_of[d] = len(out_shape)
            out_shape.append(length)
        else:
            index = operator.index(item)
            if not -n <= index < n:
                raise IndexError(f"index {index} is out of bounds for axis {d} with size {n}")
            index %= n
            if cut is None:
                local.append(index)
            else:
                owner = next(b for b in range(len(cut) - 1) if cut[b] <= index < cut[b + 1])
                # The block number is the nested (row-major) index over mesh_dims.
                sizes = tuple(layout.mesh_shape[m] for m in mesh_dims)
                for m, at in zip(mesh_dims, np.unravel_index(owner, sizes)):
                    owners[m] = int(at)
                local.append(index - start if start <= index < stop else NOT_HELD)
        d += 1
    placements: list[Placement] = []
    for m, p in enumerate(layout.placements):
        if isinstance(p, Shard):
            placements.append(Partial("sum") if m in owners else Shard(out_dim_of[p.dim]))
        else:
            placements.append(p)
    result = Layout(layout.mesh_shape, tuple(placements), tuple(out_shape), tuple(out_bounds))
    return IndexPlan(result, tuple(local), owners, tuple(mirrored))


def _count(first: int, last: int, step: int, lo: int, hi: int) -> int:
    """How many of range(first, last, step) (step > 0) lie in [lo, hi)."""
    lo, hi = max(lo, first), min(hi, last)
    if lo >= hi:
        return 0
    begin = first + math.ceil((lo - first) / step) * step
    return 0 if begin >= hi else (hi - 1 - begin) // step + 1


def _local_slice(first: int, last: int, step: int, start: int, stop: int) -> slice:
    """The part of range(first, last, step) inside the block [start, stop), in block terms."""
    if _count(first, last, step, start, stop) == 0:
        return slice(0, 0)
    lo = max(start, first)
    begin = first + math.ceil((lo - first) / step) * step
    return slice(begin - start, min(stop, last) - start, step)


def getitem(a: DArray, key: Any) -> DArray:
    """``a[key]`` for basic indexing (views of the blocks, no communication) or a bool mask.

    A negative step on a sharded dim mirrors the blocks (collective over the
    mesh dims that shard it). Keys with integer arrays go to
    :mod:`dmesh.ops.indexing.fancy` (collective).
    """

    if masks.leading_mask(a, key):  # k-means' X[labels == j]: no nonzero(), no exchange
        return masks.mask_select(a, key)
    if masks.has_mask(key):  # a mask on some dims: its nonzero() arrays (collective)
        key = masks.expand_masks(a, key)
    if fancy_indexing.is_advanced(key):
        return fancy_indexing.getitem(a, key)
    plan = plan_index(a.spec, key)
    spec = DArraySpec(a.mesh, plan.layout, a.dtype)
    xp = array_module(a.local)
    if a.mesh.coordinate is None:
        result = DArray(xp.empty(spec.local_shape(), a.dtype), spec)
    elif any(k is NOT_HELD for k in plan.local):  # another rank holds it: an identity term
        result = DArray(absent_term(spec, plan.owners, xp), spec)
    else:
        result = DArray(a.local[plan.local + (Ellipsis,)], spec)
    for dim in plan.mirrored:
        result = mirror_blocks(result, dim)
    holds = a.mesh.coordinate is not None and all(k is not NOT_HELD for k in plan.local)
    views.record(a, key, result, bool(plan.owners), bool(plan.mirrored), holds)
    return result


def _plain(item: Any) -> bool:
    if item is None or item is Ellipsis:
        return True
    if isinstance(item, slice):
        return all(v is None or _plain_int(v) for v in (item.start, item.stop, item.step))
    return _plain_int(item)


def _plain_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def block_indexing(
    spec: DArraySpec, key: Any, detached: bool = False
) -> tuple[DArraySpec, Any] | None:
    """``a[key]`` for an ``a`` of ``spec`` as (result spec, function of ``a``'s block), when
    ``key`` is plain basic indexing (ints, slices, None, ``...``) that moves no data; None
    otherwise (masks, index arrays, a negative step on a sharded dim), and None for a
    detached view (an int on a sharded dim, a selection of a partial array), which must
    be made eagerly so that writes through it reach ``a`` (``dmesh.ops.indexing.views``),
    unless ``detached``: then an int on a sharded dim is read too (its holders' blocks
    are views of ``a``'s, the other ranks' identity terms), for a caller that refuses
    writes through the result. Sends no message: what ``dmesh.compile`` records. Raises
    as ``a[key]`` for an out-of-range index."""
    items = key if type(key) is tuple else (key,)
    if not all(_plain(item) for item in items):
        return None
    plan = plan_index(spec, key)
    if plan.mirrored or spec.mesh.coordinate is None:
        return None
    if (plan.owners and not detached) or any(p.is_partial() for p in spec.placements):
        return None
    result = DArraySpec(spec.mesh, plan.layout, spec.dtype)
    local, owners = plan.local, plan.owners

    def index(block: Any) -> Any:
        xp = array_module(block)
        if any(k is NOT_HELD for k in local):  # another rank holds it: an identity term
            return absent_term(result, owners, xp)
        return block[local + (Ellipsis,)]  # (a 0-d view, not a scalar)

    return result, index


def absent_term(spec: DArraySpec, owners: dict[int, int], xp: Any) -> Any:
    """This rank's block of ``a[i]`` when another rank holds the element: terms of the identity.

    Along the first owner mesh dim where this rank is not the holder, its
    terms must add up to nothing: ``-0.0`` for floats and complex numbers
    (``+0.0`` would turn a selected ``-0.0`` into ``+0.0``), ``0`` otherwise.
    The partial mesh dims after it are reduced before it (the last mesh dim
    first), so along those the identity is split as ``R -> P`` splits any
    value (a product's terms are ones except at coordinate 0, or its owner's).
    """
    coord = spec.mesh.coordinate
    assert coord is not None  # callers handle non-members
    value = partial_term(xp.zeros(spec.local_shape(), spec.dtype), "sum", first=False)
    first = min(m for m, c in owners.items() if coord[m] != c)
    for m in range(first + 1, len(spec.placements)):
        p = spec.placements[m]
        if isinstance(p, Partial):
            value = partial_term(value, p.op, coord[m] == owners.get(m, 0))
    return value


def nonzero(a: DArray) -> tuple[DArray, ...]:
    """``np.nonzero``: one 1-D DArray of global indices per dim (collective)."""
    if a.ndim == 0:
        raise ArgumentError(
            "Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar).nonzero() "
            "instead"
        )
    a = masks.row_layout(a)
    if a.mesh.coordinate is None:
        raise UnsupportedError("np.nonzero on a rank outside the mesh")
    local = np.nonzero(np.asarray(a.local))
    offsets = a.spec.offsets()
    return tuple(
        masks.row_selection(a, idx.astype(np.intp) + off) for idx, off in zip(local, offsets)
    )
