"""``argmax``/``argmin`` over sharded axes: candidates per block, combined across ranks.

Each rank finds its block's best element along the axis and turns the
position into a global index. Along every mesh dim that shards the axis, the
ranks all-gather their (value, index) candidates (arrays of the result's
size, far smaller than the data) and keep, element by element, the best
value, the first NaN if there is one (NumPy's rule), and the smallest global
index among ties. The combination is associative and order-free, so nested
shardings are combined one mesh dim at a time.

What a call does besides its NumPy work and its messages follows from the
operand's spec and the static arguments alone (the result's spec, the mesh
dims to gather over, the block's offsets): a :class:`_Plan`, made once per
(spec, axis, keepdims, max or min, values or indices) and kept, so that a
repeated call (k-means' ``d2.argmin(axis=1)`` every iteration) is a lookup,
the block's own ``argmax`` and the candidates' messages.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh import _hooks
from dmesh.collectives.errors import ArgumentError, AxisArgumentError
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.indexing.views import write_out
from dmesh.ops.registry import decompose

_FAR = np.iinfo(np.int64).max  # the index of a candidate that does not exist


def _best(values: Any, indices: Any, find_max: bool) -> tuple[Any, Any]:
    """Along axis 0: the best value (max or min, first NaN wins) and its smallest index."""
    if values.dtype.kind in "fc":  # complex: NaN in either part; ordered lexicographically
        nan = np.isnan(values)
        filled = np.where(nan, _sentinel(values.dtype, find_max), values)
    else:
        nan = np.zeros(values.shape, dtype=bool)
        filled = values
    target = filled.max(axis=0) if find_max else filled.min(axis=0)
    chosen = np.where(nan.any(axis=0), nan, (filled == target) & ~nan)
    index = np.where(chosen, indices, _FAR).min(axis=0)
    value = np.take_along_axis(values, np.argmax(chosen & (indices == index), axis=0)[None], 0)[0]
    return value, index


def _best_scalar(values: Any, indices: Any, find_max: bool) -> tuple[Any, Any]:
    """:func:`_best` of 1-D real candidates (``axis=None``), in Python: a handful of
    candidates, where NumPy's calls would cost more than the comparisons."""
    best = -1
    best_value: Any = None
    best_index = _FAR
    for k, (v, i) in enumerate(zip(values.tolist(), indices.tolist())):
        if i == _FAR:  # an empty block's stand-in
            continue
        if best < 0:
            better = True
        elif best_value != best_value:  # a NaN is held: only an earlier NaN replaces it
            better = v != v and i < best_index
        elif v != v:  # the first NaN wins
            better = True
        else:
            better = (v > best_value if find_max else v < best_value) or (
                v == best_value and i < best_index
            )
        if better:
            best, best_value, best_index = k, v, i
    return values[best, ...], indices[best, ...]  # (all stand-ins: the last, any will do)


@dataclass(frozen=True, eq=False)
class _Plan:
    """What one (operand spec, axis, keepdims, max or min, values or indices) call does,
    found from the spec alone: the same on every rank of the mesh."""

    spec: DArraySpec  # the result's
    local_shape: tuple[int, ...]  # the result's block
    axis: int | None
    find_max: bool
    want_values: bool
    member: bool  # this rank is in the mesh
    local_only: bool  # every block holds the reduced dims whole: NumPy's answer is global
    reshape: bool  # NumPy's answer on the block is no array of the result's block shape
    gathered: tuple[tuple[int, tuple[int, ...]], ...]  # (mesh dim, one 1 per rank) to gather
    empty: bool  # this rank's block holds none of the reduced elements
    kept: tuple[int, ...]  # the shape of this rank's candidates
    offset: int  # axis: the block's start along it; None: its first element's flat index
    block_shape: tuple[int, ...]
    strides: tuple[int, ...]  # the global array's, in elements (axis=None: flat indices)
    scalar_best: bool  # candidates combined in Python (axis=None, real dtype up to 64 bits)
    # One mesh dim gathered, along an axis its ranks hold in order: the candidates are
    # NumPy's own argmax of the rows that hold some (``rows``; None: all of them).
    ordered: bool
    rows: list[int] | None
    columns: np.ndarray  # arange(candidates per rank), to pick one row per column


# (spec, axis, keepdims, find_max, want_values) -> its plan; axis as given (an int or
# None) and normalized, keepdims a bool. Bounded: specs hold meshes.
_plans: dict[tuple[Any, ...], _Plan] = {}


def _extreme(
    a: Any, axis: Any, keepdims: bool, find_max: bool, name: str, values: bool = False
) -> Any:
    key = None
    if type(a) is DArray and (axis is None or type(axis) is int) and type(keepdims) is bool:
        key = (a._spec, axis, keepdims, find_max, values)
        plan = _plans.get(key)
        if plan is not None:  # a call seen before (its checks passed then): a lookup
            block = a.local  # (the property: dmesh.compile's segments may have ops to run)
            return _run(plan, block if type(block) is np.ndarray else np.asarray(block))
    a = a.reduce_partials()
    if axis is None:
        if a.size == 0:
            raise ArgumentError(f"attempt to get {name} of an empty sequence")
    else:
        axis = int(axis)
        if not -a.ndim <= axis < a.ndim:
            raise AxisArgumentError(axis, a.ndim, f"np.{name}")
        axis %= a.ndim
        if a.shape[axis] == 0:
            raise ArgumentError(f"attempt to get {name} of an empty sequence")
    spec = a._spec
    normalized = (spec, axis, bool(keepdims), find_max, values)
    plan = _plans.get(normalized)
    if plan is None:
        plan = _plan(spec, axis, bool(keepdims), find_max, values)
    if len(_plans) >= 1024:
        _plans.clear()
    _plans[normalized] = plan
    if key is not None and key[0] is spec:  # (partial terms: reduced first, each call)
        _plans[key] = plan
    recorder = _hooks.recorder
    if recorder is not None and recorder.records(a):  # dmesh.compile traces: a node
        what = f"np.{name}(axis={axis}, keepdims={keepdims}, values={values})"
        return recorder.block_map(functools.partial(_planned, plan=plan), a, plan.spec, what)
    return _run(plan, np.asarray(a.local))


def _planned(block: Any, plan: _Plan) -> Any:
    """``plan`` run on ``block``: the result's block (the node a compiled plan runs; its
    spec, ``plan.spec``, is known from the operand's alone)."""
    return _run(plan, block if type(block) is np.ndarray else np.asarray(block))._local


def _plan(
    spec: DArraySpec, axis: int | None, keepdims: bool, find_max: bool, want_values: bool
) -> _Plan:
    """The plan of a call on an operand of ``spec`` (no partial terms; checked arguments)."""
    layout = spec.layout
    mesh = spec.mesh
    ndim = len(layout.shape)
    reduced = tuple(range(ndim)) if axis is None else (axis,)
    out_shape = tuple(
        1 if d in reduced else n for d, n in enumerate(layout.shape) if keepdims or d not in reduced
    )
    new_dim = {d: (d if keepdims else d - sum(1 for r in reduced if r < d)) for d in range(ndim)}
    placements: list[Placement] = []
    bounds: list[Any] = [None] * len(out_shape)
    for p in layout.placements:
        if isinstance(p, Shard) and p.dim not in reduced:
            placements.append(Shard(new_dim[p.dim]))
            bounds[new_dim[p.dim]] = layout.bounds[p.dim]
        else:
            placements.append(Replicate())
    result = Layout(layout.mesh_shape, tuple(placements), out_shape, tuple(bounds))
    dtype = spec.dtype if want_values else np.dtype(np.intp)
    out = DArraySpec(mesh, result, dtype)
    # The mesh dims whose ranks hold parts of the reduced dims (one rank: nothing to gather).
    gathered = sorted(
        {m for d in reduced for m in sharding_mesh_dims(layout.placements, d) if mesh.shape[m] > 1}
    )
    block_shape = spec.local_shape()
    offsets = spec.offsets()
    strides = [1] * ndim
    for d in range(ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * layout.shape[d + 1]
    if axis is None:
        offset = sum(o * s for o, s in zip(offsets, strides))
        kept: tuple[int, ...] = ()
        empty = 0 in block_shape
    else:
        offset = offsets[axis]
        kept = tuple(n for d, n in enumerate(block_shape) if d != axis)
        empty = block_shape[axis] == 0
    ordered, rows = False, None
    if axis is not None and len(gathered) == 1 and mesh.coordinate is not None:
        # The spans of the axis held along the gathered mesh dim, at this rank's other
        # coordinates (those of every rank it gathers with): in order, empty ones left out.
        coord = list(mesh.coordinate)
        spans = []
        for k in range(mesh.shape[gathered[0]]):
            coord[gathered[0]] = k
            spans.append(layout.block(coord)[axis])
        held = [k for k, (start, stop) in enumerate(spans) if stop > start]
        ordered = all(spans[j][1] <= spans[k][0] for j, k in itertools.pairwise(held))
        rows = None if len(held) == len(spans) else held
    return _Plan(
        spec=out,
        local_shape=out.local_shape(),
        axis=axis,
        find_max=find_max,
        want_values=want_values,
        member=mesh.coordinate is not None,
        local_only=not want_values and not gathered and mesh.coordinate is not None,
        reshape=keepdims or axis is None,
        gathered=tuple((m, (1,) * mesh.shape[m]) for m in gathered),
        empty=empty,
        kept=kept,
        offset=offset,
        block_shape=block_shape,
        strides=tuple(strides),
        scalar_best=axis is None and spec.dtype.kind in "biuf" and spec.dtype.itemsize <= 8,
        ordered=ordered,
        rows=rows,
        columns=np.arange(math.prod(kept), dtype=np.intp),
    )


def _run(plan: _Plan, block: np.ndarray) -> DArray:
    """The planned call on this rank's block (collective where the plan gathers)."""
    spec = plan.spec
    if plan.local_only:
        # Every block holds the reduced dims whole: NumPy's own answer on the
        # block is the global one (k-means' d2.argmin(axis=1) on a row-sharded d2).
        local = block.argmax(plan.axis) if plan.find_max else block.argmin(plan.axis)
        return DArray(np.asarray(local).reshape(plan.local_shape) if plan.reshape else local, spec)
    if not plan.member:
        return DArray(np.empty(plan.local_shape, spec.dtype), spec)
    values, indices = _local_candidates(plan, block)
    mesh = spec.mesh
    for m, sizes in plan.gathered:
        comm = mesh.comm(m)
        stacked_v = coll.all_gather(values[None], 0, comm, sizes=sizes)
        stacked_i = coll.all_gather(indices[None], 0, comm, sizes=sizes)
        if plan.ordered:
            values, indices = _best_ordered(plan, stacked_v, stacked_i)
        elif plan.scalar_best:
            values, indices = _best_scalar(stacked_v, stacked_i, plan.find_max)
        else:
            values, indices = _best(stacked_v, stacked_i, plan.find_max)
    if plan.want_values:
        return DArray(np.asarray(values, dtype=spec.dtype).reshape(plan.local_shape), spec)
    return DArray(np.asarray(indices, dtype=np.intp).reshape(plan.local_shape), spec)


def _local_candidates(plan: _Plan, block: np.ndarray) -> tuple[Any, Any]:
    """This block's best value and its global index (per element off the axis)."""
    find_max = plan.find_max
    if plan.empty:  # nothing here: a value every real candidate beats, at no index
        fill = _sentinel(block.dtype, find_max)
        return np.full(plan.kept, fill, block.dtype), np.full(plan.kept, _FAR, np.int64)
    axis = plan.axis
    if axis is None:
        local = int(block.argmax() if find_max else block.argmin())
        index = plan.offset
        rest = local
        for n, stride in zip(reversed(plan.block_shape), reversed(plan.strides)):
            rest, position = divmod(rest, n)
            index += position * stride
        return np.asarray(block.flat[local]), np.asarray(index, dtype=np.int64)
    local = block.argmax(axis) if find_max else block.argmin(axis)
    if plan.want_values or block.dtype.kind == "c":  # the values themselves (complex max)
        values = np.take_along_axis(block, np.expand_dims(local, axis), axis).squeeze(axis)
    else:  # real: only compared, and the max orders (and holds a NaN) as the argmax's value
        values = block.max(axis) if find_max else block.min(axis)
    if local.dtype != np.int64:
        local = local.astype(np.int64)
    local += plan.offset
    return values, local


def _best_ordered(plan: _Plan, values: Any, indices: Any) -> tuple[Any, Any]:
    """:func:`_best` of rows whose indices grow with the row (empty blocks' rows aside):
    NumPy's argmax of the values along the rows (first NaN, first of ties) picks them."""
    rows = plan.rows
    if rows is not None:
        values, indices = values[rows], indices[rows]
    count = plan.columns.size
    flat = values.reshape(len(values), count)
    pick = (flat.argmax(0) if plan.find_max else flat.argmin(0)) * count + plan.columns
    chosen = indices.reshape(-1)[pick].reshape(plan.kept)
    return flat.reshape(-1)[pick].reshape(plan.kept) if plan.want_values else None, chosen


def _sentinel(dtype: np.dtype, find_max: bool) -> Any:
    """A value no real candidate loses to (ties go to the smaller, real, index)."""
    if dtype.kind == "c":  # lexicographic: below (or above) every number with both parts
        return complex(-np.inf, -np.inf) if find_max else complex(np.inf, np.inf)
    if dtype.kind == "f":
        return -np.inf if find_max else np.inf
    if dtype.kind == "b":
        return not find_max
    info = np.iinfo(dtype)
    return info.min if find_max else info.max


def extreme_values(a: Any, axis: Any = None, keepdims: bool = False, find_max: bool = True) -> Any:
    """``np.max``/``np.min`` by the same candidates: for complex data, which NumPy orders
    lexicographically (real part, then imaginary) and which MPI cannot reduce; the first NaN
    wins, as in NumPy. ``axis`` is None or one int."""
    name = "max" if find_max else "min"
    return _extreme(a, axis, keepdims, find_max, name, values=True)


@decompose(np.nanargmax)
def nanargmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Any:
    """``np.nanargmax``: NaNs ignored; an all-NaN slice raises on every rank, as NumPy."""
    return _nan_arg(a, axis, out, keepdims, True)


@decompose(np.nanargmin)
def nanargmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Any:
    """``np.nanargmin``: NaNs ignored; an all-NaN slice raises on every rank, as NumPy."""
    return _nan_arg(a, axis, out, keepdims, False)


def _nan_arg(a: Any, axis: Any, out: Any, keepdims: Any, find_max: bool) -> Any:
    """NumPy's: NaNs replaced by -inf (+inf), refused where a whole slice is NaN."""
    keepdims = False if keepdims is np._NoValue else bool(keepdims)
    if a.dtype.kind in "fc":
        nan = np.isnan(a)
        if a.size and bool(np.any(np.all(nan, axis=axis))):
            raise ArgumentError("All-NaN slice encountered")
        a = np.where(nan, -np.inf if find_max else np.inf, a)
    if find_max:
        return argmax(a, axis, out, keepdims=keepdims)
    return argmin(a, axis, out, keepdims=keepdims)


@decompose(np.argmax)
def argmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """``np.argmax`` on a DArray: global indices, replicated along the reduced axes."""
    if out is not None:
        return write_out("argmax", out, lambda: _extreme(a, axis, keepdims, True, "argmax"))
    return _extreme(a, axis, keepdims, True, "argmax")


@decompose(np.argmin)
def argmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """``np.argmin`` on a DArray: global indices, replicated along the reduced axes."""
    if out is not None:
        return write_out("argmin", out, lambda: _extreme(a, axis, keepdims, False, "argmin"))
    return _extreme(a, axis, keepdims, False, "argmin")
