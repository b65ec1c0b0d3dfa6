"""Manipulation functions of the Array API standard (2024.12) on DArrays.

Each maps onto the NumPy function of the same meaning, which dispatches to its
distributed rule; a combination with no distributed rule raises that rule's
``NotImplementedError`` (``UnsupportedError``) rather than gathering.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from dmesh.array_api._checks import require, require_sequence
from dmesh.collectives.errors import ArgumentTypeError, UnsupportedError
from dmesh.darray import DArray

__all__: list[str] = [
    "broadcast_arrays",
    "broadcast_to",
    "concat",
    "expand_dims",
    "flip",
    "moveaxis",
    "permute_dims",
    "repeat",
    "reshape",
    "roll",
    "squeeze",
    "stack",
    "tile",
    "unstack",
]

_np: Any = np  # NumPy untyped: its functions return DArrays here, by dispatch


def broadcast_arrays(*arrays: DArray) -> list[DArray]:
    """``np.broadcast_arrays``: the arrays broadcast against each other, as a list (2024.12)."""
    require("broadcast_arrays", *arrays)
    return list(_np.broadcast_arrays(*arrays))


def broadcast_to(x: DArray, /, shape: tuple[int, ...]) -> DArray:
    """``np.broadcast_to``: ``x`` broadcast to ``shape``."""
    require("broadcast_to", x)
    return cast(DArray, _np.broadcast_to(x, tuple(shape)))


def concat(arrays: tuple[DArray, ...] | list[DArray], /, *, axis: int | None = 0) -> DArray:
    """``np.concat``: the arrays joined along ``axis`` (``None``: flattened first)."""
    items = require_sequence("concat", arrays)
    return cast(DArray, _np.concat(items, axis=axis))


def expand_dims(x: DArray, /, axis: int | tuple[int, ...] = 0) -> DArray:
    """``np.expand_dims``: a size-1 axis inserted at ``axis`` (a tuple too, as 2025.12 allows)."""
    require("expand_dims", x)
    return cast(DArray, _np.expand_dims(x, axis))


def flip(x: DArray, /, *, axis: int | tuple[int, ...] | None = None) -> DArray:
    """``np.flip``: the elements reversed along ``axis`` (all axes by default)."""
    require("flip", x)
    return cast(DArray, _np.flip(x, axis=axis))


def moveaxis(
    x: DArray, source: int | tuple[int, ...], destination: int | tuple[int, ...], /
) -> DArray:
    """``np.moveaxis``: the axes ``source`` moved to ``destination``."""
    require("moveaxis", x)
    return cast(DArray, _np.moveaxis(x, source, destination))


def permute_dims(x: DArray, /, axes: tuple[int, ...]) -> DArray:
    """``np.permute_dims`` (``np.transpose``): the axes permuted."""
    require("permute_dims", x)
    return cast(DArray, _np.permute_dims(x, tuple(axes)))


def repeat(x: DArray, repeats: int | DArray, /, *, axis: int | None = None) -> DArray:
    """``np.repeat``: each element repeated; a DArray ``repeats`` has no distributed rule yet."""
    require("repeat", x)
    if not isinstance(repeats, (int, DArray)) or isinstance(repeats, bool):
        raise ArgumentTypeError(
            f"repeat: repeats must be an int or a DArray, got {type(repeats).__name__}"
        )
    return cast(DArray, _np.repeat(x, repeats, axis=axis))


def reshape(x: DArray, /, shape: tuple[int, ...], *, copy: bool | None = None) -> DArray:
    """``np.reshape``; ``copy=True`` copies, ``copy=False`` is not supported (no view guarantee)."""
    require("reshape", x)
    if copy is False:
        raise UnsupportedError(
            "reshape: copy=False is not supported on DArrays (a distributed reshape cannot "
            "promise a view); use copy=None or copy=True"
        )
    out = _np.reshape(x, tuple(shape))
    return cast(DArray, out.copy() if copy else out)


def roll(
    x: DArray,
    /,
    shift: int | tuple[int, ...],
    *,
    axis: int | tuple[int, ...] | None = None,
) -> DArray:
    """``np.roll``: the elements shifted cyclically along ``axis`` (flattened by default)."""
    require("roll", x)
    return cast(DArray, _np.roll(x, shift, axis=axis))


def squeeze(x: DArray, /, axis: int | tuple[int, ...]) -> DArray:
    """``np.squeeze`` of the size-1 axes ``axis`` (required; another size raises ValueError)."""
    require("squeeze", x)
    return cast(DArray, _np.squeeze(x, axis=axis))


def stack(arrays: tuple[DArray, ...] | list[DArray], /, *, axis: int = 0) -> DArray:
    """``np.stack``: the arrays joined along a new axis ``axis``."""
    items = require_sequence("stack", arrays)
    return cast(DArray, _np.stack(items, axis=axis))


def tile(x: DArray, repetitions: tuple[int, ...], /) -> DArray:
    """``np.tile``: ``x`` repeated ``repetitions`` times along each axis."""
    require("tile", x)
    return cast(DArray, _np.tile(x, tuple(repetitions)))


def unstack(x: DArray, /, *, axis: int = 0) -> tuple[DArray, ...]:
    """``np.unstack``: the slices of ``x`` along ``axis``, as a tuple."""
    require("unstack", x)
    return tuple(_np.unstack(x, axis=axis))
