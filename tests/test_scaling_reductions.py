"""The reduction formulas of ``dmesh.scaling.reductions`` against ``CommMode`` and NumPy.

On every 1-D and 2-D mesh of the world size, 2-D arrays sharded along one
dim, along both and along one dim over both mesh dims: the reductions
(left partial, made a value by ``float()``, reduced to ``R`` or scattered to
``S(0)``), ``var``/``std``, ``norm``, the nan forms, ``argmax`` and complex
``max``, and the scans. The shapes give even blocks (8 rows at 1, 2, 4
ranks), uneven ones (5) and empty ones (3 rows at 4 ranks); dtypes float64,
int32 and complex128.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
from traffic_checks import check_traffic, recorded

import dmesh
from dmesh import Replicate, Shard
from dmesh.core.placement import Placement
from dmesh.scaling import Traffic
from dmesh.scaling.reductions import (
    arg_extreme,
    cumulative,
    nan_extreme,
    nan_mean,
    nan_variance,
    norm,
    reduction,
    variance,
)

R = Replicate()
CASES = [((8, 4), np.float64), ((5, 3), np.int32), ((3, 2), np.complex128)]


def layouts(mesh_ndim: int) -> list[tuple[Placement, ...]]:
    if mesh_ndim == 1:
        return [(Shard(0),), (Shard(1),), (R,)]
    return [(Shard(0), Shard(1)), (Shard(1), Shard(0)), (R, Shard(0)), (Shard(0), Shard(0))]


def data(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    full = np.arange(1, 1 + np.prod(shape)).reshape(shape) % 7 - 3
    if np.dtype(dtype).kind == "c":
        return (full + 1j * full[::-1]).astype(dtype)
    return full.astype(dtype)


def check(m: dmesh.DeviceMesh, label: str, expected: Any, predicted: list[Traffic],
          fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:  # fmt: skip
    """Record ``fn(*args, **kwargs)``; compare its traffic with ``predicted``, its value with
    ``expected``."""
    result, got = recorded(lambda: fn(*args, **kwargs))
    check_traffic(m, predicted, got, label)
    value = result.full_array() if isinstance(result, dmesh.DArray) else result
    np.testing.assert_allclose(np.asarray(value), expected, rtol=1e-5, atol=1e-5, err_msg=label)


def item(func: Any, x: dmesh.DArray, **kwargs: Any) -> Any:
    """``func(x, **kwargs).item()``: the reduction made a Python value."""
    return func(x, **kwargs).item()


def replicated(func: Any, x: dmesh.DArray, placements: Any, **kwargs: Any) -> Any:
    """``func(x, **kwargs).redistribute(placements)``."""
    return func(x, **kwargs).redistribute(x.mesh, placements)


def test_reductions(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    every_r = [R] * m.ndim
    for (shape, dtype), placements in itertools.product(CASES, layouts(m.ndim)):
        full = data(shape, dtype)
        x = dmesh.distribute(full, m, list(placements))
        kind = np.dtype(dtype).kind
        for name, axis, keepdims in [("sum", None, False), ("sum", 0, False), ("prod", 1, True),
                                     ("max", 0, False), ("mean", None, False),
                                     ("any", 1, False)]:  # fmt: skip
            if name == "max" and kind == "c":
                continue
            func = getattr(np, name)
            want = func(full, axis=axis, keepdims=keepdims)
            s = np.asarray(want).dtype.itemsize
            tag = f"{name}(axis={axis}) {shape} {dtype.__name__} {placements}"
            args = (m.shape, shape, s, placements, axis, keepdims)
            kw = {"axis": axis, "keepdims": keepdims}
            check(m, tag, want, reduction(*args), func, x, **kw)
            if axis is None:
                check(m, tag + " item", want, reduction(*args, then="item"), item, func, x)
            check(m, tag + " -> R", want, reduction(*args, then=every_r),
                  replicated, func, x, every_r, **kw)  # fmt: skip
            if np.ndim(want) and name == "sum":
                scattered = [Shard(0)] + [R] * (m.ndim - 1)
                check(m, tag + " -> S(0)", want, reduction(*args, then=scattered),
                      replicated, func, x, scattered, **kw)  # fmt: skip


def test_statistics(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    every_r = [R] * m.ndim
    for (shape, dtype), placements in itertools.product(CASES, layouts(m.ndim)):
        full = data(shape, dtype)
        x = dmesh.distribute(full, m, list(placements))
        mean_bytes = np.mean(full).dtype.itemsize
        integer = full.dtype.kind in "biu"
        for name, axis, keepdims in [("var", None, False), ("std", 0, False),
                                     ("var", 1, True)]:  # fmt: skip
            func = getattr(np, name)
            want = func(full, axis=axis, keepdims=keepdims)
            s = np.asarray(want).dtype.itemsize
            tag = f"{name}(axis={axis}) {shape} {dtype.__name__} {placements}"
            then = "item" if axis is None else every_r
            predicted = variance(m.shape, shape, s, placements, axis, keepdims, then, mean_bytes,
                                 integer)  # fmt: skip
            if axis is None:
                check(m, tag, want, predicted, item, func, x)
            else:
                check(m, tag, want, predicted, replicated, func, x, every_r, axis=axis,
                      keepdims=keepdims)  # fmt: skip
        for ord_, axis in [(None, None), (1, 0), (np.inf, 1), (2, 0)]:
            want = np.linalg.norm(full, ord=ord_, axis=axis)
            s = np.asarray(want).dtype.itemsize
            tag = f"norm(ord={ord_}, axis={axis}) {shape} {dtype.__name__} {placements}"
            check(m, tag, want, norm(m.shape, shape, s, placements, ord_, axis),
                  np.linalg.norm, x, ord=ord_, axis=axis)  # fmt: skip


def test_nan_forms(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    every_r = [R] * m.ndim
    for (shape, dtype), placements in itertools.product(
        [((8, 4), np.float64), ((5, 3), np.float32), ((3, 2), np.float64)], layouts(m.ndim)
    ):
        full = data(shape, dtype)
        full[1, 1] = np.nan
        x = dmesh.distribute(full, m, list(placements))
        s = np.dtype(dtype).itemsize
        cases: list[tuple[Any, Any]] = [
            (np.nanmean, nan_mean), (np.nanmax, nan_extreme), (np.nanvar, nan_variance)
        ]  # fmt: skip
        for func, formula in cases:
            tag = f"{func.__name__} {shape} {dtype.__name__} {placements}"
            args = (m.shape, shape, s, placements)
            check(m, tag, func(full), formula(*args, then="item"), item, func, x)
            check(m, tag + " axis=0", func(full, axis=0), formula(*args, 0, then=every_r),
                  replicated, func, x, every_r, axis=0)  # fmt: skip
        check(m, f"nanargmax {shape} {placements}", np.nanargmax(full),
              arg_extreme(m.shape, shape, s, placements, None, True), np.nanargmax, x)  # fmt: skip


def test_arg_extremes_and_scans(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    for (shape, dtype), placements in itertools.product(CASES, layouts(m.ndim)):
        full = data(shape, dtype)
        x = dmesh.distribute(full, m, list(placements))
        s = np.dtype(dtype).itemsize
        tag = f"{shape} {dtype.__name__} {placements}"
        for axis in (None, 0, 1):
            predicted = arg_extreme(m.shape, shape, s, placements, axis)
            check(m, f"argmax(axis={axis}) {tag}", np.argmax(full, axis=axis), predicted,
                  np.argmax, x, axis=axis)  # fmt: skip
        if dtype is np.complex128:
            check(m, f"max complex {tag}", np.max(full),
                  arg_extreme(m.shape, shape, s, placements, None), np.max, x)  # fmt: skip
        scans: list[tuple[Any, int]] = [(np.cumsum, 0), (np.cumprod, 1)]
        for func, axis in scans:
            want = func(full, axis=axis)
            check(m, f"{func.__name__}(axis={axis}) {tag}", want,
                  cumulative(m.shape, shape, want.dtype.itemsize, placements, axis),
                  func, x, axis=axis)  # fmt: skip
    vector = [Shard(0)] + [R] * (m.ndim - 1)
    v = dmesh.distribute(np.arange(5.0), m, vector)
    check(m, "cumsum vector", np.cumsum(np.arange(5.0)), cumulative(m.shape, (5,), 8, vector, 0),
          np.cumsum, v)  # fmt: skip
