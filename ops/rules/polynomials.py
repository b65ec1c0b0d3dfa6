"""``np.interp``, ``np.polyval``, ``np.roots`` and ``np.polyfit`` on DArrays.

``interp`` and ``polyval`` are elementwise in their queries ``x``: each rank
evaluates its own block with NumPy (the same values bit for bit, no
communication) against sample points ``xp``/``fp`` or coefficients ``p``
that every rank holds. Sample points must be NumPy arrays or replicated
DArrays (a sharded ``xp`` raises ``UnsupportedError``). Coefficients are a
polynomial's few numbers: a sharded ``p`` is replicated first (one
all-gather of ``deg + 1`` values). ``roots`` solves the companion matrix on
every rank (a replicated result). ``polyfit`` is NumPy's algorithm on
DArrays: the Vandermonde matrix is built block by block from ``x``'s rows and
solved by ``np.linalg.lstsq`` (TSQR where the rows are sharded).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.convert import distribute
from dmesh.core.layout import Layout
from dmesh.core.placement import Replicate
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose
from dmesh.ops.rules.differences import small_value

__all__ = ["blockwise", "interp", "polyfit", "polyval", "roots"]


def blockwise(x: DArray, fn: Callable[[Any], Any]) -> DArray:
    """``fn`` applied to each block of ``x`` (elementwise: the layout is kept; no message).

    ``fn`` is first called on a one-element probe on every rank, so that a bad
    argument raises the same error everywhere and empty blocks get the dtype.
    """
    x = x.reduce_partials()
    with np.errstate(all="ignore"):
        dtype = np.dtype(np.asarray(fn(np.ones(1, x.dtype))).dtype)
    block = np.asarray(fn(x.local), dtype=dtype) if x.local.size else np.empty(x.local.shape, dtype)
    return DArray(block.reshape(x.local.shape), DArraySpec(x.mesh, x.spec.layout, dtype))


def _coefficients(p: Any) -> Any:
    """``p`` held by every rank: a sharded DArray is replicated (a polynomial has few)."""
    if isinstance(p, DArray):
        p = p.redistribute(p.mesh, [Replicate()] * p.mesh.ndim).local
    return p


def _replicated(value: Any, mesh: Any) -> DArray:
    return distribute(np.asarray(value), mesh, [Replicate()] * mesh.ndim)


@decompose(np.interp)
def interp(
    x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None
) -> Any:
    """``np.interp`` with sharded queries ``x``: each rank interpolates its block (no message).

    ``xp``/``fp`` (and ``left``/``right``) are NumPy values or replicated DArrays.
    """
    xp = small_value(xp, "interp", "xp (the sample points)")
    fp = small_value(fp, "interp", "fp (the sample values)")
    left = small_value(left, "interp", "left")
    right = small_value(right, "interp", "right")
    if not isinstance(x, DArray):
        raise UnsupportedError(
            "np.interp on DArrays takes the queries x as the DArray (xp and fp replicated)"
        )
    return blockwise(x, lambda b: np.interp(b, xp, fp, left, right, period))


@decompose(np.polyval)
def polyval(p: Any, x: Any) -> DArray:
    """``np.polyval``: Horner's rule on each block of ``x`` (``p`` replicated; no message)."""
    if not isinstance(x, DArray):
        if isinstance(x, np.poly1d):
            raise UnsupportedError("np.polyval of a poly1d x with DArray coefficients")
        return _replicated(np.polyval(_coefficients(p), x), p.mesh)
    p = _coefficients(p)
    return blockwise(x, lambda b: np.polyval(p, b))


@decompose(np.roots)
def roots(p: Any) -> DArray:
    """``np.roots`` of DArray coefficients: every rank solves the companion matrix (replicated)."""
    mesh = p.mesh
    return _replicated(np.roots(_coefficients(p)), mesh)


def _vander(x: DArray, order: int) -> DArray:
    """``np.vander(x, order)`` with ``x``'s rows (block by block, no message)."""
    layout = x.spec.layout
    shape = (x.shape[0], order)
    placements = layout.placements
    vlayout = Layout.with_bounds(layout.mesh_shape, placements, shape, [layout.bounds[0], None])
    block = np.vander(x.local, order)
    return DArray(block, DArraySpec(x.mesh, vlayout, np.dtype(block.dtype)))


@decompose(np.polyfit)
def polyfit(
    x: Any, y: Any, deg: Any, rcond: Any = None, full: bool = False, w: Any = None, cov: Any = False
) -> Any:
    """``np.polyfit`` on DArrays: NumPy's scaled least squares through ``np.linalg.lstsq``.

    ``x`` and ``y`` are DArrays (or one a NumPy array, replicated); the
    coefficients are replicated DArrays. ``cov=True`` is not supported.
    """
    mesh = next(v.mesh for v in (x, y, w) if isinstance(v, DArray))
    x, y = (v if isinstance(v, DArray) else _replicated(v, mesh) for v in (x, y))
    order = int(deg) + 1
    if deg < 0:
        raise ArgumentError("expected deg >= 0")
    if x.ndim != 1:
        raise ArgumentTypeError("expected 1D vector for x")
    if x.size == 0:
        raise ArgumentTypeError("expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise ArgumentTypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise ArgumentTypeError("expected x and y to have same length")
    if cov:
        raise UnsupportedError("np.polyfit(..., cov=) on DArrays is not supported yet")
    x = (x + 0.0).reduce_partials()
    y = y + 0.0
    if rcond is None:
        rcond = len(x) * np.finfo(x.dtype).eps
    lhs: Any = _vander(x, order)
    rhs = y
    if w is not None:
        w = w if isinstance(w, DArray) else _replicated(w, mesh)
        w = w + 0.0
        if w.ndim != 1:
            raise ArgumentTypeError("expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise ArgumentTypeError("expected w and y to have the same length")
        lhs = lhs * w[:, np.newaxis]
        rhs = rhs * (w if rhs.ndim == 1 else w[:, np.newaxis])
    if np.dtype(lhs.dtype).kind == "c":
        scale = np.sqrt((np.square(lhs.real) + np.square(lhs.imag)).sum(axis=0))
    else:
        scale = np.sqrt(np.square(lhs).sum(axis=0))
    lhs = lhs / scale
    c, resids, rank, s = np.linalg.lstsq(lhs, rhs, rcond)
    c = (c.T / scale).T
    if rank != order and not full:
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning, stacklevel=2)
    if full:
        return c, resids, rank, s, rcond
    return c
