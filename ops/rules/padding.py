"""``np.pad`` of DArrays, axis after axis as NumPy pads, by joining each side's cells.

Per axis the padded array is ``[left, a, right]`` joined along the axis
(:func:`dmesh.ops.kernels.joins.join`: a sharded axis is re-cut, never
gathered). The sides are made from the array where it lies:

- ``constant``/``empty``: a slab of the value in each block's layout (no communication);
- ``edge``: the first or last cell repeated (one slice, :func:`np.repeat`);
- ``reflect``/``symmetric``/``wrap``: the cells NumPy would copy, found with the index map
  ``np.pad(np.arange(n), ...)`` and taken with integer-array indexing (request and
  response between the owners, no gather);
- ``maximum``/``minimum``/``mean``/``median``: the statistic of the ``stat_length``
  cells next to the edge (a distributed reduction), repeated;
- ``linear_ramp``: NumPy's ``linspace`` from ``end_values`` to the edge, elementwise.

As in NumPy, axis ``i`` is padded after axes ``0 .. i - 1``, so corners and the
statistics see the earlier padding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.core.layout import Layout
from dmesh.core.placement import Placement, Replicate
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels.joins import as_darray, join
from dmesh.ops.kernels.local_pad import LOCAL_MODES, pad_blocks
from dmesh.ops.registry import decompose

KEYWORDS = {
    "constant": {"constant_values"}, "edge": set(), "linear_ramp": {"end_values"},
    "maximum": {"stat_length"}, "mean": {"stat_length"}, "median": {"stat_length"},
    "minimum": {"stat_length"}, "reflect": {"reflect_type"}, "symmetric": {"reflect_type"},
    "wrap": set(), "empty": set(),
}  # fmt: skip
STATISTICS = {"maximum": np.max, "minimum": np.min, "mean": np.mean, "median": np.median}


def _pairs(value: Any, ndim: int, name: str, integral: bool) -> np.ndarray:
    """``value`` as one ``(before, after)`` pair per axis, NumPy's ``_as_pairs`` forms."""
    given = np.asarray(value)
    if integral:
        if given.dtype.kind not in "iu" and given.size:
            raise ArgumentTypeError(f"`{name}` must be of integral type.")
        if np.any(given < 0):
            raise ArgumentError("index can't contain negative values")
    try:
        return np.broadcast_to(given, (ndim, 2))
    except ValueError as exc:
        raise ArgumentError(f"{name}: cannot broadcast {given.shape} to ({ndim}, 2)") from exc


def _slab(x: DArray, axis: int, width: int, value: Any) -> DArray:
    """``width`` cells along ``axis`` filled with ``value``, the other dims in ``x``'s blocks."""
    layout = x.spec.layout
    placements: tuple[Placement, ...] = tuple(
        Replicate() if p.is_partial() or p.is_shard(axis) else p for p in layout.placements
    )
    shape = list(x.shape)
    shape[axis] = width
    bounds = list(layout.bounds)
    bounds[axis] = None
    out = Layout(layout.mesh_shape, placements, tuple(shape), tuple(bounds))
    spec = DArraySpec(x.mesh, out, x.dtype)
    xp = array_module(x.local)
    if x.mesh.coordinate is None:
        return DArray(xp.empty(spec.local_shape(), x.dtype), spec)
    return DArray(xp.full(spec.local_shape(), value, dtype=x.dtype), spec)


def _at(axis: int, index: Any) -> tuple[Any, ...]:
    return (slice(None),) * axis + (index,)


@decompose(np.pad)
def pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> DArray:
    """``np.pad`` of a DArray in every string mode (a sharded result where ``array`` is sharded)."""
    if not isinstance(array, DArray):
        raise ArgumentTypeError(f"np.pad: expected a DArray, got {type(array).__name__}")
    if callable(mode) or mode not in KEYWORDS:
        raise UnsupportedError(f"np.pad on DArrays: mode {mode!r} is not supported; use one of "
                               f"{sorted(KEYWORDS)}")  # fmt: skip
    extra = set(kwargs) - KEYWORDS[mode]
    if extra:
        raise ArgumentError(f"unsupported keyword arguments for mode '{mode}': {extra}")
    widths = _pairs(pad_width, array.ndim, "pad_width", integral=True)
    if array.ndim == 0:
        return array.copy()
    if mode in LOCAL_MODES:  # each rank pads its own block, where the edges are its own
        values = (
            _pairs(kwargs.get("constant_values", 0), array.ndim, "constant_values", False)
            if mode == "constant"
            else None
        )
        padded = pad_blocks(array, widths, mode, values)
        if padded is not None:
            return padded
    result = array
    for axis in range(array.ndim):
        before, after = (int(w) for w in widths[axis])
        if before or after:
            result = _pad_axis(result, axis, before, after, mode, kwargs)
    return result if result is not array else array.copy()


def _pad_axis(
    x: DArray, axis: int, before: int, after: int, mode: str, kw: dict[str, Any]
) -> DArray:
    n = x.shape[axis]
    if mode in ("constant", "empty"):
        values = _pairs(kw.get("constant_values", 0), x.ndim, "constant_values", False)[axis]
        sides = [_slab(x, axis, before, values[0]), _slab(x, axis, after, values[1])]
        return join([sides[0], x, sides[1]], axis)
    if n == 0:
        raise ArgumentError(f"can't extend empty axis {axis} using modes other than 'constant' "
                            "or 'empty'")  # fmt: skip
    left: Any
    right: Any
    if mode == "edge":
        left = np.repeat(x[_at(axis, slice(0, 1))], before, axis=axis)
        right = np.repeat(x[_at(axis, slice(n - 1, n))], after, axis=axis)
    elif mode in ("reflect", "symmetric", "wrap"):
        if kw.get("reflect_type", "even") != "even":
            raise UnsupportedError(f"np.pad on DArrays: reflect_type={kw['reflect_type']!r} is "
                                   "not supported; use 'even'")  # fmt: skip
        index = np.pad(np.arange(n), (before, after), mode=mode)  # type: ignore[call-overload]
        left = x[_at(axis, index[:before])]
        right = x[_at(axis, index[before + n :])]
    elif mode == "linear_ramp":
        ends = _pairs(kw.get("end_values", 0), x.ndim, "end_values", False)[axis]
        left = _ramp(x, axis, before, ends[0], x[_at(axis, slice(0, 1))])
        right = _ramp(x, axis, after, ends[1], x[_at(axis, slice(n - 1, n))])[
            _at(axis, slice(None, None, -1))
        ]
    else:
        left, right = _statistic_sides(x, axis, before, after, mode, kw.get("stat_length"))
    return join([left, x, right], axis)


def _statistic_sides(
    x: DArray, axis: int, before: int, after: int, mode: str, length: Any
) -> tuple[DArray, DArray]:
    n = x.shape[axis]
    lengths = (
        (n, n)
        if length is None
        else tuple(int(v) for v in _pairs(length, x.ndim, "stat_length", True)[axis])
    )
    if 0 in lengths:
        raise ArgumentError("stat_length of 0 yields no value for padding")
    func: Any = STATISTICS[mode]
    sides: list[Any] = []
    for width, count, first in ((before, lengths[0], True), (after, lengths[1], False)):
        count = min(count, n)
        region = x[_at(axis, slice(0, count) if first else slice(n - count, n))]
        if mode == "mean":  # NumPy's mean: the sum (in float64 for integers) over the count
            wide = np.float64 if x.dtype.kind in "iub" else None
            stat = np.sum(region, axis=axis, keepdims=True, dtype=wide) / count
        else:
            stat = func(region, axis=axis, keepdims=True)
        if x.dtype.kind in "iub" and stat.dtype != x.dtype:
            stat = np.round(stat)
        sides.append(np.repeat(stat.astype(x.dtype), width, axis=axis))
    return sides[0], sides[1]


def _ramp(x: DArray, axis: int, width: int, end: Any, edge: DArray) -> DArray:
    """``np.linspace(end, edge, width, endpoint=False, dtype=x.dtype, axis=axis)``, as NumPy
    computes it (``np.pad``'s ramp)."""
    start = np.asarray(end) * 1.0
    stop = edge * 1.0
    dt = np.result_type(start, stop.dtype, float(width))
    shape = [1] * x.ndim
    shape[axis] = width
    steps = as_darray(np.arange(width, dtype=dt).reshape(shape), x.mesh)
    delta = stop - start
    step = delta / width if width else delta
    # linspace's own branch, decided over the whole array (collective)
    y: Any = steps / width * delta if bool(np.any(step == 0)) else steps * step
    y = y + start
    if x.dtype.kind in "iu":
        y = np.floor(y)
    ramp: DArray = y.astype(x.dtype)
    return ramp
