"""Index arithmetic on DArrays: ``np.unravel_index``, ``np.ravel_multi_index``,
``np.take_along_axis`` and ``np.put_along_axis``.

``unravel_index`` and ``ravel_multi_index`` are elementwise (``mod``,
``floor_divide``, products and sums of the index arrays, which keep their
layouts); their bound checks are one ``np.any`` each, so every rank raises
alike. ``take_along_axis``/``put_along_axis`` build NumPy's own index tuple
(an ``arange`` per other dim, every rank holds it, and the indices) and read
or write through the integer-array machinery of
:mod:`dmesh.ops.indexing.fancy`: each element is requested from (or sent to)
its owner, nothing is gathered.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.darray import DArray
from dmesh.ops.indexing.operands import as_operand, dtype_of, mesh_of
from dmesh.ops.indexing.writes import target
from dmesh.ops.registry import decompose

__all__ = ["along_axis_key", "put_along_axis", "ravel_multi_index", "take_along_axis",
           "unravel_index"]  # fmt: skip


def _int_indices(x: Any) -> None:
    """NumPy's TypeError for index arrays that do not cast to intp (same kind)."""
    if not np.can_cast(dtype_of(x), np.intp, "same_kind"):
        raise ArgumentTypeError("only int indices permitted")


def _dims(shape: Any) -> tuple[int, ...]:
    try:
        return (operator.index(shape),)
    except TypeError:
        return tuple(operator.index(n) for n in shape)


@decompose(np.unravel_index)
def unravel_index(indices: Any, shape: Any, order: str = "C") -> tuple[Any, ...]:
    """``np.unravel_index`` of an integer DArray: a tuple of intp DArrays of its layout.

    The bound check is one ``np.any`` (collective); the rest is elementwise.
    """
    dims = _dims(shape)
    if order not in ("C", "F"):
        raise ArgumentError("only 'C' or 'F' order is permitted")
    _int_indices(indices)
    size = math.prod(dims)
    index = indices.astype(np.intp) if indices.dtype != np.intp else indices
    if bool(np.any((index < 0) | (index >= size))):  # every rank gets the same verdict
        high = int(np.max(index))
        bad = high if high >= size else int(np.min(index))
        raise ArgumentError(f"index {bad} is out of bounds for array with size {size}")
    out: list[Any] = []
    rest = index
    for n in reversed(dims) if order == "C" else dims:
        out.append(np.mod(rest, n))
        rest = np.floor_divide(rest, n)
    return tuple(reversed(out)) if order == "C" else tuple(out)


@decompose(np.ravel_multi_index)
def ravel_multi_index(multi_index: Any, dims: Any, mode: Any = "raise", order: str = "C") -> DArray:
    """``np.ravel_multi_index`` with DArray index arrays: an intp DArray (elementwise).

    ``mode`` (one, or one per dim) is ``raise`` (one ``np.any``, collective),
    ``wrap`` or ``clip``.
    """
    shape = _dims(dims)
    items = [multi_index[k] for k in range(len(multi_index))]
    if len(items) != len(shape):
        raise ArgumentError(f"parameter multi_index must be a sequence of length {len(shape)}")
    modes = (mode,) * len(shape) if isinstance(mode, str) else tuple(mode)
    if len(modes) != len(shape) or any(m not in ("raise", "wrap", "clip") for m in modes):
        raise ArgumentError(f"mode must be 'raise', 'wrap' or 'clip', one or one per dim: {mode!r}")
    if order not in ("C", "F"):
        raise ArgumentError("only 'C' or 'F' order is permitted")
    if math.prod(shape) > np.iinfo(np.intp).max or any(n < 0 for n in shape):
        raise ArgumentError(
            "invalid dims: array size defined by dims is larger than the maximum possible size."
        )
    for x in items:
        _int_indices(x)
    mesh = mesh_of(items, "np.ravel_multi_index")
    columns = [as_operand(x, mesh) for x in items]
    columns = [np.asarray(x, np.intp) if not isinstance(x, DArray) else x.astype(np.intp)
               for x in columns]  # fmt: skip
    bad: Any = False
    for k, (n, m) in enumerate(zip(shape, modes)):
        if m == "raise":
            bad = bad | (columns[k] < 0) | (columns[k] >= n)
        elif m == "wrap":
            columns[k] = np.mod(columns[k], n) if n else columns[k]
        else:
            columns[k] = np.clip(columns[k], 0, max(n - 1, 0))
    if "raise" in modes and bool(np.any(bad)):
        raise ArgumentError("invalid entry in coordinates array")
    total: Any = None
    for k, x in enumerate(columns):
        stride = math.prod(shape[k + 1 :]) if order == "C" else math.prod(shape[:k])
        term = x * np.intp(stride)
        total = term if total is None else total + term
    return total  # type: ignore[no-any-return]


def along_axis_key(shape: tuple[int, ...], indices: Any, axis: int) -> tuple[Any, ...]:
    """NumPy's key for ``*_along_axis``: ``indices`` on ``axis``, an ``arange`` on the others."""
    key: list[Any] = []
    for d, n in enumerate(shape):
        if d == axis:
            key.append(indices)
        else:
            key.append(np.arange(n).reshape((1,) * d + (-1,) + (1,) * (len(shape) - d - 1)))
    return tuple(key)


def _check_along(arr_ndim: int, indices: Any, axis: Any) -> int | None:
    """NumPy's checks of ``*_along_axis``; the axis, normalized (None: flat)."""
    if dtype_of(indices).kind not in "iu":
        raise IndexError("`indices` must be an integer array")
    ndim = np.ndim(indices) if not isinstance(indices, DArray) else indices.ndim
    if axis is None:
        if ndim != 1:
            raise ArgumentError("when axis=None, `indices` must have a single dimension.")
        return None
    if ndim != arr_ndim:
        raise ArgumentError("`indices` and `arr` must have the same number of dimensions")
    axis = operator.index(axis)
    if not -arr_ndim <= axis < arr_ndim:
        raise np.exceptions.AxisError(axis, arr_ndim)
    return int(axis % arr_ndim)


def _flat_key(arr: Any, indices: Any) -> tuple[Any, ...]:
    """The multi-index of flat ``indices`` into ``arr`` (bound-checked; collective)."""
    n = arr.size
    flat = indices if isinstance(indices, DArray) else np.asarray(indices, np.intp)
    low, high = (int(np.min(flat)), int(np.max(flat))) if flat.size else (0, 0)
    if high >= n or low < -n:
        raise IndexError(
            f"index {high if high >= n else low} is out of bounds for axis 0 with size {n}"
        )
    return tuple(np.unravel_index(np.mod(flat, n) if n else flat, arr.shape))


@decompose(np.take_along_axis)
def take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Any:
    """``np.take_along_axis``: ``arr[..., indices, ...]`` matched along the other dims.

    Collective when a dim of ``arr`` is sharded: each element is requested
    from its owner.
    """
    mesh = mesh_of([arr, indices], "np.take_along_axis")
    array = as_operand(arr, mesh)
    where = _check_along(array.ndim, indices, axis)
    if where is None:
        flat = np.ravel(array)
        return flat[_flat_key(flat, indices)]
    return array[along_axis_key(array.shape, indices, where)]


@decompose(np.put_along_axis)
def put_along_axis(arr: Any, indices: Any, values: Any, axis: Any) -> None:
    """``np.put_along_axis``: writes ``values`` at the matched positions, in place.

    Collective when a dim of ``arr`` is sharded: each value goes to its owner.
    With ``axis=None`` the indices are flat, and the values broadcast to them.
    """
    array = target(arr, "np.put_along_axis")
    where = _check_along(array.ndim, indices, axis)
    if where is None:
        count = indices.shape[0] if isinstance(indices, DArray) else len(indices)
        if count:
            array[_flat_key(array, indices)] = values  # broadcast to the indices, as NumPy
        return
    array[along_axis_key(array.shape, indices, where)] = values
