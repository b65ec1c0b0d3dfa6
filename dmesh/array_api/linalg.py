"""The ``linalg`` extension of the Array API standard (2024.12) on DArrays.

Each function calls the ``np.linalg`` function of the same name on DArrays,
which NumPy dispatches to dmesh's distributed rule; factorizations return the
named tuples the standard names (NumPy 2's ``EighResult``, ``QRResult``,
``SVDResult``, ``SlogdetResult``). Where dmesh has no distributed algorithm
for an input (a sharded stack of matrices, say) it raises
:class:`dmesh.UnsupportedError`, which is a ``NotImplementedError`` naming the
function and what is supported.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from dmesh.array_api._la_checks import require, require_kind, require_negative_axis
from dmesh.array_api.linear_algebra import matmul, matrix_transpose, tensordot, vecdot
from dmesh.darray import DArray

__all__ = [
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
    "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr",
    "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
]  # fmt: skip

_linalg: Any = np.linalg  # NumPy dispatches its calls on DArrays to dmesh (stubs: ndarray)


def _square(name: str, x: DArray) -> None:
    """A floating-point stack of square matrices, or raise (on every rank)."""
    require_kind(name, "floating-point", x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: x must be a (stack of) square matrices, got shape {x.shape}")


def _tolerance(name: str, rtol: Any) -> Any:
    """``rtol`` as np.linalg takes it: a DArray (one per matrix of the stack) gathered."""
    if isinstance(rtol, DArray):
        require_kind(name, "real floating-point", rtol)
        return np.asarray(rtol.full_array())  # batch-shaped, not matrix-shaped: small
    return rtol


def _matrices(name: str, x: DArray) -> None:
    """A floating-point stack of matrices, or raise (on every rank)."""
    require_kind(name, "floating-point", x)
    if x.ndim < 2:
        raise ValueError(f"{name}: x must be at least 2-D, got shape {x.shape}")


def cholesky(x: DArray, /, *, upper: bool = False) -> DArray:
    """``np.linalg.cholesky(x, upper=upper)``: L with x = L L^H, or U = L^H with x = U^H U."""
    _square("cholesky", x)
    result: DArray = _linalg.cholesky(x, upper=bool(upper))
    return result


def cross(x1: DArray, x2: DArray, /, *, axis: int = -1) -> DArray:
    """``np.linalg.cross(x1, x2, axis=axis)``: 3-vectors along a negative ``axis``."""
    require_kind("cross", "numeric", x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("cross: x1 and x2 must be at least 1-D")
    require_negative_axis("cross", axis, x1, x2)
    if any(-axis <= x.ndim and x.shape[axis] != 3 for x in (x1, x2)):
        raise ValueError(f"cross: the size along axis {axis} must be 3 in x1 and x2")
    result: DArray = _linalg.cross(x1, x2, axis=axis)
    return result


def det(x: DArray, /) -> DArray:
    """``np.linalg.det(x)``."""
    _square("det", x)
    result: DArray = _linalg.det(x)
    return result


def diagonal(x: DArray, /, *, offset: int = 0) -> DArray:
    """``np.linalg.diagonal(x, offset=offset)``: the diagonals of the last two axes."""
    require("diagonal", x)
    if x.ndim < 2:
        raise ValueError(f"diagonal: x must be at least 2-D, got shape {x.shape}")
    result: DArray = _linalg.diagonal(x, offset=offset)
    return result


def eigh(x: DArray, /) -> Any:
    """``np.linalg.eigh(x)``: ``EighResult(eigenvalues, eigenvectors)``, lower triangle read."""
    _square("eigh", x)
    return _linalg.eigh(x)


def eigvalsh(x: DArray, /) -> DArray:
    """``np.linalg.eigvalsh(x)``: ascending eigenvalues, lower triangle read."""
    _square("eigvalsh", x)
    result: DArray = _linalg.eigvalsh(x)
    return result


def inv(x: DArray, /) -> DArray:
    """``np.linalg.inv(x)``."""
    _square("inv", x)
    result: DArray = _linalg.inv(x)
    return result


def matrix_norm(
    x: DArray, /, *, keepdims: bool = False, ord: float | Literal["fro", "nuc"] | None = "fro"
) -> DArray:
    """``np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)`` over the last two axes."""
    _matrices("matrix_norm", x)
    if ord not in ("fro", "nuc", None, 1, -1, 2, -2, np.inf, -np.inf):
        raise ValueError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, "
                         f"got {ord!r}")  # fmt: skip
    result: DArray = _linalg.matrix_norm(x, keepdims=bool(keepdims), ord=ord)
    return result


def matrix_power(x: DArray, n: int, /) -> DArray:
    """``np.linalg.matrix_power(x, n)`` (negative ``n``: powers of the inverse)."""
    _square("matrix_power", x)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power: n must be an int, got {type(n).__name__}")
    result: DArray = _linalg.matrix_power(x, int(n))
    return result


def matrix_rank(x: DArray, /, *, rtol: float | DArray | None = None) -> DArray:
    """``np.linalg.matrix_rank(x, rtol=rtol)``: singular values above ``rtol`` times the largest.

    ``rtol=None``: ``max(M, N) * eps`` of x's dtype, as the standard says; a DArray
    ``rtol`` (one per matrix) is gathered, as dmesh's rule takes NumPy values.
    """
    _matrices("matrix_rank", x)
    result: DArray = _linalg.matrix_rank(x, rtol=_tolerance("matrix_rank", rtol))
    return result


def outer(x1: DArray, x2: DArray, /) -> DArray:
    """``np.linalg.outer(x1, x2)`` of two 1-D arrays."""
    require_kind("outer", "numeric", x1, x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"outer: x1 and x2 must be 1-D, got shapes {x1.shape} and {x2.shape}")
    result: DArray = _linalg.outer(x1, x2)
    return result


def pinv(x: DArray, /, *, rtol: float | DArray | None = None) -> DArray:
    """``np.linalg.pinv(x, rtol=rtol)``; ``rtol=None``: ``max(M, N) * eps`` (not 1e-15).

    A DArray ``rtol`` (one per matrix) is gathered, as dmesh's rule takes NumPy values.
    """
    _matrices("pinv", x)
    result: DArray = _linalg.pinv(x, rtol=_tolerance("pinv", rtol))
    return result


def qr(x: DArray, /, *, mode: Literal["reduced", "complete"] = "reduced") -> Any:
    """``np.linalg.qr(x, mode=mode)``: ``QRResult(Q, R)``."""
    _matrices("qr", x)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return _linalg.qr(x, mode=mode)


def slogdet(x: DArray, /) -> Any:
    """``np.linalg.slogdet(x)``: ``SlogdetResult(sign, logabsdet)``."""
    _square("slogdet", x)
    return _linalg.slogdet(x)


def solve(x1: DArray, x2: DArray, /) -> DArray:
    """``np.linalg.solve(x1, x2)``: x2 is a vector only when 1-D, stacks broadcast."""
    _square("solve", x1)
    require_kind("solve", "floating-point", x2)
    if x2.ndim == 0:
        raise ValueError("solve: x2 must be at least 1-D")
    if x2.shape[-1 if x2.ndim == 1 else -2] != x1.shape[-1]:
        raise ValueError(f"solve: shapes {x1.shape} and {x2.shape} do not match")
    result: DArray = _linalg.solve(x1, x2)
    return result


def svd(x: DArray, /, *, full_matrices: bool = True) -> Any:
    """``np.linalg.svd(x, full_matrices=full_matrices)``: ``SVDResult(U, S, Vh)``."""
    _matrices("svd", x)
    return _linalg.svd(x, full_matrices=bool(full_matrices))


def svdvals(x: DArray, /) -> DArray:
    """``np.linalg.svdvals(x)``: the singular values, descending."""
    _matrices("svdvals", x)
    result: DArray = _linalg.svdvals(x)
    return result


def trace(x: DArray, /, *, offset: int = 0, dtype: Any = None) -> DArray:
    """``np.linalg.trace(x, offset=offset, dtype=dtype)`` over the last two axes."""
    require_kind("trace", "numeric", x)
    if x.ndim < 2:
        raise ValueError(f"trace: x must be at least 2-D, got shape {x.shape}")
    result: DArray = _linalg.trace(x, offset=offset, dtype=dtype)
    return result


def vector_norm(
    x: DArray,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    keepdims: bool = False,
    ord: float = 2,
) -> DArray:
    """``np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)``."""
    require_kind("vector_norm", "floating-point", x)
    result: DArray = _linalg.vector_norm(x, axis=axis, keepdims=bool(keepdims), ord=ord)
    return result
