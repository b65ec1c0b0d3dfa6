"""Rearranging and joining functions written with DArray ops that have rules.

``atleast_1d/2d/3d``, ``broadcast_arrays``, ``fliplr``, ``flipud``, ``rot90``,
``rollaxis``, ``matrix_transpose``, ``unstack``, ``tile``, ``append``,
``block``, ``dstack``, ``column_stack``, ``hsplit``/``vsplit``/``dsplit``,
``insert`` and ``delete``, as NumPy writes them: views (reshape, transpose,
slicing), flips (a sharded axis swaps blocks between mirrored owners) and
joins (along a sharded axis :func:`dmesh.ops.kernels.joins.join` re-cuts
the pieces, never gathering). Sharded inputs give sharded results.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.darray import DArray
from dmesh.ops.kernels import repeat as _repeat  # noqa: F401  (registers np.repeat)
from dmesh.ops.kernels.joins import as_darray, join
from dmesh.ops.registry import decompose


def _one_or_tuple(results: list[Any]) -> Any:
    return results[0] if len(results) == 1 else tuple(results)


def _atleast(arys: tuple[Any, ...], ndim: int) -> Any:
    out: list[Any] = []
    for a in arys:
        if not isinstance(a, DArray):
            out.append((np.atleast_1d, np.atleast_2d, np.atleast_3d)[ndim - 1](a))
            continue
        shape = a.shape
        if a.ndim == 0:
            shape = (1,) * ndim
        elif a.ndim == 1 and ndim >= 2:
            shape = (1, a.shape[0], 1)[:ndim] if ndim == 3 else (1, a.shape[0])
        elif a.ndim == 2 and ndim == 3:
            shape = (*a.shape, 1)
        out.append(np.reshape(a, shape) if shape != a.shape else a)
    return _one_or_tuple(out)


@decompose(np.atleast_1d)
def atleast_1d(*arys: Any) -> Any:
    """``np.atleast_1d``: a 0-d DArray becomes shape ``(1,)`` (a view)."""
    return _atleast(arys, 1)


@decompose(np.atleast_2d)
def atleast_2d(*arys: Any) -> Any:
    """``np.atleast_2d``: ``(n,)`` becomes ``(1, n)`` (a view; a shard stays a shard)."""
    return _atleast(arys, 2)


@decompose(np.atleast_3d)
def atleast_3d(*arys: Any) -> Any:
    """``np.atleast_3d``: ``(n,)`` becomes ``(1, n, 1)``, ``(m, n)`` becomes ``(m, n, 1)``."""
    return _atleast(arys, 3)


@decompose(np.broadcast_arrays)
def broadcast_arrays(*args: Any, subok: bool = False) -> tuple[Any, ...]:
    """``np.broadcast_arrays``: each array broadcast to the common shape (views)."""
    mesh = next(x for x in args if isinstance(x, DArray)).mesh
    shape = np.broadcast_shapes(*[np.shape(x) for x in args])
    return tuple(np.broadcast_to(as_darray(x, mesh), shape) for x in args)


@decompose(np.fliplr)
def fliplr(m: Any) -> Any:
    """``np.fliplr``: ``m[:, ::-1]`` (a sharded axis 1 swaps blocks between mirrored owners)."""
    if m.ndim < 2:
        raise ArgumentError("Input must be >= 2-d.")
    return m[:, ::-1]


@decompose(np.flipud)
def flipud(m: Any) -> Any:
    """``np.flipud``: ``m[::-1]``."""
    if m.ndim < 1:
        raise ArgumentError("Input must be >= 1-d.")
    return m[::-1, ...]


@decompose(np.rot90)
def rot90(m: Any, k: int = 1, axes: Any = (0, 1)) -> Any:
    """``np.rot90``: flips and a transpose, as NumPy composes them."""
    axes = tuple(axes)
    if len(axes) != 2:
        raise ArgumentError("len(axes) must be 2.")
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == m.ndim:
        raise ArgumentError("Axes must be different.")
    if axes[0] >= m.ndim or axes[0] < -m.ndim or axes[1] >= m.ndim or axes[1] < -m.ndim:
        raise ArgumentError(f"Axes={axes} out of range for array of ndim={m.ndim}.")
    k = operator.index(k) % 4
    if k == 0:
        return m[...]
    if k == 2:
        return np.flip(np.flip(m, axes[0]), axes[1])
    perm = list(range(m.ndim))
    perm[axes[0]], perm[axes[1]] = perm[axes[1]], perm[axes[0]]
    if k == 1:
        return np.transpose(np.flip(m, axes[1]), perm)
    return np.flip(np.transpose(m, perm), axes[1])


@decompose(np.rollaxis)
def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """``np.rollaxis``: a transpose (no data moves)."""
    n = a.ndim
    axis = normalize_axis_index(axis, n)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(f"'start' arg requires {-n} <= start < {n + 1}, "
                                      f"but {start} was passed in")  # fmt: skip
    if axis < start:
        start -= 1
    if axis == start:
        return a[...]
    axes = list(range(n))
    axes.remove(axis)
    axes.insert(start, axis)
    return np.transpose(a, axes)


@decompose(np.matrix_transpose, np.linalg.matrix_transpose)
def matrix_transpose(x: Any, /) -> Any:
    """``np.matrix_transpose``: the last two axes swapped (a view)."""
    if x.ndim < 2:
        raise ArgumentError(f"Input array must be at least 2-dimensional, but it is {x.ndim}")
    return np.swapaxes(x, -1, -2)


@decompose(np.unstack)
def unstack(x: Any, /, *, axis: int = 0) -> tuple[Any, ...]:
    """``np.unstack``: the slices along ``axis``, each a one-long slice squeezed.

    (Not ``x[i]``: an int index on a sharded axis gives a ``Partial("sum")``
    result whose zero terms turn a ``-0.0`` into ``0.0``.)
    """
    if x.ndim == 0:
        raise ArgumentError("Input array must be at least 1-d.")
    axis = normalize_axis_index(axis, x.ndim)
    head = (slice(None),) * axis
    return tuple(np.squeeze(x[head + (slice(i, i + 1),)], axis) for i in range(x.shape[axis]))


@decompose(np.tile)
def tile(A: Any, reps: Any) -> Any:
    """``np.tile``: copies joined along each axis (sharded axes re-cut, never gathered)."""
    reps = (operator.index(reps),) if np.ndim(reps) == 0 else tuple(operator.index(r) for r in reps)
    if any(r < 0 for r in reps):
        raise ArgumentError(f"np.tile: negative repetitions {reps}")
    d = len(reps)
    if d < A.ndim:
        reps = (1,) * (A.ndim - d) + reps
    elif A.ndim < d:
        A = np.reshape(A, (1,) * (d - A.ndim) + A.shape)
    result = A
    for axis, r in enumerate(reps):
        if r != 1:
            result = (
                join([result] * r, axis) if r else result[(slice(None),) * axis + (slice(0, 0),)]
            )
    return result if result is not A else A.copy()


@decompose(np.append)
def append(arr: Any, values: Any, axis: Any = None) -> Any:
    """``np.append``: flattened and joined without an axis, else joined along it."""
    mesh = (arr if isinstance(arr, DArray) else values).mesh
    arr, values = as_darray(arr, mesh), as_darray(values, mesh)
    if axis is None:
        return join([np.ravel(arr), np.ravel(values)], 0)
    return join([arr, values], axis)


@decompose(np.dstack)
def dstack(tup: Any) -> Any:
    """``np.dstack``: each array made 3-D (``atleast_3d``), joined along axis 2."""
    arrays = list(tup)
    return join([np.atleast_3d(x) for x in arrays], 2)


@decompose(np.column_stack)
def column_stack(tup: Any) -> Any:
    """``np.column_stack``: 1-D arrays become columns, then joined along axis 1."""
    arrays = [x if np.ndim(x) >= 2 else np.reshape(x, (-1, 1)) for x in tup]
    return join(arrays, 1)


def _split(name: str, ary: Any, sections: Any, axis: int, least: int) -> Any:
    if ary.ndim < least:
        raise ArgumentError(f"{name} only works on arrays of {least} or more dimensions")
    return np.split(ary, sections, axis)


@decompose(np.hsplit)
def hsplit(ary: Any, indices_or_sections: Any) -> Any:
    """``np.hsplit``: ``np.split`` along axis 1 (axis 0 for 1-D arrays)."""
    return _split("hsplit", ary, indices_or_sections, 1 if ary.ndim > 1 else 0, 1)


@decompose(np.vsplit)
def vsplit(ary: Any, indices_or_sections: Any) -> Any:
    """``np.vsplit``: ``np.split`` along axis 0."""
    return _split("vsplit", ary, indices_or_sections, 0, 2)


@decompose(np.dsplit)
def dsplit(ary: Any, indices_or_sections: Any) -> Any:
    """``np.dsplit``: ``np.split`` along axis 2."""
    return _split("dsplit", ary, indices_or_sections, 2, 3)


def _block_depth(arrays: Any, path: tuple[int, ...] = ()) -> tuple[int, int]:
    """(list depth, largest ndim) of ``np.block``'s nested lists."""
    if isinstance(arrays, tuple):
        raise ArgumentTypeError(f"{path} is a tuple. Only lists can be used to arrange blocks, "
                                "and np.block does not allow implicit conversion from tuple "
                                "to ndarray.")  # fmt: skip
    if isinstance(arrays, list):
        if not arrays:
            raise ArgumentError(f"List at {path} cannot be empty")
        found = [_block_depth(x, (*path, i)) for i, x in enumerate(arrays)]
        if len({depth for depth, _ in found}) > 1:
            raise ArgumentError(f"List depths are mismatched at {path}: {found}")
        return found[0][0] + 1, max(n for _, n in found)
    return 0, int(np.ndim(arrays))


@decompose(np.block)
def block(arrays: Any) -> Any:
    """``np.block``: the innermost lists joined along the last axis, their parents along
    the one before, ...; each block first made ``max(depth, ndim)``-D, as NumPy does."""
    depth, largest = _block_depth(arrays)
    ndim = max(depth, largest)
    mesh = _first_darray(arrays).mesh

    def assemble(item: Any, level: int) -> Any:
        if level == depth:
            x = as_darray(item, mesh)
            return np.reshape(x, (1,) * (ndim - x.ndim) + x.shape) if x.ndim < ndim else x
        parts = [assemble(x, level + 1) for x in item]
        return join(parts, -(depth - level))

    result = assemble(arrays, 0)
    return result if depth else result.copy()


def _first_darray(arrays: Any) -> DArray:
    if isinstance(arrays, DArray):
        return arrays
    for x in arrays if isinstance(arrays, list) else ():
        found = _first_darray(x) if isinstance(x, (list, DArray)) else None
        if found is not None:
            return found
    return None  # type: ignore[return-value]  # dispatch found a DArray somewhere


def _positions(obj: Any, n: int, name: str) -> np.ndarray:
    """``obj`` as sorted, non-negative int positions (slices and negative ints resolved)."""
    if isinstance(obj, DArray):
        raise UnsupportedError(f"np.{name}: the positions must be a list, an int, a slice or "
                               "an ndarray (the same on every rank), not a DArray")  # fmt: skip
    if isinstance(obj, slice):
        return np.arange(*obj.indices(n))
    index = np.asarray(obj)
    if index.dtype == bool:
        if index.ndim != 1:
            raise ArgumentError(f"boolean array argument obj to {name} must be one dimensional")
        if name == "delete" and len(index) != n:
            raise ArgumentError(f"boolean array argument obj to delete must be one dimensional "
                                f"and match the axis length of {n}")  # fmt: skip
        return np.flatnonzero(index)
    return index


@decompose(np.delete)
def delete(arr: Any, obj: Any, axis: Any = None) -> Any:
    """``np.delete``: the kept runs sliced out and joined (sharded axes re-cut, no gather)."""
    if axis is None:
        arr, axis = np.ravel(arr), 0
    axis = normalize_axis_index(axis, arr.ndim)
    n = arr.shape[axis]
    index = _positions(obj, n, "delete")
    if index.size and index.dtype.kind not in "iu":
        raise IndexError("arrays used as indices must be of integer (or boolean) type")
    if np.any((index < -n) | (index >= n)):
        raise IndexError(f"index {index.min()} is out of bounds for axis {axis} with size {n}")
    keep = np.ones(n, dtype=bool)
    keep[index.astype(np.intp)] = False
    return _kept_runs(arr, keep, axis)


def _kept_runs(arr: Any, keep: np.ndarray, axis: int) -> Any:
    edges = np.flatnonzero(np.diff(np.concatenate([[False], keep, [False]]).astype(np.int8)))
    head = (slice(None),) * axis
    pieces = [arr[head + (slice(lo, hi),)] for lo, hi in edges.reshape(-1, 2)]
    if not pieces:
        return arr[head + (slice(0, 0),)].copy()
    return join(pieces, axis) if len(pieces) > 1 else pieces[0].copy()


@decompose(np.insert)
def insert(arr: Any, obj: Any, values: Any, axis: Any = None) -> Any:
    """``np.insert``: the runs between insertion points joined with the values between them
    (sharded axes re-cut, no gather). The values are a scalar, a replicated array or a DArray."""
    if axis is None:
        arr, axis = np.ravel(arr), 0
    axis = normalize_axis_index(axis, arr.ndim)
    n = arr.shape[axis]
    index = _positions(obj, n, "insert")
    if index.ndim > 1:
        raise ArgumentError("index array argument obj to insert must be one dimensional or scalar")
    if index.size and index.dtype.kind not in "iu":
        raise IndexError("arrays used as indices must be of integer (or boolean) type")
    if np.any((index < -n) | (index > n)):
        raise IndexError(f"index {obj} is out of bounds for axis {axis} with size {n}")
    index = np.where(index < 0, index + n, index).astype(np.intp)
    vals: Any = as_darray(values, arr.mesh).astype(arr.dtype)
    moved = (slice(None),) * axis
    if index.size == 1:  # the values fill a block (NumPy moves their axis 0 for an int)
        vals = np.reshape(vals, (1,) * (arr.ndim - vals.ndim) + vals.shape)
        if index.ndim == 0:
            vals = np.moveaxis(vals, 0, axis)
        shape = list(arr.shape)
        shape[axis] = vals.shape[axis]
        inserted = [np.broadcast_to(vals, tuple(shape))]
        points = [int(index.reshape(-1)[0])]
    else:  # value slice j goes before position index[j]; equal positions keep their order
        shape = list(arr.shape)
        shape[axis] = index.size
        spread = np.broadcast_to(vals, tuple(shape))
        order = np.argsort(index, kind="stable")
        inserted = [spread[moved + (slice(int(j), int(j) + 1),)] for j in order]
        points = [int(index[j]) for j in order]
    pieces: list[Any] = []
    start = 0
    for point, piece in zip(points, inserted):
        pieces += [arr[moved + (slice(start, point),)], piece]
        start = point
    pieces.append(arr[moved + (slice(start, n),)])
    return join(pieces, axis)
