"""Diagonals and triangles of DArrays: ``diagonal``, ``diag``, ``trace``, ``tril``, ``triu``,
``fill_diagonal`` and ``tril_indices_from``/``triu_indices_from``.

Each rank works on its own block with the block's global offsets, which every
rank knows from the layout:

- ``tril``/``triu`` zero the block's elements on the wrong side of the
  diagonal: no communication, the layout kept (``Partial`` too: a zero term
  on every rank combines to zero under every op).
- ``diagonal`` takes the diagonal elements of each block. With only one of
  the two axes sharded, the diagonal is sharded alike (its boundaries are the
  axis's, shifted by the offset); with both sharded, the mesh dims of the
  second axis are first moved to the first one (an all-to-all, not a gather).
- ``diag`` of a sharded vector gives a matrix sharded by rows; ``trace`` is
  the diagonal summed.
- ``fill_diagonal`` writes, on each rank, the diagonal positions its block holds.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.layout import Layout
from dmesh.core.placement import Placement, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.indexing.operands import reduce_in_place
from dmesh.ops.indexing.views import Derived, writes_through
from dmesh.ops.registry import decompose
from dmesh.triangles import tril_indices, triu_indices


def _triangle(m: Any, k: Any, lower: bool) -> DArray:
    if m.ndim < 1:
        raise ArgumentError("tril/triu: the input must be at least 1-d")
    k = operator.index(k)
    if m.ndim == 1:  # NumPy broadcasts a vector to (n, n) first
        m = np.broadcast_to(m, (m.shape[0], m.shape[0]))
    block = m.local
    if m.mesh.coordinate is None:
        return DArray(block.copy(), m.spec)
    xp = array_module(block)
    offsets = m.spec.offsets()
    rows = xp.arange(block.shape[-2])[:, None] + offsets[-2]
    cols = xp.arange(block.shape[-1])[None, :] + offsets[-1]
    keep = cols - rows <= k if lower else cols - rows >= k
    local = xp.where(keep, block, xp.zeros(1, block.dtype))
    return DArray(local, m.spec)


@decompose(np.tril)
def tril(m: Any, k: Any = 0) -> DArray:
    """``np.tril``: each block zeroed above diagonal ``k`` (no communication)."""
    return _triangle(m, k, lower=True)


@decompose(np.triu)
def triu(m: Any, k: Any = 0) -> DArray:
    """``np.triu``: each block zeroed below diagonal ``k`` (no communication)."""
    return _triangle(m, k, lower=False)


def _diagonal_of(a: DArray, offset: int, axis1: int, axis2: int) -> DArray:
    """``np.diagonal(a, offset, axis1, axis2)`` as a DArray (a copy)."""
    mesh = a.mesh
    if any(p.is_shard(axis1) for p in a.placements) and any(
        p.is_shard(axis2) for p in a.placements
    ):  # both sharded: move axis2's mesh dims to axis1 (an all-to-all)
        moved = [Shard(axis1) if p.is_shard(axis2) else p for p in a.placements]
        a = a.redistribute(mesh, moved)
    layout = a.spec.layout
    n1, n2 = a.shape[axis1], a.shape[axis2]
    r_shift, c_shift = max(-offset, 0), max(offset, 0)
    length = max(0, min(n1 - r_shift, n2 - c_shift))
    others = [d for d in range(a.ndim) if d not in (axis1, axis2)]
    out_ndim = a.ndim - 1
    placements: list[Placement] = []
    for p in a.placements:
        if isinstance(p, Shard):
            placements.append(
                Shard(out_ndim - 1 if p.dim in (axis1, axis2) else others.index(p.dim))
            )
        else:
            placements.append(p)
    bounds: list[Any] = [layout.bounds[d] for d in others]
    diag_cut = None
    for axis, shift in ((axis1, r_shift), (axis2, c_shift)):
        cut = layout.bounds[axis]
        if cut is not None:
            diag_cut = tuple(min(max(b - shift, 0), length) for b in cut)
    bounds.append(diag_cut)
    shape = (*[a.shape[d] for d in others], length)
    out = Layout(layout.mesh_shape, tuple(placements), shape, tuple(bounds))
    spec = DArraySpec(mesh, out, a.dtype)
    block = a.local
    xp = array_module(block)
    if mesh.coordinate is None:
        return DArray(xp.empty(spec.local_shape(), a.dtype), spec)
    first = spec.offsets()[-1]
    index = xp.arange(first, first + spec.local_shape()[-1])
    starts = a.spec.offsets()
    moved = xp.moveaxis(block, (axis1, axis2), (-2, -1))
    local = moved[..., index + r_shift - starts[axis1], index + c_shift - starts[axis2]]
    return DArray(xp.ascontiguousarray(local), spec)


@decompose(np.diagonal)
def diagonal(a: Any, offset: Any = 0, axis1: Any = 0, axis2: Any = 1) -> DArray:
    """``np.diagonal``: the diagonal as the last axis, sharded where an axis of it was."""
    if a.ndim < 2:
        raise ArgumentError("diag requires an array of at least two dimensions")
    axis1, axis2 = normalize_axis_index(axis1, a.ndim), normalize_axis_index(axis2, a.ndim)
    if axis1 == axis2:
        raise ArgumentError("axis1 and axis2 cannot be the same")
    result = _diagonal_of(a, operator.index(offset), axis1, axis2)
    result._view = Derived("diagonal", read_only=True)  # NumPy's diagonal is a read-only view
    return result


@decompose(np.linalg.diagonal)
def linalg_diagonal(x: Any, /, *, offset: Any = 0) -> DArray:
    """``np.linalg.diagonal``: the diagonal of the last two axes."""
    if x.ndim < 2:
        raise ArgumentError("diag requires an array of at least two dimensions")
    return _diagonal_of(x, operator.index(offset), x.ndim - 2, x.ndim - 1)


@decompose(np.trace)
def trace(a: Any, offset: Any = 0, axis1: Any = 0, axis2: Any = 1, dtype: Any = None,
          out: Any = None) -> Any:  # fmt: skip
    """``np.trace``: the diagonal summed (``np.sum`` with ``dtype=``)."""
    if out is not None:
        raise UnsupportedError("np.trace(..., out=) on DArrays is not supported; assign the result")
    return np.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


@decompose(np.diag)
def diag(v: Any, k: Any = 0) -> DArray:
    """``np.diag``: a matrix from a vector (sharded by rows where the vector is sharded;
    no communication) or the ``k``-th diagonal of a matrix."""
    k = operator.index(k)
    if v.ndim == 2:
        return _diagonal_of(v, k, 0, 1)
    if v.ndim != 1:
        raise ArgumentError("Input must be 1- or 2-d.")
    n = v.shape[0]
    size = n + abs(k)
    r_shift, c_shift = max(-k, 0), max(k, 0)
    layout = v.spec.layout
    cut = layout.bounds[0]
    rows = None
    if cut is not None:  # block j holds rows [cut[j] + r_shift, cut[j + 1] + r_shift), ends widened
        rows = (0, *[b + r_shift for b in cut[1:-1]], size)
    out = Layout(layout.mesh_shape, layout.placements, (size, size), (rows, None))
    spec = DArraySpec(v.mesh, out, v.dtype)
    block = v.local
    xp = array_module(block)
    local = xp.zeros(spec.local_shape(), v.dtype)
    if v.mesh.coordinate is None:
        return DArray(local, spec)
    first_row = spec.offsets()[0]
    start = v.spec.offsets()[0]
    t = xp.arange(start, start + block.shape[0])  # global positions of this block's values
    local[t + r_shift - first_row, t + c_shift] = block
    return DArray(local, spec)


@decompose(np.fill_diagonal)
@writes_through
def fill_diagonal(a: Any, val: Any, wrap: bool = False) -> None:
    """``np.fill_diagonal``, in place: each rank writes the diagonal positions of its block
    (``val`` is a scalar or an array every rank holds; no communication)."""
    if a.ndim < 2:
        raise ArgumentError("array must be at least 2-d")
    if isinstance(val, DArray):
        if not all(p.is_replicate() for p in val.placements):
            raise UnsupportedError(
                "np.fill_diagonal: val must be a scalar or an array every rank holds "
                f"(a replicated DArray), not one with placements {val.placements}; "
                "gather it with val.full_array() if small"
            )
        val = np.asarray(val.local)
    reduce_in_place(a)  # a write into partial terms would not sum to the value written
    shape = a.shape
    end = None
    if a.ndim == 2:
        step = shape[1] + 1
        if not wrap:
            end = shape[1] * shape[1]
    else:
        if any(n != shape[0] for n in shape):
            raise ArgumentError("All dimensions of input must be of equal length")
        step = 1 + int(np.cumprod(shape[:-1]).sum())
    values = np.asarray(val).reshape(-1)
    total = int(np.prod(shape))
    positions = np.arange(0, total if end is None else min(end, total), step)
    if values.size == 0 or positions.size == 0 or a.mesh.coordinate is None:
        return
    index = np.unravel_index(positions, shape)
    lo = a.spec.offsets()
    block = a.local
    inside = np.ones(positions.size, dtype=bool)
    for d in range(a.ndim):
        inside &= (index[d] >= lo[d]) & (index[d] < lo[d] + block.shape[d])
    picked = np.flatnonzero(inside)
    if picked.size:
        local = tuple(array_module(block).asarray(index[d][picked] - lo[d]) for d in range(a.ndim))
        chosen = values[picked % values.size].astype(a.dtype, copy=False)
        block[local] = array_module(block).asarray(chosen)


@decompose(np.tril_indices_from)
def tril_indices_from(arr: Any, k: Any = 0) -> tuple[DArray, DArray]:
    """``np.tril_indices_from``: :func:`dmesh.tril_indices` on ``arr``'s mesh (sharded)."""
    if arr.ndim != 2:
        raise ArgumentError("input array must be 2-d")
    return tril_indices(arr.shape[-2], k=k, m=arr.shape[-1], mesh=arr.mesh)


@decompose(np.triu_indices_from)
def triu_indices_from(arr: Any, k: Any = 0) -> tuple[DArray, DArray]:
    """``np.triu_indices_from``: :func:`dmesh.triu_indices` on ``arr``'s mesh (sharded)."""
    if arr.ndim != 2:
        raise ArgumentError("input array must be 2-d")
    return triu_indices(arr.shape[-2], k=k, m=arr.shape[-1], mesh=arr.mesh)


__all__ = ["diag", "diagonal", "fill_diagonal", "trace", "tril", "triu"]
