"""Statistical functions of the Array API standard (2024.12) on DArrays.

Each maps onto the NumPy reduction of the same meaning, which dispatches to its
distributed rule. ``dtype=None`` follows the standard, which here agrees with
NumPy: sums and products of signed integers (and booleans) give the default
integer dtype (int64), of unsigned integers uint64, of floats their own dtype.
Differences from ``array_api_strict``: ``mean``/``std``/``var`` of integers and
``sum``/``prod`` of booleans are allowed (NumPy's results) instead of raising.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from dmesh.array_api._checks import require
from dmesh.collectives.errors import ArgumentTypeError
from dmesh.darray import DArray

__all__: list[str] = [
    "cumulative_prod",
    "cumulative_sum",
    "max",
    "mean",
    "min",
    "prod",
    "std",
    "sum",
    "var",
]

_np: Any = np  # NumPy untyped: its functions return DArrays here, by dispatch

Axes = int | tuple[int, ...] | None


def _correction(name: str, correction: Any) -> float:
    """The degrees-of-freedom correction, checked on every rank."""
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise ArgumentTypeError(
            f"{name}: correction must be a real number, got {type(correction).__name__}"
        )
    return float(correction)


def cumulative_sum(
    x: DArray,
    /,
    *,
    axis: int | None = None,
    dtype: Any = None,
    include_initial: bool = False,
) -> DArray:
    """``np.cumulative_sum``: running sums along ``axis`` (required unless ``x`` is 1-D)."""
    require("cumulative_sum", x)
    return cast(
        DArray, _np.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)
    )


def cumulative_prod(
    x: DArray,
    /,
    *,
    axis: int | None = None,
    dtype: Any = None,
    include_initial: bool = False,
) -> DArray:
    """``np.cumulative_prod``: running products along ``axis`` (required unless ``x`` is 1-D)."""
    require("cumulative_prod", x)
    return cast(
        DArray, _np.cumulative_prod(x, axis=axis, dtype=dtype, include_initial=include_initial)
    )


def max(x: DArray, /, *, axis: Axes = None, keepdims: bool = False) -> DArray:
    """``np.max``: the largest element over ``axis`` (NaN propagates)."""
    require("max", x)
    return cast(DArray, _np.max(x, axis=axis, keepdims=keepdims))


def min(x: DArray, /, *, axis: Axes = None, keepdims: bool = False) -> DArray:
    """``np.min``: the smallest element over ``axis`` (NaN propagates)."""
    require("min", x)
    return cast(DArray, _np.min(x, axis=axis, keepdims=keepdims))


def mean(x: DArray, /, *, axis: Axes = None, keepdims: bool = False) -> DArray:
    """``np.mean``: the arithmetic mean over ``axis``."""
    require("mean", x)
    return cast(DArray, _np.mean(x, axis=axis, keepdims=keepdims))


def prod(x: DArray, /, *, axis: Axes = None, dtype: Any = None, keepdims: bool = False) -> DArray:
    """``np.prod``: the product over ``axis``, in ``dtype`` (the standard's default by dtype)."""
    require("prod", x)
    return cast(DArray, _np.prod(x, axis=axis, dtype=dtype, keepdims=keepdims))


def sum(x: DArray, /, *, axis: Axes = None, dtype: Any = None, keepdims: bool = False) -> DArray:
    """``np.sum``: the sum over ``axis``, in ``dtype`` (the standard's default by dtype)."""
    require("sum", x)
    return cast(DArray, _np.sum(x, axis=axis, dtype=dtype, keepdims=keepdims))


def std(
    x: DArray, /, *, axis: Axes = None, correction: float = 0.0, keepdims: bool = False
) -> DArray:
    """``np.std`` with ``ddof=correction``: the standard deviation over ``axis``."""
    require("std", x)
    ddof = _correction("std", correction)
    return cast(DArray, _np.std(x, axis=axis, ddof=ddof, keepdims=keepdims))


def var(
    x: DArray, /, *, axis: Axes = None, correction: float = 0.0, keepdims: bool = False
) -> DArray:
    """``np.var`` with ``ddof=correction``: the variance over ``axis``."""
    require("var", x)
    ddof = _correction("var", correction)
    return cast(DArray, _np.var(x, axis=axis, ddof=ddof, keepdims=keepdims))
