"""``np.gradient``, ``np.ediff1d`` and ``np.trapezoid`` on DArrays.

``gradient`` and ``ediff1d`` compute each rank's outputs with NumPy's own
formulas on its block extended by the neighbouring cells along the axis
(:mod:`dmesh.ops.kernels.windows`: a halo, two small messages per sharded
mesh dim), so the values are NumPy's bit for bit and no rank holds more than
its block and a few cells. The gradient keeps the layout of its argument; the
differences of ``ediff1d`` stay on the rank that holds their right-hand
element (uneven blocks; ``to_begin`` on the first block, ``to_end`` on the
last). ``trapezoid`` is NumPy's expression on DArrays (slices aligned by
dispatch, then a distributed sum).

Spacings and ``to_begin``/``to_end`` are small replicated values: NumPy arrays
or replicated DArrays; a sharded one raises ``UnsupportedError``.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    AxisArgumentError,
    UnsupportedError,
)
from dmesh.convert import distribute
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Replicate
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels.windows import take, window
from dmesh.ops.registry import decompose

__all__ = ["ediff1d", "gradient", "small_value", "trapezoid"]


def small_value(x: Any, name: str, what: str) -> Any:
    """``x`` as a NumPy value every rank holds: a replicated DArray's block, or ``x`` itself."""
    if not isinstance(x, DArray):
        return x
    if any(p.is_shard() for p in x.placements):
        raise UnsupportedError(
            f"np.{name}: {what} is a sharded DArray ({x.placements}); give it as a NumPy array "
            "or a replicated DArray (x.redistribute(mesh, [Replicate()] * mesh.ndim))"
        )
    return x.reduce_partials().local


# -- gradient ------------------------------------------------------------------------
def _spacings(varargs: tuple[Any, ...], shape: tuple[int, ...], axes: tuple[int, ...]) -> list[Any]:
    """Each axis's spacing as NumPy makes it: a scalar, or the differences of coordinates."""
    varargs = tuple(small_value(v, "gradient", "a spacing") for v in varargs)
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        return list(varargs) * len(axes)
    if len(varargs) != len(axes):
        raise ArgumentTypeError("invalid number of arguments")
    dx = list(varargs)
    for i, distances in enumerate(dx):
        distances = np.asanyarray(distances)
        if distances.ndim == 0:
            continue
        if distances.ndim != 1:
            raise ArgumentError("distances must be either scalars or 1d")
        if len(distances) != shape[axes[i]]:
            raise ArgumentError(
                "when 1d, distances must match the length of the corresponding dimension"
            )
        if np.issubdtype(distances.dtype, np.integer):
            distances = distances.astype(np.float64)
        diffx = np.diff(distances)
        # NumPy's shortcut: constant distances are the scalar case (its formulas differ)
        dx[i] = diffx[0] if (diffx == diffx[0]).all() else diffx
    return dx


def _gradient_block(f: Any, axis: int, ax_dx: Any, edge_order: int, otype: Any) -> Any:
    """NumPy's ``gradient`` of ``f`` along ``axis`` (its code, for one axis), on a window."""
    out = np.empty_like(f, dtype=otype)
    uniform = np.ndim(ax_dx) == 0

    def at(index: Any) -> Any:
        return take(f, axis, index)

    interior = (slice(1, -1),)

    def put(index: Any, value: Any) -> None:
        key = [slice(None)] * f.ndim
        key[axis] = index
        out[tuple(key)] = value

    if uniform:
        put(interior[0], (at(slice(2, None)) - at(slice(None, -2))) / (2.0 * ax_dx))
    else:
        dx1, dx2 = ax_dx[0:-1], ax_dx[1:]
        a = -(dx2) / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        shape = np.ones(f.ndim, dtype=int)
        shape[axis] = -1
        a, b, c = a.reshape(shape), b.reshape(shape), c.reshape(shape)
        put(
            interior[0],
            a * at(slice(None, -2)) + b * at(slice(1, -1)) + c * at(slice(2, None)),
        )
    if edge_order == 1:
        dx_0 = ax_dx if uniform else ax_dx[0]
        put(0, (take(f, axis, 1) - take(f, axis, 0)) / dx_0)
        dx_n = ax_dx if uniform else ax_dx[-1]
        put(-1, (take(f, axis, -1) - take(f, axis, -2)) / dx_n)
        return out
    if uniform:
        a, b, c = -1.5 / ax_dx, 2.0 / ax_dx, -0.5 / ax_dx
    else:
        dx1, dx2 = ax_dx[0], ax_dx[1]
        a = -(2.0 * dx1 + dx2) / (dx1 * (dx1 + dx2))
        b = (dx1 + dx2) / (dx1 * dx2)
        c = -dx1 / (dx2 * (dx1 + dx2))
    put(0, a * take(f, axis, 0) + b * take(f, axis, 1) + c * take(f, axis, 2))
    if uniform:
        a, b, c = 0.5 / ax_dx, -2.0 / ax_dx, 1.5 / ax_dx
    else:
        dx1, dx2 = ax_dx[-2], ax_dx[-1]
        a = (dx2) / (dx1 * (dx1 + dx2))
        b = -(dx2 + dx1) / (dx1 * dx2)
        c = (2.0 * dx2 + dx1) / (dx2 * (dx1 + dx2))
    put(-1, a * take(f, axis, -3) + b * take(f, axis, -2) + c * take(f, axis, -1))
    return out


def _gradient_axis(f: DArray, axis: int, ax_dx: Any, edge_order: int, otype: Any) -> DArray:
    """One axis of the gradient: each rank's outputs from its window (collective)."""
    f, win = window(f, axis, edge_order, edge_order, "np.gradient")
    lo, hi = win.lo, win.hi
    shape = list(f.local.shape)
    if hi == lo or not f.mesh.is_member:
        block = np.empty(shape, dtype=otype)
    else:
        cells = win.cells
        if not np.issubdtype(cells.dtype, np.inexact):
            cells = cells.astype(np.float64)
        stop = win.start + cells.shape[axis]
        local_dx = ax_dx if np.ndim(ax_dx) == 0 else ax_dx[win.start : stop - 1]
        full = _gradient_block(cells, axis, local_dx, edge_order, otype)
        block = take(full, axis, slice(lo - win.start, hi - win.start))
    return DArray(np.ascontiguousarray(block), DArraySpec(f.mesh, f.spec.layout, np.dtype(otype)))


@decompose(np.gradient)
def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """``np.gradient`` of a DArray: NumPy's values, ``f``'s layout (collective along sharded axes).

    Spacings are scalars or coordinate arrays (NumPy arrays or replicated
    DArrays); ``edge_order`` 1 or 2. A tuple of DArrays for several axes.
    """
    if not isinstance(f, DArray):
        raise UnsupportedError(
            "np.gradient: f must be the DArray (spacings given as DArrays with a NumPy f are "
            "not supported); distribute f too"
        )
    axes = tuple(range(f.ndim)) if axis is None else normalize_axis_tuple(axis, f.ndim)
    dx = _spacings(varargs, f.shape, axes)
    if edge_order > 2:
        raise ArgumentError("'edge_order' greater than 2 not supported")
    otype = f.dtype
    if otype.kind in "mM" or otype.kind == "b" or otype.kind not in "iufc":
        raise UnsupportedError(
            f"np.gradient on DArrays takes integer, float or complex arrays, got {otype}"
        )
    if otype.kind in "iu":
        otype = np.dtype(np.float64)
    outs = []
    for ax, ax_dx in zip(axes, dx):
        if f.shape[ax] < edge_order + 1:
            raise ArgumentError(
                "Shape of array too small to calculate a numerical gradient, "
                "at least (edge_order + 1) elements are required."
            )
        outs.append(_gradient_axis(f, ax, ax_dx, edge_order, otype))
    return outs[0] if len(outs) == 1 else tuple(outs)


# -- ediff1d -------------------------------------------------------------------------
def _edge(value: Any, dtype: np.dtype, name: str) -> np.ndarray:
    value = np.asanyarray(small_value(value, "ediff1d", name))
    if not np.can_cast(value, dtype, casting="same_kind"):
        raise ArgumentTypeError(
            f"dtype of `{name}` must be compatible with input `ary` under the `same_kind` rule."
        )
    return np.asarray(value.ravel())


@decompose(np.ediff1d)
def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> DArray:
    """``np.ediff1d`` of a DArray: 1-D differences, ``to_begin`` first and ``to_end`` last.

    Each difference is made by the rank holding its right-hand element (one
    cell from the previous block), so the blocks stay where they are.
    """
    if not isinstance(ary, DArray):
        raise UnsupportedError("np.ediff1d: ary must be the DArray (to_begin/to_end may be)")
    a: Any = np.ravel(ary)
    dtype = np.dtype(a.dtype)
    if dtype.kind == "b" or dtype.kind not in "iufc":
        raise UnsupportedError(f"np.ediff1d on DArrays takes numbers, got {dtype}")
    begin = _edge(np.empty(0, dtype) if to_begin is None else to_begin, dtype, "to_begin")
    end = _edge(np.empty(0, dtype) if to_end is None else to_end, dtype, "to_end")
    a, win = window(a, 0, 1, 0, "np.ediff1d")
    n = a.shape[0]
    lb, total = len(begin), len(begin) + max(n - 1, 0) + len(end)
    layout = a.spec.layout
    cut = layout.bounds[0]
    if cut is None or not sharding_mesh_dims(layout.placements, 0):
        bounds: list[Any] = [None]
    else:
        inner = [lb + max(b - 1, 0) for b in cut[1:-1]]
        bounds = [(0, *inner, total)]
    out_layout = Layout.with_bounds(layout.mesh_shape, layout.placements, (total,), bounds)
    pieces = []
    if a.mesh.is_member:
        first = bounds[0] is None or _block_number(a) == 0
        last = bounds[0] is None or _block_number(a) == len(cut) - 2
        cells = win.cells
        if first:
            pieces.append(begin.astype(dtype))
        pieces.append(np.subtract(cells[1:], cells[:-1], dtype=dtype))
        if last:
            pieces.append(end.astype(dtype))
    block = np.concatenate(pieces) if pieces else np.empty(0, dtype)
    return DArray(block, DArraySpec(a.mesh, out_layout, dtype))


def _block_number(a: DArray) -> int:
    return a.spec.layout.block_number(a.mesh.coordinate, 0)


# -- trapezoid -----------------------------------------------------------------------
@decompose(np.trapezoid)
def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Any:
    """``np.trapezoid`` of a DArray: NumPy's expression on DArrays, then a distributed sum.

    ``x`` may be a NumPy array (replicated) or a DArray; the sum is exact to rounding
    (the terms are added in another order than NumPy's pairwise sum).
    """
    if not isinstance(y, DArray):
        raise UnsupportedError("np.trapezoid: y must be the DArray (x may be a DArray too)")
    axis = operator.index(axis)
    if not -y.ndim <= axis < y.ndim:  # NumPy: an IndexError (AxisArgumentError is one)
        raise AxisArgumentError(axis, y.ndim, "np.trapezoid")
    mesh = y.mesh
    if x is None:
        d = dx
    else:
        if not isinstance(x, DArray):
            x = distribute(np.asanyarray(x), mesh, [Replicate()] * mesh.ndim)
        if x.ndim == 1:
            d = np.diff(x)
            shape = [1] * y.ndim
            shape[axis] = d.shape[0]
            d = d.reshape(shape)
        else:
            d = np.diff(x, axis=axis)
    axis %= y.ndim
    head = (slice(None),) * axis
    upper, lower = y[head + (slice(1, None),)], y[head + (slice(None, -1),)]
    return (d * (upper + lower) / 2.0).sum(axis)
