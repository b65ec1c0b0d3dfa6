"""``np.average``, ``np.ptp``, ``np.cov`` and ``np.corrcoef`` on DArrays, as NumPy writes them.

Each is NumPy's own sequence of steps on DArrays, so it runs as dispatched
reductions, products and elementwise ops and never gathers the data.
``cov`` contracts the centred observations with their conjugate
(``np.dot``: a partial sum over the sharded observations); the covariance
matrix is as small as the number of variables squared, so it is replicated
and finished (the ``1 / fact`` scaling, ``corrcoef``'s normalisation and
clipping) with NumPy on every rank, in NumPy's order. Sums over sharded axes
are grouped by block, so floats can differ from NumPy's in the last bits,
as for ``np.sum``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    AxisArgumentError,
    UnsupportedError,
)
from dmesh.darray import DArray
from dmesh.ops.kernels.histogram import replicated
from dmesh.ops.registry import decompose


def _as_darray(x: Any, like: DArray) -> Any:
    """A NumPy argument (weights) as a replicated DArray on ``like``'s mesh."""
    return x if isinstance(x, DArray) else replicated(np.asarray(x), like.mesh)


def _normalized_axis(axis: Any, ndim: int) -> Any:
    if axis is None:
        return None
    try:
        return np.lib.array_utils.normalize_axis_tuple(axis, ndim, argname="axis")
    except np.exceptions.AxisError as exc:
        raise AxisArgumentError(str(exc)) from exc


@decompose(np.average)
def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *,
            keepdims: Any = np._NoValue) -> Any:  # fmt: skip
    """``np.average`` of a DArray: the mean, or ``sum(a * w) / sum(w)`` over ``axis``."""
    if not isinstance(a, DArray):
        raise UnsupportedError("np.average: a must be the DArray when its weights are one")
    axis = _normalized_axis(axis, a.ndim)
    kept = {} if keepdims is np._NoValue else {"keepdims": keepdims}
    if weights is None:
        avg = np.mean(a, axis, **kept)
        scale: Any = avg.dtype.type(a.size / max(avg.size, 1))
    else:
        wgt = _as_darray(weights, a)
        if a.shape != wgt.shape:
            if axis is None:
                raise ArgumentTypeError(
                    "Axis must be specified when shapes of a and weights differ."
                )
            if wgt.shape != tuple(a.shape[ax] for ax in axis):
                raise ArgumentError(
                    "Shape of weights must be consistent with shape of a along specified axis."
                )
            wgt = np.transpose(wgt, tuple(np.argsort(axis)))
            wgt = np.reshape(wgt, tuple(s if ax in axis else 1 for ax, s in enumerate(a.shape)))
        if a.dtype.kind in "biu":
            dtype = np.result_type(a.dtype, wgt.dtype, "f8")
        else:
            dtype = np.result_type(a.dtype, wgt.dtype)
        scale = np.sum(wgt, axis=axis, dtype=dtype, **kept)
        if bool(np.any(scale == 0.0)):
            raise ArgumentError("Weights sum to zero, can't be normalized")
        avg = np.sum(np.multiply(a, wgt, dtype=dtype), axis, **kept) / scale
    if not returned:
        return avg
    if isinstance(scale, DArray) and scale.shape != avg.shape:
        scale = np.copy(np.broadcast_to(scale, avg.shape))
    elif not isinstance(scale, DArray) and np.shape(scale) != avg.shape:
        scale = np.full_like(avg, scale)
    return avg, scale


@decompose(np.ptp)
def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: Any = np._NoValue) -> Any:
    """``np.ptp``: ``max - min`` over ``axis`` (the difference in ``a``'s dtype, as NumPy)."""
    if out is not None:
        raise UnsupportedError("np.ptp(..., out=) on DArrays is not supported")
    kept = {} if keepdims is np._NoValue else {"keepdims": keepdims}
    return np.max(a, axis=axis, **kept) - np.min(a, axis=axis, **kept)


def _covariance(m: Any, y: Any, rowvar: bool, bias: bool, ddof: Any, dtype: Any,
                name: str) -> np.ndarray:  # fmt: skip
    """NumPy's ``cov`` (no frequency or analytic weights) as a replicated NumPy array."""
    if ddof is not None and ddof != int(ddof):
        raise ArgumentError("ddof must be integer")
    for arg, label in ((m, "m"), (y, "y")):
        if arg is not None and not isinstance(arg, DArray):
            raise UnsupportedError(f"np.{name}: {label} must be a DArray, as the other is")
        if arg is not None and arg.ndim > 2:
            raise ArgumentError(f"{label} has more than 2 dimensions")
    if dtype is None:
        dtype = (
            np.result_type(m.dtype, np.float64)
            if y is None
            else np.result_type(m.dtype, y.dtype, np.float64)
        )
    x = m.astype(dtype)
    x = x[None] if x.ndim < 2 else x
    if not rowvar and m.ndim != 1:
        x = x.T
    if x.shape[0] == 0:
        return np.array([]).reshape(0, 0)
    if y is not None:
        other = y.astype(dtype)
        other = other[None] if other.ndim < 2 else other
        if not rowvar and other.shape[0] != 1:
            other = other.T
        x = np.concatenate((x, other), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    fact: float = x.shape[1] - ddof
    if fact <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        fact = 0.0
    centred = x - np.mean(x, axis=1)[:, None]
    product = np.dot(centred, np.conj(centred.T))
    c = np.asarray(product.full_array())  # variables x variables: small
    with np.errstate(divide="ignore", invalid="ignore"):
        c *= np.true_divide(1, fact)
    return c


@decompose(np.cov)
def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: Any = None,
        fweights: Any = None, aweights: Any = None, *, dtype: Any = None) -> DArray:  # fmt: skip
    """``np.cov`` of DArrays (observations may be sharded); the matrix replicated."""
    if fweights is not None or aweights is not None:
        raise UnsupportedError("np.cov on DArrays takes no fweights= or aweights=")
    c = _covariance(m, y, rowvar, bias, ddof, dtype, "cov")
    return replicated(c.squeeze(), m.mesh)


@decompose(np.corrcoef)
def corrcoef(x: Any, y: Any = None, rowvar: bool = True, *, dtype: Any = None) -> DArray:
    """``np.corrcoef`` of DArrays: the covariance normalised and clipped as NumPy, replicated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        c = _covariance(x, y, rowvar, False, None, dtype, "corrcoef").squeeze()
    with np.errstate(divide="ignore", invalid="ignore"):
        try:
            d = np.diag(c)
        except ValueError:  # a scalar covariance
            return replicated(c / c, x.mesh)
        stddev = np.sqrt(d.real)
        c /= stddev[:, None]
        c /= stddev[None, :]
    np.clip(c.real, -1, 1, out=c.real)
    if np.iscomplexobj(c):
        np.clip(c.imag, -1, 1, out=c.imag)
    return replicated(c, x.mesh)
