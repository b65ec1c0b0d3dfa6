"""``np.union1d``, ``np.intersect1d``, ``np.setdiff1d``, ``np.setxor1d`` of DArrays.

NumPy writes them as a sort of the two (flattened, for most made unique)
arrays concatenated, then a comparison of each sorted element with its
neighbours. dmesh does the same without concatenating on one rank: each
element is contributed once, by the first replica of its block (the rank at
coordinate 0 of the mesh dims that do not shard it), tagged with the array it
came from and its flat position, and the records are sample-sorted over the
whole mesh (``records.sort_records``) by value, then tag, then position: the
order of NumPy's stable sort of the concatenation, so that of two values that
compare equal (``-0.0`` and ``0.0``, NaNs of either sign) the one NumPy keeps
is kept. The neighbours across block edges come from one small all-gather.
Results are 1-D DArrays sharded over every mesh dim, with uneven blocks in
global (sorted) order. ``setdiff1d`` keeps its first argument's order and
layout and asks ``np.isin`` (``search.py``) which elements the second lacks.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Replicate
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels.records import edges, sort_records
from dmesh.ops.kernels.routing import as_replicated, owner_comm, wrap_uneven
from dmesh.ops.kernels.search import isin
from dmesh.ops.kernels.sort import _unique
from dmesh.ops.registry import decompose

# NumPy's named tuples (documented result types; not exported by name).
from numpy.lib._arraysetops_impl import (  # isort: skip
    UniqueAllResult,
    UniqueCountsResult,
    UniqueInverseResult,
)


def _operands(ar1: Any, ar2: Any) -> tuple[DArray, DArray, Any]:
    """Both as DArrays on one mesh (partial terms reduced), on the host."""
    mesh = next(x.mesh for x in (ar1, ar2) if isinstance(x, DArray))
    return as_replicated(ar1, mesh), as_replicated(ar2, mesh), mesh


def _flat(x: DArray) -> DArray:
    """``x`` flattened in C order, sharded along dim 0 only (``np.ravel`` moves it if needed)."""
    return x if x.ndim == 1 else cast(DArray, np.ravel(x))


def _contribution(flat: DArray) -> tuple[np.ndarray, np.ndarray]:
    """(values, flat positions) of the elements this rank contributes: none off the first replica.

    Of the ranks holding one block, only the one at coordinate 0 of every
    mesh dim that does not shard it contributes, so each element comes once;
    those ranks, in mesh rank order, hold the flat array in order.
    """
    coord = flat.mesh.coordinate
    sharding = sharding_mesh_dims(flat.placements, 0)
    block = np.asarray(flat.local).reshape(-1)
    if any(coord[m] for m in range(flat.mesh.ndim) if m not in sharding):
        block = block[:0]
    start = flat.spec.offsets()[0] if flat.ndim else 0
    return block, np.arange(start, start + block.size, dtype=np.intp)


def _empty_result(mesh: Any, dtype: Any) -> DArray:
    """What a rank outside the mesh returns (it cannot know the length)."""
    layout = Layout(mesh.shape, (Replicate(),) * mesh.ndim, (0,), (None,))
    return DArray(np.empty(0, dtype), DArraySpec(mesh, layout, np.dtype(dtype)))


def _pooled(arrays: list[DArray], dtype: Any, payload: list[np.ndarray] | None = None
            ) -> tuple[list[np.ndarray], list[np.ndarray], Any]:  # fmt: skip
    """The arrays' elements sorted over the whole mesh by (value, array, position).

    Returns the sorted keys ``[values, tags, positions]``, the sorted
    ``payload`` arrays (given per contributed element, arrays in order) and
    the mesh communicator.
    """
    values, tags, positions = [], [], []
    for tag, x in enumerate(arrays):
        v, pos = _contribution(_flat(x))
        values.append(v.astype(dtype, copy=False))
        tags.append(np.full(v.size, tag, dtype=np.int8))
        positions.append(pos)
    comm = arrays[0].mesh.comm()
    keys = [np.concatenate(values), np.concatenate(tags), np.concatenate(positions)]
    return (*sort_records(keys, payload or [], comm), comm)


def _result(local: np.ndarray, mesh: Any, comm: Any) -> DArray:
    return wrap_uneven(local, mesh, tuple(range(mesh.ndim)), comm)


def _common_dtype(a: DArray, b: DArray) -> np.dtype:
    return np.result_type(a.dtype, b.dtype)


@decompose(np.union1d)
def union1d(ar1: Any, ar2: Any) -> DArray:
    """``np.union1d`` with DArrays: sorted unique values of both (collective)."""
    a, b, mesh = _operands(ar1, ar2)
    dtype = _common_dtype(a, b)
    if not mesh.is_member:
        return _empty_result(mesh, dtype)
    (values, _, _), _, comm = _pooled([a, b], dtype)
    previous, _ = edges(values, comm)
    if not values.size:
        return _result(values, mesh, comm)
    # Each element's predecessor; the first element of all has none and starts a run.
    before = np.concatenate([previous, values[:-1]])
    tail = values[values.size - before.size :]
    same = before == tail
    if values.dtype.kind in "fc":  # np.unique's equal_nan: NaNs are one value
        same |= np.isnan(before) & np.isnan(tail)
    first = np.ones(values.size, dtype=bool)
    first[values.size - before.size :] = ~same
    return _result(values[first], mesh, comm)


def _uniques(a: DArray, b: DArray, assume_unique: bool) -> tuple[DArray, DArray]:
    if assume_unique:
        return a, b
    return cast(DArray, _unique(a)), cast(DArray, _unique(b))


@decompose(np.setxor1d)
def setxor1d(ar1: Any, ar2: Any, assume_unique: Any = False) -> DArray:
    """``np.setxor1d`` with DArrays: the sorted values in exactly one of them (collective)."""
    a, b, mesh = _operands(ar1, ar2)
    dtype = _common_dtype(a, b)
    if not mesh.is_member:
        return _empty_result(mesh, dtype)
    a, b = _uniques(a, b, bool(assume_unique))
    (values, _, _), _, comm = _pooled([a, b], dtype)
    previous, following = edges(values, comm)
    if not values.size:
        return _result(values, mesh, comm)
    # NumPy's flags: differs from the one before and from the one after (NaN always differs).
    flag = np.ones(values.size + 1, dtype=bool)
    flag[1:-1] = values[1:] != values[:-1]
    if previous.size:
        flag[0] = bool(previous[0] != values[0])
    if following.size:
        flag[-1] = bool(values[-1] != following[0])
    return _result(values[flag[1:] & flag[:-1]], mesh, comm)


@decompose(np.intersect1d)
def intersect1d(ar1: Any, ar2: Any, assume_unique: Any = False, return_indices: Any = False
                ) -> Any:  # fmt: skip
    """``np.intersect1d`` with DArrays (collective); with ``return_indices``, NumPy's indices too.

    A value is in the result where the sorted records hold it twice in a
    row (NumPy's ``aux[1:] == aux[:-1]``), the first from ``ar1``. Its
    indices: the first occurrences in each array (``np.unique``'s
    ``return_index``), or with ``assume_unique`` the positions NumPy's stable
    sort of the concatenation gives.
    """
    a, b, mesh = _operands(ar1, ar2)
    dtype = _common_dtype(a, b)
    want = bool(return_indices)
    if not mesh.is_member:
        empty = _empty_result(mesh, dtype)
        index = _empty_result(mesh, np.intp)
        return (empty, index, index) if want else empty
    if assume_unique:
        size1 = a.size
        x, y = a, b
        payload = None
    else:
        if want:
            x, i1 = cast(tuple[DArray, DArray], _unique(a, return_index=True))
            y, i2 = cast(tuple[DArray, DArray], _unique(b, return_index=True))
            payload = [np.concatenate([_contribution(i1)[0], _contribution(i2)[0]])]
        else:
            x, y = cast(DArray, _unique(a)), cast(DArray, _unique(b))
            payload = None
        size1 = 0
    (values, tags, positions), extra, comm = _pooled([x, y], dtype, payload)
    if assume_unique:  # NumPy's positions in the concatenation
        first_idx = positions + tags.astype(np.intp) * size1
        second_idx = first_idx - size1
    else:
        first_idx = second_idx = extra[0] if extra else positions
    _, next_value = edges(values, comm)
    _, next_index = edges(second_idx, comm) if want else (None, None)
    following = np.concatenate([values[1:], next_value])
    keep = np.zeros(values.size, dtype=bool)
    keep[: following.size] = values[: following.size] == following
    result = _result(values[keep], mesh, comm)
    if not want:
        return result
    assert next_index is not None
    after = np.concatenate([second_idx[1:], next_index])[: following.size]
    ind1 = _result(first_idx[keep].astype(np.intp), mesh, comm)
    ind2 = _result(after[keep[: after.size]].astype(np.intp), mesh, comm)
    return result, ind1, ind2


@decompose(np.setdiff1d)
def setdiff1d(ar1: Any, ar2: Any, assume_unique: Any = False) -> DArray:
    """``np.setdiff1d`` with DArrays: ``ar1``'s (unique, sorted) values not in ``ar2``.

    With ``assume_unique``, ``ar1`` flattened in its order, as NumPy. The
    result keeps ``ar1``'s sharding (uneven blocks); ``np.isin`` finds the
    values ``ar2`` lacks (collective when ``ar2`` is sharded).
    """
    a, b, mesh = _operands(ar1, ar2)
    if not mesh.is_member:
        return _empty_result(mesh, a.dtype)
    first = _flat(a) if assume_unique else cast(DArray, _unique(a))
    keep = isin(first, b, assume_unique=True, invert=True)
    local = np.asarray(first.local)[np.asarray(keep.local)]
    mesh_dims, comm = owner_comm(first)
    return wrap_uneven(local, mesh, mesh_dims, comm)


# -- the Array API's unique functions: np.unique with equal_nan=False -----------------------


@decompose(np.unique_values)
def unique_values(x: Any) -> DArray:
    """``np.unique_values``: the unique values, sorted (NumPy may leave integers unsorted)."""
    return cast(DArray, _unique(as_replicated(x, x.mesh), equal_nan=False))


@decompose(np.unique_counts)
def unique_counts(x: Any) -> Any:
    """``np.unique_counts``: (values, counts), as NumPy's named tuple."""
    values, counts = _unique(as_replicated(x, x.mesh), return_counts=True, equal_nan=False)
    return UniqueCountsResult(values, counts)


@decompose(np.unique_inverse)
def unique_inverse(x: Any) -> Any:
    """``np.unique_inverse``: (values, inverse_indices of ``x``'s shape and layout)."""
    values, inverse = _unique(as_replicated(x, x.mesh), return_inverse=True, equal_nan=False)
    return UniqueInverseResult(values, inverse)


@decompose(np.unique_all)
def unique_all(x: Any) -> Any:
    """``np.unique_all``: (values, indices, inverse_indices, counts)."""
    result = _unique(as_replicated(x, x.mesh), return_index=True, return_inverse=True,
                     return_counts=True, equal_nan=False)  # fmt: skip
    return UniqueAllResult(*result)
