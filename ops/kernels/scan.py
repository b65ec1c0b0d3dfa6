"""``cumsum``/``cumprod`` (their nan forms, ``cumulative_sum``/``cumulative_prod``) and
``ufunc.accumulate`` along a sharded axis: a local scan plus an exclusive scan of block
totals; and ``diff`` as slices and a subtraction.

Each rank scans its block; the last slice of that scan is its block total.
The ranks of the mesh dims that shard the axis all-gather the totals (the
size of one slice, not of the block), in block order, and each rank combines
the totals of the blocks before its own, in order (as NumPy's sequential scan
would: ``-0.0`` stays ``-0.0``), into every element of its scan. The layout
does not change. Float results can differ from NumPy's sequential scan in the
last bits (the sums are grouped differently). Without an axis an N-D array is
flattened first (``np.ravel``, C order), as NumPy does.

What a scan does besides its NumPy work and its message follows from the
operand's spec and the static arguments alone (the result's spec, the group
to gather over, where this rank's block sits in it): a :class:`_Plan`, made
once per (spec, axis, function, ``dtype=``) and kept, so that a repeated call
is a lookup, the block's own scan and the one all-gather of totals.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh import _hooks
from dmesh.collectives import tracing
from dmesh.collectives.device import array_module
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


@dataclass(frozen=True)
class _Plan:
    """What a scan along ``axis`` of an operand of one spec does, found from the spec alone."""

    axis: int
    spec: DArraySpec  # the result's: the operand's layout, the scan's dtype
    group: Any  # the sub-mesh of the mesh dims that shard the axis; None: no exchange
    solo: bool  # the group is this rank alone (see _run)
    sizes: tuple[int, ...]  # one slice of totals per rank of the group (all_gather's sizes=)
    last: tuple[slice, ...]  # this block's last slice along the axis (the axis kept, length 1)
    empty: bool  # this block has no element along the axis: it sends zeros, skipped by all
    send_shape: tuple[int, ...]  # the slice sent: (1, *the block's shape off the axis)
    before: Any  # the totals to combine: a rank, a slice, a list of ranks; None: no element before
    carry_shape: tuple[int, ...]  # the combined total, broadcast along the axis


# (spec, axis, function name, dtype=, its type) -> plan; only calls that passed their
# checks, on operands without partial terms. Bounded: specs hold meshes.
_plans: dict[tuple[Any, ...], _Plan] = {}


def _plan(spec: DArraySpec, axis: int, dtype: np.dtype) -> _Plan:
    """The plan of a scan along ``axis`` (checked) of ``spec`` (no partial terms) into ``dtype``."""
    layout = spec.layout
    mesh = spec.mesh
    result = DArraySpec(mesh, layout, dtype)
    mesh_dims = sharding_mesh_dims(layout.placements, axis)
    block_shape = spec.local_shape()
    rest = block_shape[:axis] + block_shape[axis + 1 :]
    carry_shape = block_shape[:axis] + (1,) + block_shape[axis + 1 :]
    last = (slice(None),) * axis + (slice(-1, None),)
    if not mesh_dims or mesh.coordinate is None:
        return _Plan(axis, result, None, True, (), last, False, (1, *rest), None, carry_shape)
    group = mesh[mesh_dims]  # (collective the first time for several mesh dims: Cart_sub)
    rank = group.comm().Get_rank()  # rank order there is block order
    lengths = layout.sizes(axis)
    ranks = [q for q in range(rank) if lengths[q]]
    before: Any = None
    if len(ranks) == 1:
        before = ranks[0]
    elif ranks:
        before = slice(0, rank) if len(ranks) == rank else ranks  # (a slice: a view)
    return _Plan(
        axis=axis,
        spec=result,
        group=group,
        solo=len(lengths) == 1,
        sizes=(1,) * len(lengths),
        last=last,
        empty=not lengths[rank],
        send_shape=(1, *rest),
        before=before,
        carry_shape=carry_shape,
    )


def _run(plan: _Plan, block: Any, ufunc: np.ufunc, watched: bool) -> DArray:
    """The planned scan, from this rank's scanned block (collective where the plan exchanges).

    A group of one rank has nothing to exchange; its all-gather is still made
    while a debug tool watches (``watched``), which records it as
    ``dmesh.scaling.cumulative`` counts it.
    """
    spec = plan.spec
    if plan.group is None or (plan.solo and not watched):
        return DArray(block, spec)
    if plan.empty:  # its total is skipped by every rank (every rank knows the sizes)
        total = array_module(block).zeros(plan.send_shape, block.dtype)
    else:  # (a length-1 axis moves to the front without reordering: a reshape)
        total = array_module(block).ascontiguousarray(block[plan.last]).reshape(plan.send_shape)
    totals = coll.all_gather(total, 0, plan.group.comm(), sizes=plan.sizes)  # in block order
    before = plan.before
    if before is None:
        return DArray(block, spec)
    if type(before) is int:
        carry = totals[before]
    else:  # in order, from the first total (NumPy's scan: reduce would start from 0.0)
        carry = ufunc.accumulate(totals[before], axis=0, dtype=block.dtype)[-1]
    carry = carry.reshape(plan.carry_shape)
    if type(block) is np.ndarray:  # (the block is the scan's own new array)
        return DArray(ufunc(carry, block, out=block, dtype=block.dtype), spec)
    return DArray(ufunc(carry, block, dtype=block.dtype), spec)


def _scan(
    a: Any,
    axis: Any,
    dtype: Any,
    out: Any,
    ufunc: np.ufunc,
    local_scan: Callable[[Any, int], Any],
    name: str,
) -> DArray:
    """Scan ``a`` along ``axis`` with ``local_scan`` on each block, then ``ufunc`` with the
    total of the blocks before (one all-gather of block totals). ``dtype`` is the one
    ``local_scan`` was made with (a key of the plan)."""
    if out is not None:  # NumPy casts the scan into out (unsafe, as ufunc.accumulate)
        return write_out(name, out, lambda: _scan(a, axis, dtype, None, ufunc, local_scan, name))
    if axis is None:  # NumPy scans the flattened array, in C order
        if a.ndim != 1:
            a = np.ravel(a)
        axis = 0
    key = None
    if type(a) is DArray and type(axis) is int:
        key = (a._spec, axis, name, dtype, type(dtype))
        try:
            plan = _plans.get(key)
        except TypeError:  # an unhashable dtype= (a structured description): not kept
            key = plan = None
        # Seen before (its checks passed then); not while dmesh.compile records or holds
        # waiting ops (a.local runs them first), nor while a debug tool watches.
        if plan is not None and _hooks.before_block_access is None and not tracing.hooked:
            block = a._local
            if type(block) is np.ndarray and _hooks.recorder is None:
                return _run(plan, local_scan(block, plan.axis), ufunc, False)
    axis = operator.index(axis)
    if not -a.ndim <= axis < a.ndim:
        raise AxisArgumentError(axis, a.ndim, f"np.{name}")
    axis %= a.ndim
    a = a.reduce_partials()
    block = local_scan(a.local, axis)
    plan = _plan(a.spec, axis, np.dtype(block.dtype))
    if key is not None and key[0] is a._spec:  # (partial terms: reduced first, each call)
        if len(_plans) >= 1024:
            _plans.clear()
        _plans[key] = plan
    return _run(plan, block, ufunc, tracing.hooked)


@decompose(np.cumsum)
def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> DArray:
    """``np.cumsum`` on a DArray (collective when the axis is sharded)."""
    scan = lambda b, ax: b.cumsum(ax, dtype)  # noqa: E731  (np.cumsum's own call)
    return _scan(a, axis, dtype, out, np.add, scan, "cumsum")


@decompose(np.cumprod)
def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> DArray:
    """``np.cumprod`` on a DArray (collective when the axis is sharded)."""
    scan = lambda b, ax: b.cumprod(ax, dtype)  # noqa: E731  (np.cumprod's own call)
    return _scan(a, axis, dtype, out, np.multiply, scan, "cumprod")


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
    result = _scan(x, axis, dtype, None, ufunc, scan, name)
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
        return _scan(array, axis, dtype, out, ufunc, scan, name)

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
