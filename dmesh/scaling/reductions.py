"""Reductions, their statistics and scans: what each rank sends (pure).

A reduction over an axis that a mesh dim shards communicates nothing: each
rank reduces its block and the result is ``Partial`` on that mesh dim. The
bytes come when the value is needed, and how depends on what needs it:

* ``float(r)``/``r.item()`` of a one-element result: one ``all_reduce`` of
  one element over the ranks of every partial mesh dim together;
* ``r.redistribute(placements)`` (``reduce_partials()``, ``full_array()``
  under ``CommMode``): one step per partial mesh dim, the last mesh dim
  first: ``all_reduce`` to ``R``, ``reduce_scatter`` to ``S(d)``;
* an elementwise op that keeps no partial value (``var``'s division,
  ``norm``'s square root): the cost model of dispatch picks ``R`` or ``S(d)``
  per mesh dim (:func:`elementwise_targets`), so a result with a free dim is
  reduce-scattered onto it rather than all-reduced.

Every function returns one ``Traffic`` per rank
(row-major mesh coordinates), computed from the same layouts and
redistribution plans dmesh uses (``dmesh.core``), so uneven and empty blocks
are exact. ``itemsize`` is the bytes of the result's dtype (``np.sum`` of
int32 is int64: 8) unless a function says otherwise.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.core.plan import estimate_cost
from dmesh.scaling.redistribution import layout_traffic
from dmesh.scaling.traffic import Call, Traffic, per_rank

__all__ = [
    "arg_extreme", "cumulative", "elementwise_targets", "moved", "nan_extreme", "nan_mean",
    "nan_variance", "norm", "reduced_layout", "reduction", "value_calls", "variance",
]  # fmt: skip

R = Replicate()
Then = str | Sequence[Placement] | None  # None, "item", or the placements of a redistribute
_INDEX_BYTES = 8  # argmax's candidate indices are int64
Move = tuple[Layout, Layout, int]  # a redistribution: from, to, item size


def moved(src: Layout, dst: Layout, itemsize: int, coord: tuple[int, ...]) -> list[Call]:
    """The calls of one redistribution from ``src`` to ``dst`` at mesh coordinate ``coord``.

    :func:`dmesh.scaling.redistribution.layout_traffic`'s entry for the rank
    at ``coord``, computed once per move for all ranks.
    """
    return list(_every_rank(src, dst, itemsize)[int(np.ravel_multi_index(coord, src.mesh_shape))])


@lru_cache(maxsize=256)
def _every_rank(src: Layout, dst: Layout, itemsize: int) -> list[Traffic]:
    return layout_traffic(src, dst, itemsize)


def reduced_layout(src: Layout, axes: Sequence[int], keepdims: bool, op: str = "sum") -> Layout:
    """The layout of a reduction's result over ``axes`` of ``src`` (no communication).

    A mesh dim that shards a reduced axis holds ``Partial(op)`` terms; one
    that shards a kept axis shards its new place, with the same blocks.
    """
    new = {
        d: d if keepdims else d - sum(1 for a in axes if a < d)
        for d in range(len(src.shape))
        if keepdims or d not in axes
    }
    placements = tuple(
        (Partial(op) if p.dim in axes else Shard(new[p.dim])) if isinstance(p, Shard) else p
        for p in src.placements
    )
    shape = tuple(1 if d in axes else n for d, n in enumerate(src.shape) if d in new)
    bounds = tuple(None if d in axes else src.bounds[d] for d in new)
    return Layout(src.mesh_shape, placements, shape, bounds)


def elementwise_targets(
    operands: Sequence[tuple[Layout, int]], linear: bool = False
) -> tuple[Layout, list[Layout]]:
    """Where dispatch puts an elementwise op's result and moves its DArray operands.

    The rows (``R``, or ``S(d)`` of the broadcast output for each ``d``, an
    operand of length 1 there replicated; with ``linear``, as ``add`` and
    ``subtract`` of floats, also ``P(sum)`` of all) are combined over the
    mesh dims and priced by ``dmesh.core.plan.estimate_cost`` (bytes per
    rank plus 10 kB per message); the cheapest wins, ties to the first. A
    partial operand thus goes ``S(d)`` by ``reduce_scatter`` where an output
    dim is free (half an ``all_reduce``'s bytes), else ``R`` by ``all_reduce``.
    """
    mesh_shape = operands[0][0].mesh_shape
    out = _broadcast([lay.shape for lay, _ in operands])
    rows: list[tuple[Placement, ...]] = [(R,) * (len(operands) + 1)]
    for d in range(len(out)):
        row: list[Placement] = [Shard(d)]
        for lay, _ in operands:
            own = d - (len(out) - len(lay.shape))
            row.append(Shard(own) if own >= 0 and lay.shape[own] == out[d] else R)
        rows.append(tuple(row))
    if linear:
        rows.append((Partial("sum"),) * (len(operands) + 1))
    best: tuple[float, Layout, list[Layout]] | None = None
    for combo in itertools.product(rows, repeat=len(mesh_shape)):
        cost, targets = 0.0, []
        for i, (lay, itemsize) in enumerate(operands):
            target = Layout.balanced(mesh_shape, tuple(r[i + 1] for r in combo), lay.shape)
            cost += 0.0 if target == lay else estimate_cost(lay, target, itemsize)
            targets.append(target)
        if best is None or cost < best[0]:
            result = Layout.balanced(mesh_shape, tuple(r[0] for r in combo), out)
            best = (cost, result, targets)
    assert best is not None
    return best[1], best[2]


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    width = max(len(s) for s in shapes)
    padded = [(1,) * (width - len(s)) + tuple(s) for s in shapes]
    return tuple(max(column) for column in zip(*padded))


def value_calls(result: Layout, then: Then, itemsize: int, coord: tuple[int, ...]) -> list[Call]:
    """What making ``result`` a value costs: nothing (``then=None``), ``float()``/``item()``
    (``"item"``), or ``redistribute(then)`` (a sequence of placements).

    ``item()`` of one element with no sharded dim is one ``all_reduce`` over
    the partial mesh dims together (none if they hold one term); with a
    sharded dim it gathers, as ``full_array()``.
    """
    if then is None:
        return []
    if isinstance(then, str):
        if then != "item":
            raise ValueError(f"then={then!r}: give None, 'item' or placements")
        if any(isinstance(p, Shard) for p in result.placements):
            replicated = Layout.balanced(result.mesh_shape, (R,) * len(coord), result.shape)
            return moved(result, replicated, itemsize, coord)
        terms = math.prod(
            k for k, p in zip(result.mesh_shape, result.placements) if isinstance(p, Partial)
        )
        return [] if terms == 1 else [Call("all_reduce", terms, itemsize, itemsize)]
    target = Layout.balanced(result.mesh_shape, tuple(then), result.shape)
    return moved(result, target, itemsize, coord)


def _axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    items = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % ndim for a in items))


def _source(
    mesh_shape: Sequence[int], shape: Sequence[int], placements: Sequence[Placement]
) -> Layout:
    return Layout.balanced(tuple(mesh_shape), tuple(placements), tuple(shape))


def _traffic(mesh_shape: Sequence[int], moves: Sequence[Move], result: Layout, then: Then,
             itemsize: int) -> list[Traffic]:  # fmt: skip
    """Every rank's calls: the ``moves`` in order, then making ``result`` a value."""

    def calls(coord: tuple[int, ...]) -> list[Call]:
        out = [call for a, b, size in moves for call in moved(a, b, size, coord)]
        return out + value_calls(result, then, itemsize, coord)

    return per_rank(mesh_shape, calls)


def reduction(mesh_shape: Sequence[int], shape: Sequence[int], itemsize: int,
              placements: Sequence[Placement], axis: int | Sequence[int] | None = None,
              keepdims: bool = False, then: Then = None) -> list[Traffic]:  # fmt: skip
    """``np.sum``/``prod``/``max``/``min``/``mean``/``any``/``all``/``count_nonzero``/
    ``nansum``/``nanprod``/``ufunc.reduce`` of a DArray, then ``then``.

    The reduction itself sends nothing (``Partial`` on the mesh dims that
    shard a reduced axis). ``then="item"``: one ``all_reduce`` of ``s``
    bytes over the ``P`` ranks of the partial mesh dims. ``then=[R]*ndim``:
    per partial mesh dim ``m`` (last first) an ``all_reduce`` of the result's
    block, ``N_r / P_kept`` bytes in and out over ``p_m`` ranks, where
    ``N_r`` is the result's bytes and ``P_kept`` the blocks of its kept
    sharded dims; to ``S(d)`` a ``reduce_scatter`` (``N_r / P_kept`` in,
    ``N_r / (P_kept p_m)`` out). Real-valued max/min only: complex ones are
    :func:`arg_extreme`'s candidates.
    """
    src = _source(mesh_shape, shape, placements)
    result = reduced_layout(src, _axes(axis, len(shape)), keepdims)
    return _traffic(mesh_shape, [], result, then, itemsize)


def _finished(mesh_shape: Sequence[int], shape: Sequence[int], itemsize: int,
              placements: Sequence[Placement], axes: tuple[int, ...], keepdims: bool
              ) -> tuple[Layout, Layout]:  # fmt: skip
    """A sum's partial layout and where an elementwise op that keeps no partials moves it."""
    summed = reduced_layout(_source(mesh_shape, shape, placements), axes, keepdims)
    return summed, elementwise_targets([(summed, itemsize)])[0]


def norm(mesh_shape: Sequence[int], shape: Sequence[int], itemsize: int,
         placements: Sequence[Placement], ord: float | str | None = None,
         axis: int | Sequence[int] | None = None, keepdims: bool = False, then: Then = None
         ) -> list[Traffic]:  # fmt: skip
    """``np.linalg.norm`` (vector norms and the Frobenius norm), then ``then``.

    ``ord`` 0, 1 and ``-inf`` of a vector are a sum or a min: partial, as
    :func:`reduction`. The others (None, 2, ``"fro"``, ``inf``, any other ``p``)
    end with a root (``inf``: ``maximum(., 0)``, NumPy's ``initial=0``), which
    reduces the partial value inside the call: to a
    scalar, one ``all_reduce`` of ``s`` bytes per partial mesh dim (last first);
    along a free output dim, a ``reduce_scatter`` (see :func:`elementwise_targets`).
    """
    axes = _axes(axis, len(shape))
    summed, target = _finished(mesh_shape, shape, itemsize, placements, axes, keepdims)
    if ord in (0, 1, -math.inf) and len(axes) == 1:
        target = summed
    return _traffic(mesh_shape, [(summed, target, itemsize)], target, then, itemsize)


def _squared(
    centred: Layout, itemsize: int, complex_data: bool
) -> tuple[Layout, list[tuple[Layout, Layout, int]]]:
    """``x * x`` (``re * re + im * im`` for complex): its layout and the operand moves.

    A float product keeps no partial value, so a partial ``x`` is moved for
    each operand: the same array twice.
    """
    size = itemsize // 2 if complex_data else itemsize
    out, (left, right) = elementwise_targets([(centred, size), (centred, size)])
    one = [(centred, left, size), (centred, right, size)]
    return out, one * 2 if complex_data else one


def variance(mesh_shape: Sequence[int], shape: Sequence[int], itemsize: int,
             placements: Sequence[Placement], axis: int | Sequence[int] | None = None,
             keepdims: bool = False, then: Then = None, mean_itemsize: int | None = None,
             integer: bool = False) -> list[Traffic]:  # fmt: skip
    """``np.var``/``np.std`` (two passes, as NumPy), then ``then``.

    The mean (in ``mean_itemsize`` bytes, the data's dtype: 16 for
    complex128 whose variance has 8) is all-reduced before the deviations
    are taken: one ``all_reduce`` of ``N_mean / P_kept`` bytes per partial mesh dim.
    The sum of squares is then reduced by the division by the count: a
    scalar by one ``all_reduce`` of ``s`` bytes per partial mesh dim, a result
    with a free dim by a ``reduce_scatter`` onto it (so ``var(x, axis=0)``
    of a row-sharded matrix ends column-sharded). ``std`` adds nothing.
    The subtraction may keep a partial value for float data (not for
    ``integer`` data): where reducing the mean takes more messages than
    gathering the data (a dim sharded over two mesh dims), the cost model
    takes the data, and the squares then reduce-scatter it twice.
    """
    axes = _axes(axis, len(shape))
    mean_bytes = itemsize if mean_itemsize is None else mean_itemsize
    src = _source(mesh_shape, shape, placements)
    mean = reduced_layout(src, axes, True)
    centred, (to_data, to_mean) = elementwise_targets(
        [(src, mean_bytes), (mean, mean_bytes)], linear=not integer
    )
    squared, products = _squared(centred, mean_bytes, mean_bytes > itemsize)
    summed = reduced_layout(squared, axes, keepdims)
    target = elementwise_targets([(summed, itemsize)])[0]
    moves = [(src, to_data, mean_bytes), (mean, to_mean, mean_bytes), *products,
             (summed, target, itemsize)]  # fmt: skip
    return _traffic(mesh_shape, moves, target, then, itemsize)


def nan_mean(mesh_shape: Sequence[int], shape: Sequence[int], itemsize: int,
             placements: Sequence[Placement], axis: int | Sequence[int] | None = None,
             keepdims: bool = False, then: Then = None) -> list[Traffic]:  # fmt: skip
    """``np.nanmean`` of float or complex data: the sum and the count (int64), both
    partial, reduced by their division: per partial mesh dim an ``all_reduce`` of
    the sum (``s`` bytes per element) then of the count (8), or ``reduce_scatter`` s
    onto a free dim. Integer data: :func:`reduction` (``np.mean``)."""
    axes = _axes(axis, len(shape))
    total = reduced_layout(_source(mesh_shape, shape, placements), axes, keepdims)
    mean, (to_total, to_count) = elementwise_targets([(total, itemsize), (total, _INDEX_BYTES)])
    moves = [(total, to_total, itemsize), (total, to_count, _INDEX_BYTES)]
    return _traffic(mesh_shape, moves, mean, then, itemsize)


def nan_extreme(mesh_shape: Sequence[int], shape: Sequence[int], itemsize: int,
                placements: Sequence[Placement], axis: int | Sequence[int] | None = None,
                keepdims: bool = False, then: Then = None) -> list[Traffic]:  # fmt: skip
    """``np.nanmax``/``np.nanmin`` of real float data: the all-NaN mask (bool, 1 byte)
    and the extreme, both partial, reduced by ``np.where``: per partial mesh dim an
    ``all_reduce`` of the mask, then of the extreme (or ``reduce_scatter`` s onto a
    free dim). Integer data: :func:`reduction` (``np.max``)."""
    axes = _axes(axis, len(shape))
    result = reduced_layout(_source(mesh_shape, shape, placements), axes, keepdims, "max")
    where, (to_mask, to_value) = elementwise_targets([(result, 1), (result, itemsize)])
    moves = [(result, to_mask, 1), (result, to_value, itemsize)]
    return _traffic(mesh_shape, moves, where, then, itemsize)


def nan_variance(mesh_shape: Sequence[int], shape: Sequence[int], itemsize: int,
                 placements: Sequence[Placement], axis: int | Sequence[int] | None = None,
                 keepdims: bool = False, then: Then = None) -> list[Traffic]:  # fmt: skip
    """``np.nanvar``/``np.nanstd`` of real float data, NumPy's steps on DArrays.

    The count (int64) and the sum, kept as ``(1, ...)`` partials, are
    reduced by their division (``reduce_scatter`` onto a length-1 dim where
    one is free: one rank gets the element), the mean is gathered back for
    the deviations, and the degrees of freedom (a second, partial sum of the
    count) and the sum of squares are reduced by their division: for a
    scalar, two ``reduce_scatter`` s, one ``all_gather``, two ``all_reduce`` s
    per partial mesh dim, each of one element.
    """
    axes = _axes(axis, len(shape))
    src = _source(mesh_shape, shape, placements)
    kept = reduced_layout(src, axes, True)
    mean, (to_total, to_count) = elementwise_targets([(kept, itemsize), (kept, _INDEX_BYTES)])
    diff, (data_at, mean_at) = elementwise_targets([(src, itemsize), (mean, itemsize)], True)
    deviation, (nan_at, diff_at) = elementwise_targets([(src, 1), (diff, itemsize)])
    squared, products = _squared(deviation, itemsize, False)
    summed = reduced_layout(squared, axes, keepdims)
    freedom = reduced_layout(kept, axes, keepdims)  # np.sum of the partial count stays partial
    freedom_at, (to_freedom,) = elementwise_targets([(freedom, _INDEX_BYTES)])
    divided, (summed_at, freedom_there) = elementwise_targets(
        [(summed, itemsize), (freedom_at, _INDEX_BYTES)]
    )
    result, (mask_at, divided_at) = elementwise_targets([(freedom_at, 1), (divided, itemsize)])
    moves = [
        (kept, to_total, itemsize), (kept, to_count, _INDEX_BYTES),
        (src, data_at, itemsize), (mean, mean_at, itemsize),
        (src, nan_at, 1), (diff, diff_at, itemsize), *products,
        (freedom, to_freedom, _INDEX_BYTES),
        (summed, summed_at, itemsize), (freedom_at, freedom_there, _INDEX_BYTES),
        (freedom_at, mask_at, 1), (divided, divided_at, itemsize),
    ]  # fmt: skip
    return _traffic(mesh_shape, moves, result, then, itemsize)


def arg_extreme(mesh_shape: Sequence[int], shape: Sequence[int], itemsize: int,
                placements: Sequence[Placement], axis: int | None = None,
                nan_check: bool = False) -> list[Traffic]:  # fmt: skip
    """``np.argmax``/``argmin`` (and ``max``/``min`` of complex data): (value, index) candidates.

    For each mesh dim of more than one rank that shards the reduced axis (in
    mesh-dim order), two ``all_gather`` s over its ``p_m`` ranks: the values
    (``c s`` bytes in, ``p_m c s`` out) and their int64 indices (``8 c`` in,
    ``8 p_m c`` out), ``c`` the candidates per rank (1 for ``axis=None``, else
    the block's elements off the axis). ``itemsize`` is the data's. The
    result is replicated there: ``int()`` sends nothing more. Where no such
    mesh dim exists, each block holds the reduced dims whole and nothing is
    sent.
    ``nan_check`` (``nanargmax``/``nanargmin`` of floats, ``axis=None``) adds
    the all-NaN test first: one ``all_reduce`` of 1 byte per partial mesh dim.
    """
    src = _source(mesh_shape, shape, placements)
    reduced = tuple(range(len(shape))) if axis is None else (axis % len(shape),)
    dims = sorted(
        {m for d in reduced for m in sharding_mesh_dims(src.placements, d) if mesh_shape[m] > 1}
    )
    mask = reduced_layout(src, reduced, False, "min")
    mask_target = elementwise_targets([(mask, 1)])[1][0] if nan_check else mask

    def calls(coord: tuple[int, ...]) -> list[Call]:
        out = moved(mask, mask_target, 1, coord) if nan_check else []
        local = src.local_shape(coord)
        count = math.prod(n for d, n in enumerate(local) if d not in reduced)
        for m in dims:
            k = mesh_shape[m]
            out.append(Call("all_gather", k, count * itemsize, k * count * itemsize))
            out.append(Call("all_gather", k, count * _INDEX_BYTES, k * count * _INDEX_BYTES))
        return out

    return per_rank(mesh_shape, calls)


def cumulative(mesh_shape: Sequence[int], shape: Sequence[int], itemsize: int,
               placements: Sequence[Placement], axis: int) -> list[Traffic]:  # fmt: skip
    """``np.cumsum``/``cumprod``/``ufunc.accumulate`` along ``axis``: one ``all_gather`` of
    block totals.

    Over the ``P`` ranks of the mesh dims that shard the axis together (size-1
    dims included, so even one rank makes the call): ``c s`` bytes in and
    ``P c s`` out, ``c`` the block's elements off the axis (1 for a vector).
    ``itemsize`` is the result's (``cumsum`` of int32 is int64). The layout is kept.
    """
    src = _source(mesh_shape, shape, placements)
    axis %= len(shape)
    dims = sharding_mesh_dims(src.placements, axis)
    group = math.prod(mesh_shape[m] for m in dims)

    def calls(coord: tuple[int, ...]) -> list[Call]:
        if not dims:
            return []
        local = src.local_shape(coord)
        count = math.prod(n for d, n in enumerate(local) if d != axis)
        return [Call("all_gather", group, count * itemsize, group * count * itemsize)]

    return per_rank(mesh_shape, calls)
