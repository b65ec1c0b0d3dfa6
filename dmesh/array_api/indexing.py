"""Indexing functions of the Array API standard (2024.12): ``take``, ``take_along_axis``."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from dmesh.array_api._checks import require
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.darray import DArray

__all__: list[str] = ["take", "take_along_axis"]

_np: Any = np  # NumPy untyped: its functions return DArrays here, by dispatch


def _int_indices(name: str, indices: DArray) -> None:
    """Raise ``TypeError`` unless ``indices`` has an integer dtype."""
    if indices.dtype.kind not in "iu":
        raise ArgumentTypeError(f"{name}: indices must have an integer dtype, got {indices.dtype}")


def take(x: DArray, indices: DArray, /, *, axis: int | None = None) -> DArray:
    """``np.take`` along ``axis`` (required unless ``x`` is 1-D) of 1-D integer ``indices``."""
    require("take", x, indices)
    _int_indices("take", indices)
    if indices.ndim != 1:
        raise ArgumentError(f"take: indices must be 1-D, got {indices.ndim}-D")
    if axis is None:
        if x.ndim != 1:
            raise ArgumentError(f"take: axis is required for a {x.ndim}-D array")
        axis = 0
    return cast(DArray, _np.take(x, indices, axis=axis))


def take_along_axis(x: DArray, indices: DArray, /, *, axis: int = -1) -> DArray:
    """``np.take_along_axis``: elements of ``x`` picked by ``indices`` (x's rank) along ``axis``."""
    require("take_along_axis", x, indices)
    _int_indices("take_along_axis", indices)
    return cast(DArray, _np.take_along_axis(x, indices, axis=axis))
