"""``np.apply_along_axis`` of a DArray: ``func1d`` on each 1-D slice where it lies.

Each slice along ``axis`` must be whole on one rank, so a mesh dim that shards
``axis`` is moved to the longest other dim first (one all-to-all, never a
gather); then every rank applies NumPy's ``apply_along_axis`` to its block.
``func1d`` sees NumPy arrays. The ranks agree on the shape and dtype of one
``func1d`` result (one small all-gather), so that a rank whose block is empty
makes an empty block of the right shape, and a ``func1d`` whose results differ
between ranks raises NumPy's error on every rank. A 1-D array sharded along
its only axis is one slice: that raises (it would be a gather).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.convert import from_local
from dmesh.core.placement import Replicate, Shard
from dmesh.darray import DArray
from dmesh.ops.registry import decompose


def _slices_whole(arr: DArray, axis: int) -> DArray:
    """``arr`` with no mesh dim sharding ``axis`` (moved to the longest other dim)."""
    sizes = arr.mesh.shape
    if not any(p == Shard(axis) and sizes[i] > 1 for i, p in enumerate(arr.placements)):
        return arr  # (a mesh dim of one rank leaves the axis whole)
    others = [d for d in range(arr.ndim) if d != axis]
    if not others:
        raise UnsupportedError(
            "np.apply_along_axis of a 1-D DArray sharded along its only axis: the one slice "
            "would be the whole array on one rank; gather it (a.full_array()) if it is small"
        )
    longest = max(others, key=lambda d: arr.shape[d])
    placements = [
        Shard(longest) if p == Shard(axis) and sizes[i] > 1 else p
        for i, p in enumerate(arr.placements)
    ]
    return arr.redistribute(arr.mesh, placements)


@decompose(np.apply_along_axis)
def apply_along_axis(func1d: Any, axis: Any, arr: Any, *args: Any, **kwargs: Any) -> DArray:
    """``np.apply_along_axis`` of a DArray: NumPy's on each block, slices whole (see module)."""
    if not isinstance(arr, DArray):
        raise ArgumentError("np.apply_along_axis: arr must be the DArray")
    axis = operator.index(axis)
    if not -arr.ndim <= axis < arr.ndim:
        raise np.exceptions.AxisError(axis, arr.ndim)
    axis %= arr.ndim
    if any(n == 0 for d, n in enumerate(arr.shape) if d != axis):
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    arr = _slices_whole(arr.reduce_partials(), axis)
    block = np.asarray(arr.local)
    empty = any(n == 0 for d, n in enumerate(block.shape) if d != axis)
    local = None if empty else np.asanyarray(np.apply_along_axis(func1d, axis, block, *args,
                                                                 **kwargs))  # fmt: skip
    core = None if local is None else (
        local.shape[axis : axis + local.ndim - block.ndim + 1], local.dtype.str
    )  # fmt: skip
    cores = {c for c in arr.mesh.comm().allgather(core) if c is not None}
    if len(cores) != 1:
        raise ValueError(f"np.apply_along_axis: func1d's results differ in shape or dtype: {cores}")
    shape, dtype = cores.pop()
    if local is None:
        local = np.empty(block.shape[:axis] + shape + block.shape[axis + 1 :], np.dtype(dtype))
    shift = len(shape) - 1
    placements = [
        Shard(p.dim if p.dim < axis else p.dim + shift)
        if isinstance(p, Shard) and p.dim != axis  # (axis: sharded on a one-rank mesh dim)
        else Replicate()
        for p in arr.placements
    ]
    return from_local(local, arr.mesh, placements)
