"""Decompositions into ops that have rules: ``var``, ``std``, ``linalg.norm`` and the nan forms.

Each is written with NumPy calls on DArrays, so it runs as a few dispatched
ops and never gathers the array: ``var`` is a mean, a subtraction, a squared
magnitude and a mean (two passes, as NumPy computes it); ``std`` its square
root. The squared magnitude of complex data is ``re**2 + im**2``, real, as in
NumPy, so ``var``/``std``/``norm`` of ``complex64`` are ``float32``; the
real and imaginary parts are taken block by block (no data moves). ``norm``
follows NumPy's ``ord``/``axis`` cases: vector norms and the Frobenius,
1, -1, inf and -inf matrix norms are reductions; the 2, -2 and nuclear
matrix norms take the singular values (``np.linalg.svd``). The nan forms
divide as NumPy does, in the dtype of the sum (``float32`` data stays
``float32``), and give NaN where no values (or no degrees of freedom) are left.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.core.placement import Partial
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose
from dmesh.ops.rules.statistics_fast import (
    MISSING,
    norm_replay,
    plan_norm,
    plan_var,
    planned,
    remember,
    var_replay,
)


def _axes(a: Any, axis: Any) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(a.ndim))
    items = axis if isinstance(axis, tuple) else (axis,)
    return tuple(operator.index(i) % max(a.ndim, 1) for i in items)


def _part(x: DArray, name: str) -> DArray:
    """``x.real`` or ``x.imag``, block by block: no data moves.

    Both are linear, so ``Partial("sum")``/``("avg")`` terms stay terms;
    other partial values are reduced first.
    """
    if any(isinstance(p, Partial) and p.op not in ("sum", "avg") for p in x.placements):
        x = x.reduce_partials()
    block = getattr(x.local, name)
    return DArray(block, DArraySpec(x.mesh, x.spec.layout, block.dtype))


def _squared_magnitude(x: Any) -> Any:
    """``|x|**2`` as NumPy's ``var`` computes it: ``re*re + im*im`` (real) for complex data."""
    if x.dtype.kind != "c":
        return x * x
    re, im = _part(x, "real"), _part(x, "imag")
    return re * re + im * im


def _dot_square(x: Any) -> Any:
    """``|x|**2`` of a vector as NumPy's ``norm`` makes it: ``x.dot(x)``, or ``re.dot(re) +
    im.dot(im)`` for complex data (partial sums where ``x`` is sharded)."""
    if x.dtype.kind != "c":
        return np.dot(x, x)
    re, im = _part(x, "real"), _part(x, "imag")
    return np.dot(re, re) + np.dot(im, im)


def _in_dtype(x: Any, dtype: np.dtype) -> Any:
    """``x`` as ``dtype``: NumPy's ``true_divide(..., out=, casting="unsafe")`` of a count."""
    return x if x.dtype == dtype else x.astype(dtype)


@decompose(np.var)
def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
        keepdims: bool = False, **kwargs: Any) -> Any:  # fmt: skip
    """``np.var``: ``sum(|a - mean(a)|**2) / max(n - ddof, 0)`` over ``axis``.

    The sum is a partial value until needed, except that a division by zero
    (``ddof >= n``: inf or NaN, as NumPy) reduces it first. A call seen before
    replays the first one's steps on the blocks (``statistics_fast``).
    """
    if out is not None or kwargs:
        raise UnsupportedError("np.var on DArrays supports axis, dtype, ddof and keepdims")
    return _moment(a, axis, dtype, ddof, keepdims, False)


def _moment(a: Any, axis: Any, dtype: Any, ddof: Any, keepdims: Any, root: bool) -> Any:
    """``var`` (``std`` with ``root``): by the plan of an earlier call, or the general path."""
    key = (axis, type(axis), dtype, ddof, type(ddof), keepdims, root)
    plan = planned(a, key, False)
    if plan is None:
        result = _variance(a, axis, dtype, ddof, keepdims)
        return np.sqrt(result) if root else result
    if plan is MISSING:
        result = _variance(a, axis, dtype, ddof, keepdims)
        if root:
            result = np.sqrt(result)
        remember(a, key, plan_var(a, axis, dtype, ddof, keepdims, result), False)
        return result
    return var_replay(plan, a._local, root)


def _variance(a: Any, axis: Any, dtype: Any, ddof: Any, keepdims: Any) -> Any:
    """``var`` by dispatched ops (their steps are what a plan replays)."""
    mean = np.mean(a, axis=axis, dtype=dtype, keepdims=True)
    deviation = a - mean
    if (
        deviation.dtype.kind != "c"
        and type(deviation) is DArray
        and not any(p.is_partial() for p in deviation.placements)
    ):
        # Squared in place, as NumPy's var does: the deviations are this call's own.
        # (Not under dmesh.compile, whose stand-ins record plain calls, nor for partial
        # terms, whose squares are no terms of the square.)
        own: Any = deviation  # (dispatched: NumPy's stubs know no DArray out=)
        squared = np.multiply(own, own, out=own)
    else:
        squared = _squared_magnitude(deviation)
    count = max(math.prod(a.shape[d] for d in _axes(a, axis)) - ddof, 0)
    summed = np.sum(squared, axis=axis, dtype=dtype, keepdims=keepdims)
    if count == 0:  # x / 0 is not linear: a zero Partial term would make a NaN of the sum
        summed = summed.reduce_partials()
    return summed / count


@decompose(np.std)
def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
        keepdims: bool = False, **kwargs: Any) -> Any:  # fmt: skip
    """``np.std``: the square root of :func:`var`."""
    if out is not None or kwargs:
        raise UnsupportedError("np.std on DArrays supports axis, dtype, ddof and keepdims")
    return _moment(a, axis, dtype, ddof, keepdims, True)


@decompose(np.linalg.norm)
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``np.linalg.norm``: NumPy's vector and matrix norms, by ``ord`` and ``axis``.

    Integer and bool data are converted to ``float64`` first, as in NumPy. A
    2-norm or Frobenius norm seen before replays the first call's steps on the
    blocks (``statistics_fast``).
    """
    key = (ord, type(ord), axis, type(axis), keepdims)
    plan = planned(x, key, True)
    if plan is None:
        return _norm(x, ord, axis, keepdims)
    if plan is MISSING:
        result = _norm(x, ord, axis, keepdims)
        remember(x, key, plan_norm(x, ord, axis, keepdims, result), True)
        return result
    return norm_replay(plan, x._local)


def _norm(x: Any, ord: Any, axis: Any, keepdims: Any) -> Any:
    """``norm`` by dispatched ops (their steps are what a plan replays)."""
    if x.dtype.kind not in "fc":
        x = x.astype(np.float64)
    if axis is None:
        if ord is None or (ord in ("f", "fro") and x.ndim == 2) or (ord == 2 and x.ndim == 1):
            if x.ndim == 1:  # as NumPy: the dot product with itself (NumPy's bits on one rank)
                root = np.sqrt(_dot_square(x))
                return np.reshape(root, (1,)) if keepdims else root
            return np.sqrt(np.sum(_squared_magnitude(x), keepdims=keepdims))
        axes: tuple[int, ...] = tuple(range(x.ndim))
    elif isinstance(axis, tuple):
        axes = axis
    else:
        try:
            axes = (int(axis),)  # as NumPy: int(), so 1.0 is axis 1
        except (TypeError, ValueError) as exc:
            raise ArgumentTypeError(
                f"np.linalg.norm: 'axis' must be None, an integer or a tuple of integers, "
                f"got {axis!r}"
            ) from exc
    if len(axes) == 1:
        return _vector_norm(x, ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ArgumentError(
        f"np.linalg.norm: improper number of dimensions to norm: axis {axes} of a "
        f"{x.ndim}-D array; give one axis (a vector norm) or two (a matrix norm)"
    )


def _vector_norm(x: Any, ord: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    if isinstance(ord, str):
        raise ArgumentError(
            f"np.linalg.norm: invalid norm order {ord!r} for vectors; give None, a number, "
            "inf or -inf"
        )
    if ord is None or ord == 2:
        return np.sqrt(np.sum(_squared_magnitude(x), axis=axes, keepdims=keepdims))
    if ord == 0:
        real = np.finfo(x.dtype).dtype  # float32 for complex64
        return np.sum((x != 0).astype(real), axis=axes, keepdims=keepdims)
    magnitude = np.abs(x)
    if ord == np.inf:
        return np.max(magnitude, axis=axes, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return np.min(magnitude, axis=axes, keepdims=keepdims)
    if ord == 1:
        return np.sum(magnitude, axis=axes, keepdims=keepdims)
    powered = _in_dtype(magnitude**ord, magnitude.dtype)  # NumPy: absx **= ord
    total = np.sum(powered, axis=axes, keepdims=keepdims)
    return total ** np.reciprocal(ord, dtype=total.dtype)


def _matrix_norm(x: Any, ord: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    rows, cols = (normalize_axis_index(operator.index(d), x.ndim) for d in axes)
    if rows == cols:
        raise ArgumentError(f"np.linalg.norm: duplicate axes given: {axes}")
    if ord in (2, -2, "nuc"):
        return _singular_value_norm(x, ord, rows, cols, keepdims)
    if ord is None or ord in ("fro", "f"):
        return np.sqrt(np.sum(_squared_magnitude(x), axis=(rows, cols), keepdims=keepdims))
    # 1 and -1: the largest/smallest column sum; inf and -inf: the same over rows.
    summed = {1: rows, -1: rows, np.inf: cols, -np.inf: cols}
    if isinstance(ord, str) or ord not in summed:
        raise ArgumentError(
            f"np.linalg.norm: invalid norm order {ord!r} for matrices; give None, 'fro', "
            "'nuc', 1, -1, 2, -2, inf or -inf"
        )
    sums = np.sum(np.abs(x), axis=summed[ord], keepdims=True)
    if ord > 0:
        return np.max(sums, axis=(rows, cols), keepdims=keepdims, initial=0)
    return np.min(sums, axis=(rows, cols), keepdims=keepdims)


def _singular_value_norm(x: Any, ord: Any, rows: int, cols: int, keepdims: bool) -> Any:
    """The 2 (largest), -2 (smallest) or nuclear (sum) norm from ``np.linalg.svd``."""
    others = [d for d in range(x.ndim) if d not in (rows, cols)]
    if others:  # a stack of matrices (a 2-D one has the singular values of its transpose)
        x = np.transpose(x, (*others, rows, cols))
    # A stack sharded along its stack dims: each rank's own matrices; along a matrix
    # dim: replicated below the gather threshold, else np.linalg.svd says what works.
    values = np.linalg.svd(x, compute_uv=False)
    if ord == 2:
        result = np.max(values, axis=-1, initial=0)
    elif ord == -2:
        result = np.min(values, axis=-1)
    else:
        result = np.sum(values, axis=-1)
    if keepdims:
        result = result[tuple(None if d in (rows, cols) else slice(None) for d in range(x.ndim))]
    return result


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
    total = np.nansum(a, axis=axis, dtype=dtype, keepdims=keepdims)
    return _in_dtype(total / count, total.dtype)


@decompose(np.nanvar)
def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
           keepdims: bool = False, **kwargs: Any) -> Any:  # fmt: skip
    """``np.nanvar``: the variance of the non-NaN values (two passes), as NumPy computes it.

    The deviations are in ``a``'s dtype, the sums in ``dtype``; a slice with
    ``count - ddof <= 0`` gives NaN.
    """
    if out is not None or kwargs:
        raise UnsupportedError("np.nanvar on DArrays supports axis, dtype, ddof and keepdims")
    if a.dtype.kind not in "fc":
        return var(a, axis, dtype, None, ddof, keepdims)
    nan = np.isnan(a)
    filled = np.where(nan, 0, a)
    counts = np.sum(~nan, axis=axis, keepdims=True)
    total = np.sum(filled, axis=axis, dtype=dtype, keepdims=True)
    mean = _in_dtype(total / counts, total.dtype)
    deviation = np.where(nan, 0, _in_dtype(filled - mean, a.dtype))
    summed = np.sum(_squared_magnitude(deviation), axis=axis, dtype=dtype, keepdims=keepdims)
    freedom = np.sum(counts, axis=axis, keepdims=keepdims) - ddof  # the reduced dims have one
    return np.where(freedom > 0, _in_dtype(summed / freedom, summed.dtype), np.nan)


@decompose(np.nanstd)
def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
           keepdims: bool = False, **kwargs: Any) -> Any:  # fmt: skip
    """``np.nanstd``: the square root of :func:`nanvar`."""
    return np.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, **kwargs))


# Registered here so that importing the rules registers them (no shared file edited).
from dmesh.ops.kernels import histogram as histogram  # noqa: E402
from dmesh.ops.rules import averages as averages  # noqa: E402
from dmesh.ops.rules import quantiles as quantiles  # noqa: E402
