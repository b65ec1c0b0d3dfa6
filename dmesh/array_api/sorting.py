"""Sorting functions of the Array API standard (2024.12) on DArrays (``sort``, ``argsort``).

Both map onto NumPy's stable sort along ``axis``, which dispatches to its
distributed rule. NumPy has no descending sort: a descending one sorts the
flipped array stably and flips back, so equal elements keep their order (in
``argsort``'s indices and in the signs of zeros) and NaNs come first, as
``array_api_strict``'s ``argsort`` has them. ``stable=False`` sorts stably too.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from dmesh.array_api._checks import require, require_real
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, AxisArgumentError
from dmesh.darray import DArray

__all__: list[str] = ["argsort", "sort"]

_np: Any = np  # NumPy untyped: its functions return DArrays here, by dispatch


def _axis(name: str, x: DArray, axis: int) -> int:
    """``axis`` normalised to ``[0, ndim)``, checked on every rank."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ArgumentTypeError(f"{name}: axis must be an int, got {type(axis).__name__}")
    if x.ndim == 0:
        raise ArgumentError(f"{name}: x must have at least one dimension (got a 0-d array)")
    if not -x.ndim <= axis < x.ndim:
        raise AxisArgumentError(int(axis), x.ndim, name)
    return int(axis) % x.ndim


def sort(x: DArray, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> DArray:
    """``np.sort(kind='stable')``; ``descending`` keeps equal elements in their order."""
    require("sort", x)
    require_real("sort", x)
    ax = _axis("sort", x, axis)
    if not descending:
        return cast(DArray, _np.sort(x, axis=ax, kind="stable"))
    return cast(DArray, _np.flip(_np.sort(_np.flip(x, axis=ax), axis=ax, kind="stable"), axis=ax))


def argsort(
    x: DArray, /, *, axis: int = -1, descending: bool = False, stable: bool = True
) -> DArray:
    """``np.argsort(kind='stable')``; ``descending`` keeps equal elements in their order."""
    require("argsort", x)
    require_real("argsort", x)
    ax = _axis("argsort", x, axis)
    if not descending:
        return cast(DArray, _np.argsort(x, axis=ax, kind="stable"))
    flipped = _np.flip(_np.argsort(_np.flip(x, axis=ax), axis=ax, kind="stable"), axis=ax)
    return cast(DArray, (x.shape[ax] - 1) - flipped)
