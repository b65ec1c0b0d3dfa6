"""Searching functions of the Array API standard (2024.12) on DArrays.

This module's ``__all__`` also carries the sorting functions (``sort``,
``argsort``, from :mod:`dmesh.array_api.sorting`) and the set functions
(``unique_*``, from :mod:`dmesh.array_api.sets`), so that the namespace
gathers them with the searching group.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import numpy as np

from dmesh.array_api._checks import check_scalar, require
from dmesh.array_api.sets import unique_all, unique_counts, unique_inverse, unique_values
from dmesh.array_api.sorting import argsort, sort
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.darray import DArray

__all__: list[str] = [
    "argmax",
    "argmin",
    "argsort",
    "count_nonzero",
    "nonzero",
    "searchsorted",
    "sort",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
    "where",
]

_np: Any = np  # NumPy untyped: its functions return DArrays here, by dispatch


def argmax(x: DArray, /, *, axis: int | None = None, keepdims: bool = False) -> DArray:
    """``np.argmax``: the index (int64) of the first largest element over ``axis``."""
    require("argmax", x)
    return cast(DArray, _np.argmax(x, axis=axis, keepdims=keepdims))


def argmin(x: DArray, /, *, axis: int | None = None, keepdims: bool = False) -> DArray:
    """``np.argmin``: the index (int64) of the first smallest element over ``axis``."""
    require("argmin", x)
    return cast(DArray, _np.argmin(x, axis=axis, keepdims=keepdims))


def count_nonzero(
    x: DArray, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> DArray:
    """``np.count_nonzero``: how many elements are nonzero over ``axis`` (int64)."""
    require("count_nonzero", x)
    return cast(DArray, _np.count_nonzero(x, axis=axis, keepdims=keepdims))


def nonzero(x: DArray, /) -> tuple[DArray, ...]:
    """``np.nonzero``: the indices of the nonzero elements, one array per axis (0-d raises)."""
    require("nonzero", x)
    if x.ndim == 0:
        raise ArgumentError("nonzero: x must have at least one dimension (got a 0-d array)")
    return tuple(_np.nonzero(x))


def searchsorted(
    x1: DArray,
    x2: DArray | int | float,
    /,
    *,
    side: Literal["left", "right"] = "left",
    sorter: DArray | None = None,
) -> DArray:
    """``np.searchsorted``: where ``x2`` (an array or a Python scalar) goes into 1-D ``x1``."""
    require("searchsorted", x1)
    if isinstance(x2, DArray):
        pass
    elif isinstance(x2, (int, float)):
        check_scalar("searchsorted", x2, x1.dtype)
    else:
        raise ArgumentTypeError(
            f"searchsorted: x2 must be a DArray or a Python scalar, got {type(x2).__name__}"
        )
    if sorter is not None:
        require("searchsorted", sorter)
    if x1.ndim != 1:
        raise ArgumentError(f"searchsorted: x1 must be 1-D, got {x1.ndim}-D")
    if side not in ("left", "right"):
        raise ArgumentError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    return cast(DArray, _np.searchsorted(x1, x2, side=side, sorter=sorter))


def where(condition: DArray, x1: DArray | complex, x2: DArray | complex, /) -> DArray:
    """``np.where``: ``x1`` where ``condition`` holds, else ``x2`` (one may be a scalar)."""
    require("where", condition)
    if condition.dtype != np.bool_:
        raise ArgumentTypeError(f"where: condition must be boolean, got {condition.dtype}")
    arrays = [a for a in (x1, x2) if isinstance(a, DArray)]
    if not arrays:
        raise ArgumentTypeError("where: x1 and x2 cannot both be Python scalars")
    for value in (x1, x2):
        if not isinstance(value, DArray):
            check_scalar("where", value, arrays[0].dtype)
    return cast(DArray, _np.where(condition, x1, x2))
