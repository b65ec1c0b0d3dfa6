"""``cumsum``/``cumprod`` (their nan forms, ``cumulative_sum``/``cumulative_prod``) and
``ufunc.accumulate`` along a sharded axis: a local scan plus an exclusive scan of block
totals; and ``diff`` as slices and a subtraction.

Each rank scans its block; the last slice of that scan is its block total.
The ranks of the mesh dims that shard the axis all-gather the totals (the
size of one slice, not of the block), in block order, and each rank combines
the totals of the blocks before its own into every element of its scan. The
layout does not change. Float results can differ from NumPy's sequential
scan in the last bits (the sums are grouped differently). Without an axis an
N-D array is flattened first (``np.ravel``, C order), as NumPy does.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.errors import ArgumentError, AxisArgumentError, UnsupportedError
from dmesh.core.layout import sharding_mesh_dims
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.indexing.views import write_out
from dmesh.ops.registry import decompose

# Associative ufuncs whose accumulate can start from the previous blocks' total.
ACCUMULATING = (
    np.add, np.multiply, np.maximum, np.minimum, np.fmax, np.fmin, np.logical_and,
    np.logical_or, np.logical_xor, np.bitwise_and, np.bitwise_or, np.bitwise_xor,
)  # fmt: skip


def _scan(
    a: Any,
    axis: Any,
    out: Any,
    ufunc: np.ufunc,
    local_scan: Callable[[Any, int], Any],
    name: str,
) -> DArray:
    """Scan ``a`` along ``axis`` with ``local_scan`` on each block, then ``ufunc`` with the
    total of the blocks before (one all-gather of block totals)."""
    if out is not None:  # NumPy casts the scan into out (unsafe, as ufunc.accumulate)
        return write_out(name, out, lambda: _scan(a, axis, None, ufunc, local_scan, name))
    if axis is None:  # NumPy scans the flattened array, in C order
        if a.ndim != 1:
            a = np.ravel(a)
        axis = 0
    axis = operator.index(axis)
    if not -a.ndim <= axis < a.ndim:
        raise AxisArgumentError(axis, a.ndim, f"np.{name}")
    axis %= a.ndim
    a = a.reduce_partials()
    block = local_scan(a.local, axis)
    spec = DArraySpec(a.mesh, a.spec.layout, np.dtype(block.dtype))
    mesh_dims = sharding_mesh_dims(a.placements, axis)
    if not mesh_dims or a.mesh.coordinate is None:
        return DArray(block, spec)
    comm = a.mesh[mesh_dims].comm()  # rank order there is block order
    if block.shape[axis]:
        total = np.take(block, -1, axis=axis)
    else:  # an empty block: its total is skipped below (every rank knows the sizes)
        total = np.zeros(np.delete(block.shape, axis), dtype=block.dtype)
    totals = coll.all_gather(total[None], 0, comm)  # in block order
    sizes = np.diff(a.spec.layout.bounds[axis])
    before = totals[: comm.Get_rank()][sizes[: comm.Get_rank()] > 0]
    if not len(before):
        return DArray(block, spec)
    carry = np.expand_dims(ufunc.reduce(before, axis=0, dtype=block.dtype), axis)
    return DArray(ufunc(carry, block, dtype=block.dtype), spec)


@decompose(np.cumsum)
def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> DArray:
    """``np.cumsum`` on a DArray (collective when the axis is sharded)."""
    return _scan(a, axis, out, np.add, lambda b, ax: np.cumsum(b, axis=ax, dtype=dtype), "cumsum")


@decompose(np.cumprod)
def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> DArray:
    """``np.cumprod`` on a DArray (collective when the axis is sharded)."""
    scan = lambda b, ax: np.cumprod(b, axis=ax, dtype=dtype)  # noqa: E731
    return _scan(a, axis, out, np.multiply, scan, "cumprod")


def _nan_replaced(a: Any, value: int) -> Any:
    """``a`` with its NaNs replaced by ``value`` (NumPy's ``_replace_nan``): floats and complex."""
    if a.dtype.kind not in "fc":
        return a
    return np.where(np.isnan(a), value, a)


@decompose(np.nancumsum)
def nancumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """``np.nancumsum``: the cumulative sum with NaNs counted as zero."""
    return cumsum(_nan_replaced(a, 0), axis, dtype, out)


@decompose(np.nancumprod)
def nancumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """``np.nancumprod``: the cumulative product with NaNs counted as one."""
    return cumprod(_nan_replaced(a, 1), axis, dtype, out)


def _cumulative(x: Any, ufunc: np.ufunc, axis: Any, dtype: Any, out: Any,
                include_initial: bool, name: str) -> Any:  # fmt: skip
    """NumPy's ``_cumulative_func``: the scan, then the identity in front if asked."""
    if out is not None:
        return write_out(
            name, out, lambda: _cumulative(x, ufunc, axis, dtype, None, include_initial, name)
        )
    if x.ndim == 0:
        x = x.reshape(1)
    if axis is None:
        if x.ndim >= 2:
            raise ArgumentError(
                "For arrays which have more than one dimension ``axis`` argument is required."
            )
        axis = 0
    scan = lambda b, ax: ufunc.accumulate(b, axis=ax, dtype=dtype)  # noqa: E731
    result = _scan(x, axis, None, ufunc, scan, name)
    if not include_initial:
        return result
    shape = list(result.shape)
    shape[int(axis) % result.ndim] = 1
    initial = np.full_like(result, ufunc.identity, shape=shape)
    return np.concatenate([initial, result], axis=axis)


@decompose(np.cumulative_sum)
def cumulative_sum(x: Any, /, *, axis: Any = None, dtype: Any = None, out: Any = None,
                   include_initial: bool = False) -> Any:  # fmt: skip
    """``np.cumulative_sum`` (NumPy 2.1): ``axis`` needed above 1-D; ``include_initial``."""
    return _cumulative(x, np.add, axis, dtype, out, include_initial, "cumulative_sum")


@decompose(np.cumulative_prod)
def cumulative_prod(x: Any, /, *, axis: Any = None, dtype: Any = None, out: Any = None,
                    include_initial: bool = False) -> Any:  # fmt: skip
    """``np.cumulative_prod`` (NumPy 2.1): ``axis`` needed above 1-D; ``include_initial``."""
    return _cumulative(x, np.multiply, axis, dtype, out, include_initial, "cumulative_prod")


def _accumulate_for(ufunc: np.ufunc) -> Callable[..., DArray]:
    def accumulate(array: Any, axis: Any = 0, dtype: Any = None, out: Any = None) -> DArray:
        name = f"{ufunc.__name__}.accumulate"
        if isinstance(out, tuple):
            out = out[0] if len(out) == 1 else out
        scan = lambda b, ax: ufunc.accumulate(b, axis=ax, dtype=dtype)  # noqa: E731
        return _scan(array, axis, out, ufunc, scan, name)

    accumulate.__doc__ = (
        f"``np.{ufunc.__name__}.accumulate`` on a DArray (collective when sharded)."
    )
    return accumulate


for _ufunc in ACCUMULATING:
    decompose((_ufunc, "accumulate"))(_accumulate_for(_ufunc))


@decompose(np.diff)
def diff(a: Any, n: int = 1, axis: int = -1, **kwargs: Any) -> Any:
    """``np.diff``: ``a[1:] - a[:-1]`` along ``axis``, ``n`` times (aligned by dispatch)."""
    if kwargs:
        raise UnsupportedError("np.diff(..., prepend=/append=) on DArrays is not supported yet")
    if n < 0:
        raise ArgumentError(f"np.diff: order must be non-negative but got {n}")
    if a.ndim == 0:
        raise ArgumentError("diff requires input that is at least one dimensional")
    axis = operator.index(axis)
    if not -a.ndim <= axis < a.ndim:
        raise AxisArgumentError(axis, a.ndim)
    axis %= a.ndim
    head = tuple(slice(None) for _ in range(axis))
    for _ in range(n):
        a = a[head + (slice(1, None),)] - a[head + (slice(None, -1),)]
    return a
