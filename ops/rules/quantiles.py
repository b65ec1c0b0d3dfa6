"""``np.median``, ``np.percentile``, ``np.quantile`` and their nan forms on DArrays.

Where no reduced axis is sharded, each block holds whole slices: NumPy runs on
the block (no communication) and the kept dims keep their sharding. Along a
sharded axis the order statistics are found by distributed selection
(:mod:`dmesh.ops.kernels.selection`: counts and a few samples per round, never
a sort nor a gather of the data), one problem per wanted rank of each slice;
with many slices and a kept dim long enough to hold a block per rank, the
sharding is first moved onto that dim (one all-to-all) and the work is local.

The values at the wanted ranks are then combined by NumPy's own index and
interpolation helpers (``_QuantileMethods``, ``_get_indexes``, ``_get_gamma``,
``_lerp``) and the median by ``np.mean`` of the middle pair, as NumPy does,
so the results are NumPy's bit for bit. A slice holding a NaN gives NaN
(always ``+nan``: NumPy returns one of the data's NaNs); the nan forms drop
NaNs and give NaN for an all-NaN slice.
"""

from __future__ import annotations

import importlib
import inspect
import math
import warnings
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    AxisArgumentError,
    UnsupportedError,
)
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels.selection import select
from dmesh.ops.registry import decompose

# NumPy's own quantile arithmetic (private helpers: the same bits as np.quantile).
fb: Any = importlib.import_module("numpy.lib._function_base_impl")
METHODS = ("linear", "lower", "higher", "nearest", "midpoint")
MANY_SLICES = 64  # above this many slices, move the sharding to a kept dim when one fits

# How this NumPy types a quantile, read once from its own code so that the results stay
# NumPy's bit for bit on every supported version:
# - 2.4.1 on: a Python int or float q promotes weakly (NEP 50): _quantile_unchecked takes
#   weak_q, and gamma becomes a Python float.
WEAK_Q = "weak_q" in inspect.signature(fb._quantile_unchecked).parameters
# - 2.4.0 alone: _get_gamma(virtual, previous, method, dtype) casts gamma to a dtype that
#   _quantile derives from the data (see _gamma_dtype); before and after, it keeps the
#   dtype of the virtual indexes and takes three arguments.
GAMMA_TAKES_DTYPE = len(inspect.signature(fb._get_gamma).parameters) == 4
# - before 2.4.1, with neither: see _q_in_data_type.


def _count(shape: tuple[int, ...], dims: Any) -> int:
    """The number of elements over ``dims`` of ``shape``."""
    count = 1
    for d in dims:
        count *= int(shape[d])
    return count


def _reduced(a: DArray, axis: Any, name: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(a.ndim))
    try:
        return tuple(sorted(np.lib.array_utils.normalize_axis_tuple(axis, a.ndim)))
    except np.exceptions.AxisError as exc:
        raise AxisArgumentError(f"np.{name}: {exc}") from exc


def _check(a: Any, name: str, out: Any, weights: Any, method: str) -> DArray:
    if not isinstance(a, DArray):
        raise UnsupportedError(
            f"np.{name}: q must be a plain number or NumPy array when a is a DArray; "
            "got a DArray q (gather it with q.full_array())"
        )
    if out is not None or weights is not None:
        raise UnsupportedError(f"np.{name} on DArrays takes no out= or weights=")
    if a.dtype.kind == "c":
        raise ArgumentTypeError("a must be an array of real numbers")
    if method not in METHODS:
        if method in fb._QuantileMethods:
            raise UnsupportedError(
                f"np.{name}(method={method!r}) on DArrays is not supported; "
                f"use one of {', '.join(METHODS)}"
            )
        raise ArgumentError(
            f"{method!r} is not a valid method. Use one of: {fb._QuantileMethods.keys()}"
        )
    return a.reduce_partials()


def _layout(a: DArray, reduced: tuple[int, ...], keepdims: bool, qdims: int) -> Layout:
    """The result's layout: q's dims first (replicated), then the kept dims with their cuts."""
    shape = [1 if d in reduced else n for d, n in enumerate(a.shape)]
    kept = [d for d in range(a.ndim) if keepdims or d not in reduced]
    new = {d: qdims + i for i, d in enumerate(kept)}
    placements: list[Placement] = []
    bounds: list[Any] = [None] * (qdims + len(kept))
    for p in a.placements:
        if isinstance(p, Shard) and p.dim not in reduced:
            placements.append(Shard(new[p.dim]))
            bounds[new[p.dim]] = a.spec.layout.bounds[p.dim]
        else:
            placements.append(Replicate())
    out_shape: tuple[int, ...] = (*([0] * qdims), *(shape[d] for d in kept))
    return Layout(a.spec.layout.mesh_shape, tuple(placements), out_shape, tuple(bounds))


def _wrap(block: Any, layout: Layout, a: DArray, qshape: tuple[int, ...]) -> DArray:
    shape = (*qshape, *layout.shape[len(qshape) :])
    layout = Layout(layout.mesh_shape, layout.placements, shape, layout.bounds)
    block = np.asarray(block)
    return DArray(block.reshape(DArraySpec(a.mesh, layout, block.dtype).local_shape()),
                  DArraySpec(a.mesh, layout, block.dtype))  # fmt: skip


def _moved_off(a: DArray, reduced: tuple[int, ...]) -> DArray | None:
    """``a`` with the reduced dims' sharding moved to the longest kept dim, if that pays."""
    kept = [d for d in range(a.ndim) if d not in reduced]
    mesh_dims = [m for d in reduced for m in sharding_mesh_dims(a.placements, d)]
    blocks = math.prod(a.mesh.shape[m] for m in mesh_dims)
    if not kept or _count(a.shape, kept) <= MANY_SLICES:
        return None
    longest = max(kept, key=lambda d: a.shape[d])
    if a.shape[longest] < blocks * max(1, len(sharding_mesh_dims(a.placements, longest))):
        return None
    placements = [Shard(longest) if m in mesh_dims else p for m, p in enumerate(a.placements)]
    return a.redistribute(a.mesh, placements)


def _run(a: DArray, q: Any, axis: Any, keepdims: bool, name: str, nan: bool,
         local: Any, finish: Any) -> DArray:  # fmt: skip
    """Shared driver: ``local(block, axis)`` where slices are whole, else selection."""
    reduced = _reduced(a, axis, name)
    qshape = np.shape(q)
    sharded = [m for d in reduced for m in sharding_mesh_dims(a.placements, d)]
    sharded = [m for m in sharded if a.mesh.shape[m] > 1]  # a size-1 mesh dim cuts nothing
    if sharded and _count(a.shape, reduced) and a.mesh.coordinate is not None:
        moved = _moved_off(a, reduced)
        if moved is not None:
            a, sharded = moved, []
    layout = _layout(a, reduced, keepdims, len(qshape))
    if not sharded or a.mesh.coordinate is None or not _count(a.shape, reduced):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN / empty: NumPy warns
            block = local(np.asarray(a.local), tuple(reduced))
        return _wrap(block, layout, a, qshape)
    comm = a.mesh[tuple(sorted(sharded))].comm()
    block = np.asarray(a.local)
    kept = [d for d in range(a.ndim) if d not in reduced]
    columns = np.moveaxis(block, kept, range(len(kept))).reshape(
        _count(block.shape, kept), _count(block.shape, reduced)
    )  # explicit sizes: a block may be empty in a kept dim
    total = _count(a.shape, reduced)
    floating = block.dtype.kind == "f"
    pieces = [_without_nan(c) if floating else c for c in columns]
    valid = coll.all_reduce(np.array([p.size for p in pieces], dtype=np.int64), "sum", comm)
    counts = valid if nan else np.full(len(pieces), total, dtype=np.int64)
    having_nans = (valid < total) & (not nan)
    plans = [finish(int(n), None) if n and not bad else [] for n, bad in zip(counts, having_nans)]
    problems = [(j, pair) for j, plan in enumerate(plans) for pair in _pairs(plan)]
    found = select(
        [pieces[j] for j, _ in problems],
        [low for _, (low, _) in problems],
        [high for _, (_, high) in problems],
        comm,
    )
    values = {}
    for (j, (low, high)), (at_low, at_high) in zip(problems, found):
        values[j, low], values[j, high] = at_low, at_high
    results = []
    for j, plan in enumerate(plans):
        if not plan:
            dtype = _nan_dtype(block.dtype, name, q, len(kept), finish)
            results.append(np.full(qshape, np.nan, dtype=dtype))
            continue
        results.append(finish(int(counts[j]), {k: values[j, k] for k in plan}))
    stacked = np.stack([np.asarray(r) for r in results], axis=-1) if results else None
    if stacked is None:
        probe = finish(1, {0: np.zeros((), block.dtype)})
        stacked = np.zeros((*qshape, 0), dtype=np.asarray(probe).dtype)
    kept_shape = [1 if d in reduced else block.shape[d] for d in range(a.ndim)]
    kept_shape = [n for d, n in enumerate(kept_shape) if keepdims or d not in reduced]
    return _wrap(stacked.reshape((*qshape, *kept_shape)), layout, a, qshape)


def _without_nan(column: Any) -> Any:
    """The column's numbers (a copy only when it holds NaNs)."""
    nan = np.isnan(column)
    return column[~nan] if nan.any() else column


def _pairs(ranks: list[int]) -> list[tuple[int, int]]:
    """Sorted ranks as selection problems: neighbours ``(k, k + 1)`` together, others alone."""
    pairs: list[tuple[int, int]] = []
    for k in ranks:
        if pairs and pairs[-1][0] == pairs[-1][1] == k - 1:
            pairs[-1] = (k - 1, k)
        else:
            pairs.append((k, k))
    return pairs


def _nan_dtype(dtype: np.dtype, name: str, q: Any, kept: int, finish: Any) -> Any:
    """The dtype NumPy gives a slice holding a NaN: the data's for a 0-d result, else the
    interpolation's (NumPy copies the NaN into its result array)."""
    if np.ndim(q) or kept:
        return np.asarray(finish(1, {0: np.zeros((), dtype)})).dtype
    return dtype


def _quantile_finish(q: Any, method: str, weak_q: bool) -> Any:
    """``finish(n, values)``: the ranks a slice of ``n`` needs (``values`` None), or its result.

    Mirrors ``numpy.lib._function_base_impl._quantile`` on one 1-D slice.
    """
    props = fb._QuantileMethods[method]

    def finish(n: int, values: dict[int, Any] | None) -> Any:
        virtual = np.asanyarray(props["get_virtual_index"](n, q))
        integral = props["fix_gamma"] is None or (
            method == "linear" and np.issubdtype(virtual.dtype, np.integer)
        )
        if integral:
            indexes = [np.asarray(virtual, dtype=np.intp) % n]
        else:
            stand_in = np.empty(0, dtype=np.float64)  # _get_indexes reads only its dtype
            previous, following = fb._get_indexes(stand_in, virtual, n)
            indexes = [previous % n, following % n]
        if values is None:
            return sorted({int(i) for part in indexes for i in np.ravel(part)})
        dtype = next(iter(values.values())).dtype
        pick = np.vectorize(lambda i: values[int(i)], otypes=[dtype])
        if integral:
            return pick(indexes[0]) if np.ndim(indexes[0]) else pick(indexes[0])[()]
        gamma = _gamma(virtual, previous, props, dtype)
        if weak_q:
            gamma = float(gamma)
        return fb._lerp(pick(indexes[0]), pick(indexes[1]), gamma)

    return finish


def _gamma(virtual: Any, previous: Any, props: Any, dtype: np.dtype) -> Any:
    """NumPy's ``_get_gamma`` for data of ``dtype``, called in this NumPy's form."""
    if GAMMA_TAKES_DTYPE:
        return fb._get_gamma(virtual, previous, props, _gamma_dtype(dtype, virtual))
    return fb._get_gamma(virtual, previous, props)


def _gamma_dtype(dtype: np.dtype, virtual: Any) -> Any:
    """The dtype NumPy 2.4.0's ``_quantile`` passes ``_get_gamma`` for data of ``dtype``:
    None (gamma's own, float64) for integers, the data's for floats (the result keeps
    float32), else the virtual indexes'."""
    if dtype.kind in "iu":
        return None
    if dtype.kind == "f":
        return dtype
    return virtual.dtype


def _median_finish(n: int, values: dict[int, Any] | None) -> Any:
    """The ranks of the middle (``values`` None), or NumPy's mean of the middle values."""
    middle = [n // 2 - 1, n // 2] if n % 2 == 0 else [(n - 1) // 2]
    if values is None:
        return middle
    return np.mean(np.array([values[k] for k in middle]), axis=0)


def _q_in_data_type(nan: bool) -> bool:
    """Whether NumPy types ``q`` as float data: a Python int or float q cast to the data's
    type, percentile's divisor 100 too (float32 data, float32 q). NumPy did so up to 2.3,
    and 2.4.0 still in the nan forms (there gamma's dtype argument covers the others);
    2.4.1 replaced it with weak promotion."""
    return not WEAK_Q and (nan or not GAMMA_TAKES_DTYPE)


def _fraction(q: Any, percent: bool, data_type: Any) -> Any:
    """``q`` as the array NumPy computes with: a fraction (percentile's ``q / 100``), in
    ``data_type`` as NumPy before 2.4.1 types it (None: left to promotion)."""
    if percent:
        hundred = 100 if data_type is None else data_type.type(100)
        # asanyarray, not out=...: ufuncs take out=... from NumPy 2.3 only.
        return np.asanyarray(np.true_divide(q, hundred))
    if data_type is not None and isinstance(q, (int, float)):  # NumPy's own test
        return np.asanyarray(q, dtype=data_type)
    return np.asanyarray(q)


def _q(q: Any, name: str, percent: bool, nan: bool, dtype: Any) -> tuple[Any, bool]:
    """``q`` as NumPy takes it and whether it promotes weakly, for data of ``dtype``
    (None when ``a`` is no DArray, which ``_check`` refuses)."""
    if isinstance(q, DArray):
        raise UnsupportedError(
            f"np.{name}: q must be a plain number or NumPy array when a is a DArray; "
            "got a DArray q (gather it with q.full_array())"
        )
    weak_q = WEAK_Q and type(q) in (int, float)
    floating = dtype is not None and dtype.kind == "f"
    q = _fraction(q, percent, dtype if floating and _q_in_data_type(nan) else None)
    if q.ndim > 1:
        raise ArgumentError("q must be a scalar or 1d")
    if not fb._quantile_is_valid(q):
        which = "Percentiles must be in the range [0, 100]"
        raise ArgumentError(which if percent else "Quantiles must be in the range [0, 1]")
    return q, weak_q


def _quantile(a: Any, q: Any, axis: Any, out: Any, method: str, keepdims: bool, weights: Any,
              name: str, percent: bool, nan: bool) -> DArray:  # fmt: skip
    q, weak_q = _q(q, name, percent, nan, getattr(a, "dtype", None))
    a = _check(a, name, out, weights, method)
    numpy: Any = np.nanquantile if nan else np.quantile

    def local(block: Any, axes: tuple[int, ...]) -> Any:
        qq = float(q) if weak_q else q  # the same weak promotion as the caller's q
        return numpy(block, qq, axis=axes, method=method, keepdims=keepdims)

    finish = _quantile_finish(q, method, weak_q)
    return _run(a, q, axis, keepdims, name, nan and a.dtype.kind == "f", local, finish)


def _median(a: Any, axis: Any, out: Any, keepdims: bool, name: str, nan: bool) -> DArray:
    a = _check(a, name, out, None, "linear")
    numpy: Any = np.nanmedian if nan else np.median

    def local(block: Any, axes: tuple[int, ...]) -> Any:
        return numpy(block, axis=axes, keepdims=keepdims)

    return _run(a, np.float64(0.5), axis, keepdims, name, nan and a.dtype.kind == "f", local,
                _median_finish)  # fmt: skip


@decompose(np.median)
def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> DArray:  # fmt: skip
    """``np.median`` of a DArray (distributed selection along sharded axes)."""
    return _median(a, axis, out, keepdims, "median", False)


@decompose(np.nanmedian)
def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> DArray:  # fmt: skip
    """``np.nanmedian`` of a DArray: NaNs dropped; an all-NaN slice gives NaN."""
    return _median(a, axis, out, keepdims, "nanmedian", True)


def _make(name: str, percent: bool, nan: bool) -> Any:
    def impl(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *,
             weights: Any = None) -> DArray:  # fmt: skip
        return _quantile(a, q, axis, out, method, keepdims, weights, name, percent, nan)

    impl.__name__ = name
    impl.__doc__ = f"``np.{name}`` of a DArray (distributed selection along sharded axes)."
    return impl


percentile = decompose(np.percentile)(_make("percentile", True, False))
quantile = decompose(np.quantile)(_make("quantile", False, False))
nanpercentile = decompose(np.nanpercentile)(_make("nanpercentile", True, True))
nanquantile = decompose(np.nanquantile)(_make("nanquantile", False, True))
