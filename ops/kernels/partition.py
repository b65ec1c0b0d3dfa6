"""``np.lexsort``, ``np.partition`` and ``np.argpartition`` of DArrays.

Along an axis that no mesh dim shards, each rank runs NumPy on its blocks:
exactly NumPy's result (``partition``'s arrangement too, since NumPy selects
along each lane on its own). For an N-D array whose axis is sharded, the
sharding first moves to another dim (an all-to-all), as ``np.sort`` does.

A 1-D array sharded along its only axis:

- ``lexsort``: the keys' elements are sorted as records (last key first, then
  the others, then the global position: ``records.sort_records``), and the
  positions, in order, are the result (rebalanced).
- ``partition``/``argpartition``: the result is the distributed sort
  (``np.sort``, stable ``np.argsort``). A sorted array is a partition for every
  ``kth``, and NumPy leaves the order inside each part undefined; NumPy's own
  arrangement (its introselect on the whole array) could only be had by
  gathering the array, which dmesh never does.
"""

from __future__ import annotations

import operator
from typing import Any, cast

import numpy as np

from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    AxisArgumentError,
    UnsupportedError,
)
from dmesh.convert import blocks_on_host, blocks_to
from dmesh.core.placement import Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels.records import sort_records
from dmesh.ops.kernels.routing import as_replicated, owner_comm, wrap_uneven
from dmesh.ops.kernels.sort import _sort
from dmesh.ops.registry import decompose

__all__ = ["argpartition", "lexsort", "partition"]


def _axis(axis: Any, ndim: int, name: str) -> int:
    try:
        index = operator.index(axis)
    except TypeError as exc:
        raise ArgumentTypeError(f"{name}: axis must be an integer, got {axis!r}") from exc
    if not -max(ndim, 1) <= index < max(ndim, 1):
        raise AxisArgumentError(index, ndim, name)
    return index % max(ndim, 1)


def _sharded(a: DArray, axis: int) -> bool:
    return any(isinstance(p, Shard) and p.dim == axis for p in a.placements)


def _unshard(a: DArray, axis: int) -> DArray:
    """``a`` with ``axis`` whole on every rank: its sharding moved to another dim (N-D only)."""
    if not _sharded(a, axis):
        return a
    other = 0 if axis != 0 else 1
    placements = [Shard(other) if isinstance(p, Shard) and p.dim == axis else p
                  for p in a.placements]  # fmt: skip
    return a.redistribute(a.mesh, placements)


def _local(a: DArray, local: Any) -> DArray:
    return DArray(local, DArraySpec(a.mesh, a.spec.layout, local.dtype))


@decompose(np.lexsort)
def lexsort(keys: Any, axis: Any = -1) -> DArray:
    """``np.lexsort`` with DArray keys (the last key sorts first); collective when sharded.

    ``keys`` is a sequence of arrays of one shape (NumPy arrays are taken as
    replicated) or a DArray whose first axis holds the keys. The keys are
    aligned to the first DArray key's layout before sorting.
    """
    if isinstance(keys, DArray):
        if keys.ndim == 1:  # NumPy: each element a 0-d key; the answer is index 0
            keys = keys.reduce_partials()
            return _local(keys[0], np.zeros((), np.intp))
        keys = [keys[i] for i in range(keys.shape[0])]
    keys = list(keys)
    if not keys:
        raise ArgumentError("lexsort: need at least one key")
    mesh = next(k.mesh for k in keys if isinstance(k, DArray))
    darrays = [as_replicated(k, mesh) for k in keys]
    reference = next((k for k in darrays if any(p.is_shard() for p in k.placements)), darrays[0])
    if any(k.shape != reference.shape for k in darrays):
        raise ArgumentError(f"lexsort: all keys need one shape; got {[k.shape for k in darrays]}")
    if reference.ndim == 0:
        raise ArgumentError("lexsort: keys must be at least 1-D arrays")
    ax = _axis(axis, reference.ndim, "lexsort")
    hosts = [blocks_on_host(k.with_layout(reference.spec.layout))[0] for k in darrays]
    xp = blocks_on_host(reference)[1]
    if reference.ndim > 1 or not _sharded(reference, ax):
        hosts = [_unshard(k, ax) for k in hosts]
        first = hosts[0]
        if not first.mesh.is_member:
            return blocks_to(_local(first, np.empty(first.local.shape, np.intp)), xp)  # type: ignore[no-any-return]
        local = np.lexsort([np.asarray(k.local) for k in hosts], axis=ax)
        return blocks_to(_local(first, local.astype(np.intp, copy=False)), xp)  # type: ignore[no-any-return]
    first = hosts[0]
    if not first.mesh.is_member:
        return blocks_to(_local(first, np.empty(0, np.intp)), xp)  # type: ignore[no-any-return]
    mesh_dims, comm = owner_comm(first)
    start = first.spec.offsets()[0]
    positions = np.arange(start, start + first.local.shape[0], dtype=np.intp)
    ordered = [np.asarray(k.local) for k in reversed(hosts)]
    _, (indices,) = sort_records([*ordered, positions], [positions], comm)
    result = wrap_uneven(indices, first.mesh, mesh_dims, comm).rebalance()
    return blocks_to(result, xp)  # type: ignore[no-any-return]


def _kth(kth: Any, n: int) -> list[int]:
    """``kth`` as a list of ints in range, or NumPy's errors (every rank knows ``n``)."""
    values = np.asarray(kth)
    if values.dtype.kind not in "iub":
        raise ArgumentTypeError("partition: kth must be an integer or a sequence of integers")
    if values.ndim > 1:
        raise ArgumentError("partition: kth must be a scalar or a 1-D sequence")
    out = []
    for k in np.atleast_1d(values).tolist():
        if not -n <= k < n:
            raise ArgumentError(f"partition: kth(={k}) out of bounds ({n})")
        out.append(k)
    return out


def _partition(a: Any, kth: Any, axis: Any, kind: Any, order: Any, indices: bool) -> DArray:
    name = "argpartition" if indices else "partition"
    if kind != "introselect" or order is not None:
        raise UnsupportedError(
            f"np.{name} on DArrays takes kind='introselect' and no order= "
            f"(got kind={kind!r}, order={order!r})"
        )
    host, xp = blocks_on_host(as_replicated(a, a.mesh))
    if axis is None:
        host = cast(DArray, np.ravel(host))
        axis = 0
    ax = _axis(axis, host.ndim, name)
    if host.ndim == 0:
        raise ArgumentError(f"np.{name}: a 0-d array cannot be partitioned")
    ks = _kth(kth, host.shape[ax])
    if host.ndim == 1 and _sharded(host, ax):  # sorted is partitioned at every kth
        return blocks_to(_sort(host, ax, "stable", want_indices=indices), xp)  # type: ignore[no-any-return]
    host = _unshard(host, ax)
    if not host.mesh.is_member:
        dtype = np.intp if indices else host.dtype
        return blocks_to(_local(host, np.empty(host.local.shape, dtype)), xp)  # type: ignore[no-any-return]
    func = np.argpartition if indices else np.partition
    local = func(np.asarray(host.local), ks, axis=ax)
    return blocks_to(_local(host, local), xp)  # type: ignore[no-any-return]


@decompose(np.partition)
def partition(a: Any, kth: Any, axis: Any = -1, kind: Any = "introselect", order: Any = None
              ) -> DArray:  # fmt: skip
    """``np.partition`` of a DArray (collective when the axis is sharded); see the module."""
    return _partition(a, kth, axis, kind, order, indices=False)


@decompose(np.argpartition)
def argpartition(a: Any, kth: Any, axis: Any = -1, kind: Any = "introselect", order: Any = None
                 ) -> DArray:  # fmt: skip
    """``np.argpartition`` of a DArray: global indices along the axis; see the module."""
    return _partition(a, kth, axis, kind, order, indices=True)
