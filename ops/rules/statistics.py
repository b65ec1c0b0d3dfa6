"""Decompositions into ops that have rules: ``var``, ``std``, ``linalg.norm``.

Each is written with NumPy calls on DArrays, so it runs as a few dispatched
ops and never gathers the array: ``var`` is a mean, a subtraction, a squared
magnitude and a mean (two passes, as NumPy computes it); ``std`` its square
root; the vector 2-norm and the Frobenius norm the square root of a sum of
squared magnitudes.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from dmesh.collectives.errors import UnsupportedError
from dmesh.ops.registry import decompose


def _axes(a: Any, axis: Any) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(a.ndim))
    items = axis if isinstance(axis, tuple) else (axis,)
    return tuple(operator.index(i) % max(a.ndim, 1) for i in items)


@decompose(np.var)
def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
        keepdims: bool = False, **kwargs: Any) -> Any:  # fmt: skip
    """``np.var``: ``sum(|a - mean(a)|**2) / (n - ddof)`` over ``axis``."""
    if out is not None or kwargs:
        raise UnsupportedError("np.var on DArrays supports axis, dtype, ddof and keepdims")
    mean = np.mean(a, axis=axis, dtype=dtype, keepdims=True)
    deviation = a - mean
    squared = (
        (deviation * np.conjugate(deviation)).real
        if a.dtype.kind == "c"
        else (deviation * deviation)
    )
    count = math.prod(a.shape[d] for d in _axes(a, axis))
    return np.sum(squared, axis=axis, dtype=dtype, keepdims=keepdims) / max(count - ddof, 0)


@decompose(np.std)
def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
        keepdims: bool = False, **kwargs: Any) -> Any:  # fmt: skip
    """``np.std``: the square root of :func:`var`."""
    return np.sqrt(var(a, axis, dtype, out, ddof, keepdims, **kwargs))


@decompose(np.linalg.norm)
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``np.linalg.norm`` for ``ord=None``: the 2-norm of a vector, Frobenius of a matrix."""
    if ord is not None and not (ord == 2 and x.ndim == 1) and ord != "fro":
        raise UnsupportedError(
            f"np.linalg.norm(ord={ord!r}) on DArrays is not supported yet; supported: "
            "ord=None (2-norm of vectors, Frobenius of matrices)"
        )
    magnitude = (x * np.conjugate(x)).real if x.dtype.kind == "c" else x * x
    return np.sqrt(np.sum(magnitude, axis=axis, keepdims=keepdims))


def _nan_extreme(a: Any, axis: Any, keepdims: bool, find_max: bool) -> Any:
    """``nanmax``/``nanmin``: the extreme of the non-NaN values; NaN where all are NaN."""
    if a.dtype.kind not in "fc":
        return (np.max if find_max else np.min)(a, axis=axis, keepdims=keepdims)
    nan = np.isnan(a)
    filled = np.where(nan, -np.inf if find_max else np.inf, a)
    extreme = (np.max if find_max else np.min)(filled, axis=axis, keepdims=keepdims)
    return np.where(np.all(nan, axis=axis, keepdims=keepdims), np.nan, extreme)


@decompose(np.nanmax)
def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kwargs: Any) -> Any:
    """``np.nanmax``: NaNs ignored; an all-NaN slice gives NaN, as in NumPy."""
    if out is not None or kwargs:
        raise UnsupportedError("np.nanmax on DArrays supports axis and keepdims")
    return _nan_extreme(a, axis, keepdims, True)


@decompose(np.nanmin)
def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kwargs: Any) -> Any:
    """``np.nanmin``: NaNs ignored; an all-NaN slice gives NaN, as in NumPy."""
    if out is not None or kwargs:
        raise UnsupportedError("np.nanmin on DArrays supports axis and keepdims")
    return _nan_extreme(a, axis, keepdims, False)


@decompose(np.nanmean)
def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False, **kwargs: Any) -> Any:  # fmt: skip
    """``np.nanmean``: the sum of the non-NaN values over their count (NaN for none)."""
    if out is not None or kwargs:
        raise UnsupportedError("np.nanmean on DArrays supports axis, dtype and keepdims")
    if a.dtype.kind not in "fc":
        return np.mean(a, axis=axis, dtype=dtype, keepdims=keepdims)
    count = np.sum(~np.isnan(a), axis=axis, keepdims=keepdims)
    return np.nansum(a, axis=axis, dtype=dtype, keepdims=keepdims) / count


@decompose(np.nanvar)
def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
           keepdims: bool = False, **kwargs: Any) -> Any:  # fmt: skip
    """``np.nanvar``: the variance of the non-NaN values (two passes)."""
    if out is not None or kwargs:
        raise UnsupportedError("np.nanvar on DArrays supports axis, dtype, ddof and keepdims")
    if a.dtype.kind not in "fc":
        return var(a, axis, dtype, None, ddof, keepdims)
    nan = np.isnan(a)
    mean = nanmean(a, axis=axis, dtype=dtype, keepdims=True)
    deviation = np.where(nan, 0.0, a - mean)
    squared = (
        (deviation * np.conjugate(deviation)).real
        if a.dtype.kind == "c"
        else (deviation * deviation)
    )
    count = np.sum(~nan, axis=axis, keepdims=keepdims)
    return np.sum(squared, axis=axis, dtype=dtype, keepdims=keepdims) / np.maximum(count - ddof, 0)


@decompose(np.nanstd)
def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
           keepdims: bool = False, **kwargs: Any) -> Any:  # fmt: skip
    """``np.nanstd``: the square root of :func:`nanvar`."""
    return np.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, **kwargs))
