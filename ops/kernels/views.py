"""Views that change the shape: ``reshape``/``ravel``, ``squeeze``, ``expand_dims``.

Usually no data moves. A sharded dim ``d`` stays sharded, as new dim ``e``,
when its blocks are contiguous in the new shape: the dims before ``d`` hold as
many elements as the dims before ``e`` (so an element's index over those dims
is the same in both shapes), and every boundary ``b`` of ``d`` falls on a
whole row of ``e`` (``b * prod(old[d+1:])`` a multiple of ``prod(new[e+1:])``:
``(n, m) -> (n * m,)``, ``(n * m,) -> (n, m)`` with boundaries multiples of
``m``, ``(6, 4) -> (4, 6)`` with boundaries at rows 0, 3, 6). Length-1 dims
anywhere change nothing.

Other reshapes move only what must move, never the whole array: the sharded
mesh dims first shard the leading dim (rows whole; an all-to-all), and if the
row boundaries still do not fall on the new shape's rows, the array is seen
as a flat 1-D array (a view), its boundaries are moved to the nearest
multiples of the new row length (only the elements between an old and a new
boundary travel: one transfer), and that is seen in the new shape. Partial
values stay partial (reshaping is linear: each term moves with its block).
The one replicated result is a one-element array reshaped to 0-d.

What a reshape does follows from the argument's spec and the target alone, so
it is planned once per (spec, shape) (:class:`_Plan`): a repeated reshape that
is a view is a dict lookup and the block's own reshape.
"""

from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple

import numpy as np

from dmesh.collectives.blocks import resolve_shape
from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError, AxisArgumentError, UnsupportedError
from dmesh.core.layout import Layout, balanced_bounds, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.indexing.views import Reshaped, whole
from dmesh.ops.registry import decompose

# old sharded dim -> (new dim, old row length, new row length), or None: not contiguous
DimMap = dict[int, tuple[int, int, int] | None]


class _Plan(NamedTuple):
    """What reshaping arrays of one spec into one shape does (from the spec alone)."""

    shape: tuple[int, ...]  # the target, its -1 resolved
    spec: DArraySpec | None  # the result's where no element moves; None: elements move
    block: tuple[int, ...]  # this rank's block shape in ``spec``
    empty: bool  # no elements: the block is a new empty one (no view)


# (argument spec, shape as given or resolved) -> its plan. Bounded: specs hold meshes.
_plans: dict[tuple[DArraySpec, Any], _Plan] = {}
_LIMIT = 1024


def _remember(key: tuple[DArraySpec, Any], plan: _Plan) -> None:
    if len(_plans) >= _LIMIT:
        _plans.clear()
    _plans[key] = plan


def _plain(shape: Any) -> bool:
    """Whether ``shape`` is an int or a tuple of ints: a key that no other value equals
    (``(2.0, 5)`` equals ``(2, 5)`` but is refused by NumPy, so is never a key)."""
    kind = type(shape)
    if kind is tuple:
        for n in shape:  # noqa: SIM110 - a loop: half the time of all() over a generator
            if type(n) is not int:
                return False
        return True
    return kind is int


def _plan_of(a: DArray, shape: Any) -> _Plan:
    """The plan of ``np.reshape(a, shape)``: NumPy's errors (on every rank, from the
    shape and size alone) on the first call of a (spec, shape), then a lookup."""
    key = (a._spec, shape) if _plain(shape) else None
    plan = None if key is None else _plans.get(key)
    if plan is None:
        plan = _planned(a._spec, resolve_shape(shape, a.size))
        if key is not None:
            _remember(key, plan)
    return plan


def _planned(spec: DArraySpec, shape: tuple[int, ...]) -> _Plan:
    """The plan of reshaping ``spec`` into ``shape`` (resolved, of its size), made once."""
    key = (spec, shape)
    plan = _plans.get(key)
    if plan is None:
        layout = spec.layout
        if math.prod(layout.shape) == 0:
            result: DArraySpec | None = _empty_spec(spec, shape)
        else:
            mapping = _mapping(layout, shape)
            result = _view_spec(spec, shape, mapping) if None not in mapping.values() else None
        block = () if result is None else result.local_shape()
        plan = _Plan(shape, result, block, result is not None and math.prod(shape) == 0)
        _remember(key, plan)
    return plan


def _reshaped(a: DArray, shape: tuple[int, ...]) -> DArray:
    """``a`` in ``shape``: a view where the blocks allow, else the fewest elements moved first."""
    return _reshaped_and_moved(a, shape)[0]


def _reshaped_and_moved(a: DArray, shape: tuple[int, ...]) -> tuple[DArray, bool]:
    """:func:`_reshaped`, and whether elements moved (the result is then no view of ``a``)."""
    return _made(a, _planned(a._spec, shape))


def _made(a: DArray, plan: _Plan) -> tuple[DArray, bool]:
    """``a`` reshaped as ``plan`` says, and whether elements moved."""
    spec = plan.spec
    if spec is None:
        return _moved_reshape(a, plan.shape, _mapping(a._spec.layout, plan.shape)), True
    if plan.empty:
        return DArray(array_module(a.local).empty(plan.block, spec.dtype), spec), False
    return DArray(a.local.reshape(plan.block), spec), False


def _moved_reshape(a: DArray, shape: tuple[int, ...], mapping: DimMap) -> DArray:
    """``a`` in ``shape`` where some sharded dim cannot stay where it is (see the module)."""
    layout = a.spec.layout
    if not shape:  # one element to 0-d: the one small replicated result
        return _view(_placed_as(a, None, _sharding(a)), shape, {})
    lead = _lead(a.shape)
    sharding = _sharding(a)
    dims = {p.dim for p in layout.placements if isinstance(p, Shard)}
    if len(dims) == 1 and math.prod(a.shape[: min(dims)]) > a.shape[lead]:
        # One sharded dim d after several long ones: seen as (prod(old[:d]),
        # old[d], rest) (a view), its rows are finer than the leading dim's.
        d = dims.pop()
        mid = (math.prod(a.shape[:d]), a.shape[d], math.prod(a.shape[d + 1 :]))
        return _reshaped(_view(a, mid, _mapping(layout, mid)), shape)
    # Fewer rows than blocks along the leading dim would leave blocks empty: go
    # straight to the re-cut, which then balances the new rows.
    coarse = a.shape[lead] < math.prod(a.mesh.shape[m] for m in sharding)
    # Only the mesh dims whose blocks break first shard the leading dim, when
    # that is enough (decided from the layouts alone, so every rank agrees).
    broken = {m for m, p in enumerate(layout.placements) if isinstance(p, Shard)
              and mapping[p.dim] is None}  # fmt: skip
    for mesh_dims in () if coarse else (broken, sharding):
        rows = _rows_layout(a, lead, mesh_dims)
        rows_mapping = _mapping(rows, shape)
        if None not in rows_mapping.values():
            return _view(a.with_layout(rows), shape, rows_mapping)
    return _recut(a.with_layout(_rows_layout(a, lead, sharding)), lead, shape, balance=coarse)


def _sharding(a: DArray) -> set[int]:
    """The mesh dims that shard some dim of ``a``."""
    return {m for m, p in enumerate(a.placements) if isinstance(p, Shard)}


def _lead(shape: tuple[int, ...]) -> int:
    """The first dim longer than 1: its blocks are contiguous in C order (0 if none)."""
    return next((d for d, n in enumerate(shape) if n > 1), 0)


def _rows_layout(a: DArray, lead: int, mesh_dims: set[int]) -> Layout:
    """``a``'s layout with ``mesh_dims`` sharding ``lead`` (balanced where anything changes)."""
    layout = a.spec.layout
    placements = tuple(Shard(lead) if m in mesh_dims else p
                       for m, p in enumerate(layout.placements))  # fmt: skip
    if placements == layout.placements:
        return layout  # already there: keep the boundaries, nothing moves
    return Layout.balanced(layout.mesh_shape, placements, layout.shape)


def _placed_as(a: DArray, dim: int | None, mesh_dims: set[int]) -> DArray:
    """``a`` with ``mesh_dims`` sharding ``dim`` (or replicating, for None)."""
    placements: list[Placement] = [
        (Replicate() if dim is None else Shard(dim)) if m in mesh_dims else p
        for m, p in enumerate(a.placements)
    ]
    return a.redistribute(a.mesh, placements)


def _recut(a: DArray, lead: int, shape: tuple[int, ...], balance: bool) -> DArray:
    """``a``, sharded along ``lead`` only, moved so that its blocks are whole rows of ``shape``.

    Seen flat (a view), each boundary moves to the nearest multiple of the new
    row length (or, with ``balance``, to the balanced boundaries of the new
    rows); one transfer moves the elements between old and new boundaries,
    and the flat blocks are seen in ``shape``. Collective.
    """
    layout = a.spec.layout
    old_row = math.prod(a.shape[lead + 1 :])
    new_lead = _lead(shape)
    new_row = math.prod(shape[new_lead + 1 :])
    cut = layout.bounds[lead]
    assert cut is not None  # every sharding mesh dim shards ``lead``
    flat_cut = tuple(b * old_row for b in cut)
    flat = _view(a, (a.size,), {lead: (0, old_row, 1)})
    if balance:
        levels = tuple(layout.mesh_shape[m] for m in sharding_mesh_dims(layout.placements, lead))
        moved = tuple(b * new_row for b in balanced_bounds(shape[new_lead], levels))
    else:  # round half down, in integers: the same boundaries on every rank
        moved = tuple((b + (new_row - 1) // 2) // new_row * new_row for b in flat_cut)
    target = Layout(flat.spec.layout.mesh_shape, flat.placements, (a.size,), (moved,))
    return _view(flat.with_layout(target), shape, {0: (new_lead, 1, new_row)})


def _empty_spec(spec: DArraySpec, shape: tuple[int, ...]) -> DArraySpec:
    """An empty array's spec in ``shape``: no data, so the sharding mesh dims shard a
    length-0 dim."""
    zero = next(d for d, n in enumerate(shape) if n == 0)
    placements = tuple(Shard(zero) if isinstance(p, Shard) else p for p in spec.placements)
    layout = Layout.balanced(spec.mesh.shape, placements, shape)
    return DArraySpec(spec.mesh, layout, spec.dtype)


def _mapping(layout: Layout, new: tuple[int, ...]) -> DimMap:
    """For each sharded dim of ``layout``: the new dim holding its blocks, and the row lengths.

    Old dim ``d`` maps to new dim ``e`` when ``prod(old[:d]) == prod(new[:e])``
    (the index over the dims before them is the same element count) and every
    boundary ``b`` of ``d`` gives ``b * prod(old[d+1:])`` a multiple of
    ``prod(new[e+1:])``. Of the dims ``e`` that qualify (they differ only by
    length-1 dims), the last is taken: its rows are the shortest. A dim whose
    ``e`` an earlier sharded dim already took maps to None. The array must not
    be empty (``_empty`` handles that).
    """
    old = layout.shape
    out: DimMap = {}
    taken: set[int] = set()
    for d, cut in enumerate(layout.bounds):
        if cut is None:
            continue
        before = math.prod(old[:d])
        old_row = math.prod(old[d + 1 :])
        candidates = [e for e in range(len(new)) if math.prod(new[:e]) == before]
        out[d] = None
        if candidates and candidates[-1] not in taken:
            e = candidates[-1]
            new_row = math.prod(new[e + 1 :])
            if all(b * old_row % new_row == 0 for b in cut):
                out[d] = (e, old_row, new_row)
                taken.add(e)
    return out


def _view(a: DArray, shape: tuple[int, ...], mapping: DimMap) -> DArray:
    """``a`` seen in ``shape``, each sharded dim ``d`` becoming ``mapping[d]``'s new dim."""
    spec = _view_spec(a._spec, shape, mapping)
    return DArray(a.local.reshape(spec.local_shape()), spec)


def _view_spec(spec: DArraySpec, shape: tuple[int, ...], mapping: DimMap) -> DArraySpec:
    """The spec of :func:`_view`'s result."""
    layout = spec.layout
    placements: list[Placement] = list(layout.placements)
    bounds: list[Any] = [None] * len(shape)
    for d, entry in mapping.items():
        cut = layout.bounds[d]
        if entry is None or cut is None:  # pragma: no cover - callers map every sharded dim
            raise AssertionError(f"reshape {layout.shape} -> {shape}: dim {d} cannot stay sharded")
        e, old_row, new_row = entry
        bounds[e] = tuple(b * old_row // new_row for b in cut)
    for m, p in enumerate(layout.placements):
        if isinstance(p, Shard):
            entry = mapping[p.dim]
            assert entry is not None
            placements[m] = Shard(entry[0])
    result = Layout(layout.mesh_shape, tuple(placements), shape, tuple(bounds))
    return DArraySpec(spec.mesh, result, spec.dtype)


@decompose(np.reshape)
def reshape(a: Any, shape: Any = None, order: str = "C", **kwargs: Any) -> DArray:
    """``np.reshape`` of a DArray (C order): a view of each block where the blocks allow."""
    if kwargs:
        shape = kwargs.pop("newshape", shape)
    if order != "C" or kwargs:
        raise UnsupportedError("np.reshape on DArrays supports C order only")
    plan = _plan_of(a, shape)
    if plan.spec is not None and not plan.empty:  # a view of the block: the repeated case
        return DArray(a.local.reshape(plan.block), plan.spec)
    return _written_back(a, plan)


@decompose(np.ravel)
def ravel(a: Any, order: str = "C") -> DArray:
    """``np.ravel`` of a DArray (C order)."""
    if order != "C":
        raise UnsupportedError("np.ravel on DArrays supports C order only")
    plan = _plans.get((a._spec, -1))  # (-1: the one shape of ``a.size`` elements)
    if plan is None:
        plan = _plan_of(a, -1)
    if plan.spec is not None and not plan.empty:  # a view of the block: the repeated case
        return DArray(a.local.reshape(plan.block), plan.spec)
    return _written_back(a, plan)


def _written_back(a: DArray, plan: _Plan) -> DArray:
    """``a`` reshaped as ``plan`` says; where elements had to move (a copy, where NumPy's
    reshape of a C-contiguous array is a view), writes through the result reach ``a``: it is
    marked :class:`~dmesh.ops.indexing.views.Reshaped`, written back after each write.
    Only where NumPy's reshape is a view: ``a`` is known to be C-contiguous as NumPy
    sees it (a block that owns its memory, or a contiguous slice of one, ``a[1:]``);
    of anything else (``a[:, :3]``, ``a.T``: NumPy's reshape copies) it stays a copy."""
    result, moved = _made(a, plan)
    if moved and whole(a):
        result._view = Reshaped(a)
    return result


def _axes(axes: Any, ndim: int) -> tuple[int, ...]:
    """Each axis in ``[0, ndim)``, NumPy's ``AxisError`` (on every rank) if out of range."""
    out = []
    for axis in axes:
        value = operator.index(axis)
        if not -ndim <= value < ndim:
            raise AxisArgumentError(value, ndim)
        out.append(value % ndim)
    return tuple(out)


@decompose(np.squeeze)
def squeeze(a: Any, axis: Any = None) -> DArray:
    """``np.squeeze``: drop length-1 dims (a view: nothing moves)."""
    if axis is None:
        axes = tuple(range(a.ndim))
    else:  # NumPy's checks and messages; a list is refused, as NumPy does
        axes = _axes(axis if isinstance(axis, tuple) else (operator.index(axis),), a.ndim)
        if len(set(axes)) != len(axes):
            raise ArgumentError("duplicate value in 'axis'")
    if any(a.shape[x] != 1 for x in axes) and axis is not None:
        raise ArgumentError("cannot select an axis to squeeze out which has size not equal to one")
    return _reshaped(a, tuple(n for d, n in enumerate(a.shape) if not (d in axes and n == 1)))


@decompose(np.expand_dims)
def expand_dims(a: Any, axis: Any) -> DArray:
    """``np.expand_dims``: insert length-1 dims (a view: nothing moves)."""
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    positions = sorted(_axes(axes, a.ndim + len(axes)))  # in range of the result
    if len(set(positions)) != len(positions):
        raise ArgumentError("repeated axis")
    shape = list(a.shape)
    for p in positions:
        shape.insert(p, 1)
    return _reshaped(a, tuple(shape))
