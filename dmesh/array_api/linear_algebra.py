"""Linear algebra functions of the Array API standard's main namespace (2024.12).

Each maps to the NumPy function of the same name, called on DArrays: NumPy
dispatches it to dmesh's distributed rule (collective on every rank).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dmesh.array_api._la_checks import require, require_kind, require_negative_axis
from dmesh.darray import DArray

__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot"]

_np: Any = np  # NumPy dispatches its calls on DArrays to dmesh (stubs: ndarray)


def matmul(x1: DArray, x2: DArray, /) -> DArray:
    """``np.matmul(x1, x2)`` (numeric dtypes only)."""
    require_kind("matmul", "numeric", x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("matmul: 0-d arrays are not allowed; use multiply")
    result: DArray = _np.matmul(x1, x2)
    return result


def matrix_transpose(x: DArray, /) -> DArray:
    """``np.matrix_transpose(x)``: the last two axes swapped (x at least 2-D)."""
    require("matrix_transpose", x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: x must be at least 2-D, got {x.ndim}-D")
    result: DArray = _np.matrix_transpose(x)
    return result


def tensordot(
    x1: DArray, x2: DArray, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2
) -> DArray:
    """``np.tensordot(x1, x2, axes=axes)`` (numeric dtypes only)."""
    require_kind("tensordot", "numeric", x1, x2)
    if isinstance(axes, bool) or not isinstance(axes, (int, np.integer, tuple, list)):
        raise TypeError(f"tensordot: axes must be an int or a pair of sequences, got {axes!r}")
    if isinstance(axes, (int, np.integer)) and axes < 0:
        raise ValueError(f"tensordot: axes must be non-negative, got {axes}")
    result: DArray = _np.tensordot(x1, x2, axes=axes)
    return result


def vecdot(x1: DArray, x2: DArray, /, *, axis: int = -1) -> DArray:
    """``np.vecdot(x1, x2, axis=axis)``: sum of ``conj(x1) * x2`` along a negative ``axis``."""
    require_kind("vecdot", "numeric", x1, x2)
    require_negative_axis("vecdot", axis, x1, x2)
    n1 = x1.shape[axis] if -axis <= x1.ndim else 1
    n2 = x2.shape[axis] if -axis <= x2.ndim else 1
    if n1 != n2:
        raise ValueError(f"vecdot: x1 and x2 differ in size along axis {axis}: {n1} != {n2}")
    result: DArray = _np.vecdot(x1, x2, axis=axis)
    return result
