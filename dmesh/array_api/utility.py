"""Utility functions of the Array API standard (2024.12) on DArrays: ``all``, ``any``, ``diff``."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from dmesh.array_api._checks import require
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, AxisArgumentError
from dmesh.darray import DArray

__all__: list[str] = ["all", "any", "diff"]

_np: Any = np  # NumPy untyped: its functions return DArrays here, by dispatch


def all(
    x: DArray, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> DArray:
    """``np.all``: whether every element over ``axis`` is true (a boolean array)."""
    require("all", x)
    return cast(DArray, _np.all(x, axis=axis, keepdims=keepdims))


def any(
    x: DArray, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> DArray:
    """``np.any``: whether some element over ``axis`` is true (a boolean array)."""
    require("any", x)
    return cast(DArray, _np.any(x, axis=axis, keepdims=keepdims))


def diff(
    x: DArray,
    /,
    *,
    axis: int = -1,
    n: int = 1,
    prepend: DArray | None = None,
    append: DArray | None = None,
) -> DArray:
    """``np.diff``: ``n``-th differences along ``axis``, ``prepend``/``append`` joined first."""
    require("diff", x)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ArgumentError(f"diff: n must be a non-negative int, got {n!r}")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ArgumentTypeError(f"diff: axis must be an int, got {type(axis).__name__}")
    if x.ndim == 0:
        raise ArgumentError("diff: x must have at least one dimension (got a 0-d array)")
    if not -x.ndim <= axis < x.ndim:
        raise AxisArgumentError(axis, x.ndim, "diff")
    parts = [p for p in (prepend, x, append) if p is not None]
    require("diff", *parts)
    if len(parts) > 1:
        x = _np.concat(parts, axis=axis)
    return cast(DArray, _np.diff(x, n=int(n), axis=int(axis)))
