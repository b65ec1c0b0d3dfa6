"""``cumsum``/``cumprod`` along a sharded axis: a local scan plus an exclusive scan of
block totals; and ``diff`` as slices and a subtraction.

Each rank scans its block; the last slice of that scan is its block total.
The ranks of the mesh dims that shard the axis all-gather the totals (the
size of one slice, not of the block), in block order, and each rank combines
the totals of the blocks before its own into every element of its scan. The
layout does not change. Float results can differ from NumPy's sequential
scan in the last bits (the sums are grouped differently).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import collectives as coll
from collectives.errors import ArgumentError, UnsupportedError
from dmesh.darray import DArray
from dmesh.layout import sharding_mesh_dims
from dmesh.spec import DArraySpec
from ops.registry import decompose


def _scan(a: Any, axis: Any, dtype: Any, out: Any, product: bool, name: str) -> DArray:
    if out is not None:
        raise UnsupportedError(f"np.{name}(..., out=) on DArrays is not supported yet")
    if axis is None:
        if a.ndim != 1:
            raise UnsupportedError(
                f"np.{name}(axis=None) of a {a.ndim}-d DArray flattens it, which is not "
                "supported yet; give an axis"
            )
        axis = 0
    axis = int(axis)
    if not -a.ndim <= axis < a.ndim:
        raise ArgumentError(
            f"np.{name}: axis {axis} is out of bounds for array of dimension {a.ndim}"
        )
    axis %= a.ndim
    a = a.reduce_partials()
    scan = np.cumprod if product else np.cumsum
    block = scan(a.local, axis=axis, dtype=dtype)
    spec = DArraySpec(a.mesh, a.spec.layout, np.dtype(block.dtype))
    mesh_dims = sharding_mesh_dims(a.placements, axis)
    if not mesh_dims or a.mesh.coordinate is None:
        return DArray(block, spec)
    comm = a.mesh[mesh_dims].comm()  # rank order there is block order
    identity = 1 if product else 0
    if block.shape[axis]:
        total = np.take(block, -1, axis=axis)
    else:
        total = np.full(np.delete(block.shape, axis), identity, dtype=block.dtype)
    totals = coll.all_gather(total[None], 0, comm)  # in block order: the sub-mesh's rank order
    before = totals[: comm.Get_rank()]
    carry = before.prod(axis=0) if product else before.sum(axis=0, dtype=block.dtype)
    carry = np.expand_dims(np.asarray(carry, dtype=block.dtype), axis)
    return DArray(block * carry if product else block + carry, spec)


@decompose(np.cumsum)
def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> DArray:
    """``np.cumsum`` on a DArray (collective when the axis is sharded)."""
    return _scan(a, axis, dtype, out, False, "cumsum")


@decompose(np.cumprod)
def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> DArray:
    """``np.cumprod`` on a DArray (collective when the axis is sharded)."""
    return _scan(a, axis, dtype, out, True, "cumprod")


@decompose(np.diff)
def diff(a: Any, n: int = 1, axis: int = -1, **kwargs: Any) -> Any:
    """``np.diff``: ``a[1:] - a[:-1]`` along ``axis``, ``n`` times (aligned by dispatch)."""
    if kwargs:
        raise UnsupportedError("np.diff(..., prepend=/append=) on DArrays is not supported yet")
    if n < 0:
        raise ArgumentError(f"np.diff: order must be non-negative but got {n}")
    axis = int(axis) % a.ndim
    head = tuple(slice(None) for _ in range(axis))
    for _ in range(n):
        a = a[head + (slice(1, None),)] - a[head + (slice(None, -1),)]
    return a
