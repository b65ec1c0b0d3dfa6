"""Ufunc methods on DArrays: ``ufunc.outer``, ``ufunc.at`` and ``ufunc.reduceat``.

* ``ufunc.outer(a, b)``: ``a`` with ``b.ndim`` trailing length-1 axes, then the
  elementwise ufunc with broadcasting (what NumPy computes): the result may be
  sharded along ``a``'s axes or ``b``'s, or both on a 2-D mesh; the operand that
  broadcasts along the sharded axes is replicated (it is the smaller side of
  the result).
* ``ufunc.at(a, indices[, b])``: in place, with indices every rank holds (an
  integer, an integer array or a tuple of them, one per leading axis). Each
  rank applies the updates that fall in its block, in their order, so
  repeated indices accumulate as in NumPy; a replicated copy gets the same
  updates on every rank that holds it. No communication.
* ``ufunc.reduceat(a, indices, axis)``: indices every rank holds. Along an
  axis no mesh dim shards, each block's ``reduceat`` is its part. Along a
  sharded axis each rank reduces the part of every segment in its block, the
  parts (one small array per segment: the size of the result) are gathered
  along each mesh dim that shards the axis, and folded in block order; the
  result is replicated along those mesh dims.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, AxisArgumentError, UnsupportedError
from dmesh.collectives.gathers import all_gather
from dmesh.core.layout import Layout
from dmesh.core.placement import Replicate
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose
from dmesh.ops.rules.elementwise import UFUNCS

__all__ = ["at", "outer", "reduceat"]

BINARY = [u for u in UFUNCS if u.nin == 2]
# at and reduceat: the ufuncs that accumulate (sums, products, extrema, logical and
# bitwise folds), which is what they are used for.
ACCUMULATING = [
    np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.fmax, np.fmin,
    np.logical_and, np.logical_or, np.logical_xor, np.bitwise_and, np.bitwise_or,
    np.bitwise_xor,
]  # fmt: skip
# reduceat folds the blocks' parts of a segment with the ufunc itself, which needs the
# ufunc associative: subtract's a - b - c - d is not (a - b) - (c - d).
ASSOCIATIVE = [u for u in ACCUMULATING if u is not np.subtract]


def outer(ufunc: np.ufunc, a: Any, b: Any, **kwargs: Any) -> Any:
    """``ufunc.outer(a, b)``: shape ``a.shape + b.shape``, ``ufunc(a[i...], b[j...])``."""
    extra = np.ndim(b)
    if extra and isinstance(a, DArray):  # (a scalar broadcasts as it is)
        a = np.expand_dims(a, tuple(range(a.ndim, a.ndim + extra)))
    return ufunc(a, b, **kwargs)


def _replicated_values(name: str, b: Any) -> Any:
    """``b`` as an array every rank holds: a scalar, a NumPy array or a replicated DArray."""
    if isinstance(b, DArray):
        if any(not p.is_replicate() for p in b.placements):
            raise UnsupportedError(
                f"{name}: a DArray of values must be replicated (placements {b.placements}); "
                "pass values every rank holds, or b.redistribute(mesh, [Replicate()] * ndim)"
            )
        return b.local
    return b


def _indices(name: str, a: DArray, indices: Any) -> tuple[np.ndarray, ...]:
    """The index arrays of the leading axes, non-negative and checked (every rank alike)."""
    if isinstance(indices, DArray) or (
        isinstance(indices, tuple) and any(isinstance(i, DArray) for i in indices)
    ):
        raise UnsupportedError(
            f"{name}: DArray indices are not supported yet; pass indices every rank holds "
            "(an integer array or a tuple of them)"
        )
    parts = indices if isinstance(indices, tuple) else (indices,)
    out = []
    for d, part in enumerate(parts):
        index = np.asarray(part)
        if index.dtype.kind not in "iu" or d >= a.ndim:
            raise UnsupportedError(
                f"{name}: indices must be integers (an array or a tuple of them, one per "
                f"leading axis of a {a.ndim}-D array); got {indices!r}"
            )
        n = a.shape[d]
        if index.size and (index.min() < -n or index.max() >= n):
            raise IndexError(f"{name}: an index is out of bounds for axis {d} with size {n}")
        out.append(np.where(index < 0, index + n, index).astype(np.intp))
    return tuple(np.broadcast_arrays(*out)) if out else ()


def at(ufunc: np.ufunc, a: Any, indices: Any, b: Any = None) -> None:
    """``ufunc.at(a, indices[, b])`` in place: each rank applies the updates of its block."""
    name = f"np.{ufunc.__name__}.at"
    if not isinstance(a, DArray):
        raise UnsupportedError(f"{name}: the array updated must be the DArray (got {type(a)})")
    if any(p.is_partial() for p in a.placements):
        raise UnsupportedError(
            f"{name}: a partial array ({a.placements}) cannot be updated in place; "
            "reduce it first (a.reduce_partials())"
        )
    index = _indices(name, a, indices)
    if not index:
        raise UnsupportedError(f"{name}: give at least one index array")
    values = None if b is None else _replicated_values(name, b)
    k = len(index)
    shape = index[0].shape + a.shape[k:]
    if values is not None:  # NumPy's checks, made alike on every rank before any update
        values = np.broadcast_to(values, shape)
        ufunc.at(np.zeros(1, a.dtype), [0], np.zeros(1, values.dtype))
    elif ufunc.nin != 1:
        raise ArgumentError(f"{name}: a second operand is needed for a binary ufunc")
    coord = a.mesh.coordinate
    if coord is None:
        return
    block = a.spec.layout.block(coord)
    mask = np.ones(index[0].shape, bool)
    for d in range(k):
        mask &= (index[d] >= block[d][0]) & (index[d] < block[d][1])
    local = tuple(index[d][mask] - block[d][0] for d in range(k))
    if values is None:
        ufunc.at(a.local, local)
        return
    rest = tuple(slice(lo, hi) for lo, hi in block[k:])
    ufunc.at(a.local, local, values[mask][(slice(None),) + rest])


def _segments(indices: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's reduceat segments as ``[start, stop)``: to the next index, or one element."""
    start = indices
    stop = np.append(indices[1:], n)
    stop = np.where(start < stop, stop, start + 1)
    return start, stop


def reduceat(ufunc: np.ufunc, a: Any, indices: Any, axis: int = 0, dtype: Any = None,
             out: Any = None) -> DArray:  # fmt: skip
    """``ufunc.reduceat(a, indices, axis, dtype)`` with indices every rank holds."""
    name = f"np.{ufunc.__name__}.reduceat"
    if not isinstance(a, DArray) or out is not None or ufunc.nin != 2:
        raise UnsupportedError(f"{name}: a DArray array, no out=, a binary ufunc")
    if isinstance(indices, DArray):
        raise UnsupportedError(f"{name}: pass indices every rank holds, not a DArray")
    if not -a.ndim <= axis < a.ndim:
        raise AxisArgumentError(axis, a.ndim, name)
    axis %= a.ndim
    index = np.asarray(indices)
    index = index.astype(np.intp) if index.size == 0 else index
    n = a.shape[axis]
    if index.ndim != 1 or index.dtype.kind not in "iu":
        raise UnsupportedError(f"{name}: indices must be a 1-D integer array; got {indices!r}")
    if index.size and (index.min() < 0 or index.max() >= n):
        raise IndexError(f"{name}: an index is out of bounds for axis {axis} with size {n}")
    a = a.reduce_partials()  # a reduction of partial terms is not the terms' reduction
    kind = ufunc.reduceat(np.zeros(1, a.dtype), [0], dtype=dtype).dtype  # NumPy's result dtype
    layout = a.spec.layout
    shape = a.shape[:axis] + (index.size,) + a.shape[axis + 1 :]
    sharding = [m for m, p in enumerate(layout.placements) if p.is_shard() and p.dim == axis]
    bounds = tuple(None if d == axis else b for d, b in enumerate(layout.bounds))
    placements = tuple(Replicate() if m in sharding else p for m, p in enumerate(layout.placements))
    spec = DArraySpec(a.mesh, Layout(layout.mesh_shape, placements, shape, bounds), kind)
    coord = a.mesh.coordinate
    if coord is None:
        return DArray(np.empty(spec.local_shape(), kind), spec)
    block = a.local
    lo, hi = layout.block(coord)[axis]
    start, stop = _segments(index.astype(np.intp), n)
    if not sharding:  # every segment is in the block
        return DArray(ufunc.reduceat(block, index, axis=axis, dtype=dtype), spec)
    values, present = _parts(ufunc, block, start, stop, lo, hi, axis, kind, dtype)
    for m in reversed(sharding):  # the innermost mesh dim's blocks are contiguous: first
        group = a.mesh.comm(m)
        values = all_gather(values[None], axis=0, group=group)
        present = all_gather(present[None], axis=0, group=group)
        values, present = _fold(ufunc, values, present, axis)
    return DArray(np.ascontiguousarray(values), spec)


def _parts(ufunc: np.ufunc, block: np.ndarray, start: np.ndarray, stop: np.ndarray,
           lo: int, hi: int, axis: int, kind: np.dtype,
           dtype: Any) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Each segment's reduction over its part in this block, and which segments have one."""
    first = np.clip(start, lo, hi) - lo
    last = np.clip(stop, lo, hi) - lo
    present = first < last
    shape = list(block.shape)
    shape[axis] = start.size
    values = np.zeros(shape, kind)
    if present.any():
        # reduceat of interleaved (first, last) pairs reduces [first, last) at the even
        # positions; a pad element keeps a last equal to the block's length in range.
        pad = np.concatenate([block, np.take(block, [0], axis=axis)], axis=axis)
        pairs = np.stack([first[present], last[present]], axis=1).reshape(-1)
        reduced = ufunc.reduceat(pad, pairs, axis=axis, dtype=dtype)
        where: list[Any] = [slice(None)] * block.ndim
        where[axis] = present
        even: list[Any] = [slice(None)] * block.ndim
        even[axis] = slice(0, None, 2)
        values[tuple(where)] = reduced[tuple(even)]
    return values, present


def _fold(
    ufunc: np.ufunc, values: np.ndarray, present: np.ndarray, axis: int
) -> tuple[np.ndarray, np.ndarray]:
    """Combine the gathered parts (stacked on a new axis 0) in block order."""
    total, seen = values[0], present[0]
    view = [1] * total.ndim
    view[axis] = -1
    for part, has in zip(values[1:], present[1:]):
        both = (seen & has).reshape(view)
        combined = ufunc(total, part).astype(total.dtype, copy=False)
        total = np.where(both, combined, np.where(has.reshape(view), part, total))
        seen = seen | has
    return total, seen


# What each method communicates (the first line of its docstring: the README's table).
_WHAT = {
    "outer": "the ufunc of broadcast views; the smaller side is replicated (no gather).",
    "at": "in place, each rank applies the updates in its block (indices every rank "
    "holds; no communication).",
    "reduceat": "each block's part of every segment; along a sharded axis the parts "
    "(the size of the result) are gathered and folded in block order.",
}


def _method(impl: Callable[..., Any], ufunc: np.ufunc) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return impl(ufunc, *args, **kwargs)

    call.__name__ = f"{ufunc.__name__}_{impl.__name__}"
    call.__doc__ = f"``np.{ufunc.__name__}.{impl.__name__}`` on DArrays: {_WHAT[impl.__name__]}"
    return call


for _ufunc in BINARY:
    decompose((_ufunc, "outer"))(_method(outer, _ufunc))
for _ufunc in ACCUMULATING:
    decompose((_ufunc, "at"))(_method(at, _ufunc))
for _ufunc in ASSOCIATIVE:
    decompose((_ufunc, "reduceat"))(_method(reduceat, _ufunc))
