"""The fancy-indexing formulas of ``dmesh.scaling.indexing`` against ``CommMode`` and NumPy.

On every 1-D and 2-D mesh of the world size: ``np.take``/``a[idx]`` along a
sharded and an unsharded axis with an index every rank holds (1-D and 2-D,
negative entries, repeats) and with DArray indices (sharded like the axis,
replicated, sharded over another mesh dim, with uneven blocks), ``a[idx] =
v``, ``a[mask]`` and ``a[mask] = v``. Lengths give even, uneven and empty
blocks at 1-4 ranks; dtypes are float64, int32 and complex128. Each call's
collectives must be the formula's, exactly, and the values NumPy's.
"""

from __future__ import annotations

import itertools
import math
from functools import partial
from typing import Any

import numpy as np
from traffic_checks import check_traffic, recorded

import dmesh
from dmesh import Replicate, Shard
from dmesh.core.placement import Placement
from dmesh.scaling.indexing import mask_assign, mask_select, setitem, take
from helpers import Verdict

R = Replicate()
# 12 splits evenly at 1, 2, 3, 4 ranks; 7 and 5 unevenly; 3 leaves an empty block at 4.
CASES: list[tuple[tuple[int, ...], Any]] = [
    ((12,), np.float64), ((7,), np.int32), ((3,), np.complex128), ((5, 3), np.float64),
    ((4, 6), np.int32),
]  # fmt: skip


def data(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    values = np.arange(math.prod(shape)).reshape(shape) % 7 + 1
    out = values.astype(dtype)
    return out + 0.5j * values if out.dtype.kind == "c" else out


def layouts(ndim: int, mesh_ndim: int) -> list[tuple[Placement, ...]]:
    if mesh_ndim == 1:
        return [(Shard(d),) for d in range(ndim)] + [(R,)]
    every = [(Shard(0), R), (R, Shard(0)), (Shard(0), Shard(0)), (R, R),
             (Shard(0), Shard(1)), (Shard(1), Shard(0))]  # fmt: skip
    return [p for p in every if all(not isinstance(q, Shard) or q.dim < ndim for q in p)]


def index_layouts(mesh_ndim: int) -> list[tuple[Placement, ...]]:
    if mesh_ndim == 1:
        return [(Shard(0),), (R,)]
    return [(Shard(0), R), (R, Shard(0)), (Shard(0), Shard(0))]


def indices(n: int) -> list[np.ndarray]:
    """Replicated indices into an axis of ``n``: random with repeats and negatives, 2-D, short."""
    rng = np.random.default_rng(n)
    return [rng.integers(-n, n, 6), rng.integers(0, n, (2, 3)), np.array([n - 1, 0])]


def test_take_replicated_index(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        for (shape, dtype), placements in (
            (c, p) for c in CASES for p in layouts(len(c[0]), m.ndim)
        ):
            full = data(shape, dtype)
            a = dmesh.distribute(full, m, list(placements))
            for axis in range(len(shape)):
                for idx in indices(shape[axis]):
                    label = (
                        f"take {idx.tolist()} axis {axis} of {full.dtype}{list(shape)} {placements}"
                    )
                    out, got = recorded(partial(np.take, a, idx, axis))
                    predicted = take(m.shape, shape, full.dtype.itemsize, placements, idx, axis)
                    check_traffic(m, predicted, got, label)
                    want = np.take(full, idx, axis)
                    v.equal(out.local, want[out.spec.layout.slices(m.coordinate)])
            idx = indices(shape[0])[0]
            out, got = recorded(partial(a.__getitem__, idx))
            predicted = take(m.shape, shape, full.dtype.itemsize, placements, idx)
            check_traffic(m, predicted, got, f"a[idx] of {full.dtype}{list(shape)} {placements}")
            v.equal(out.local, full[idx][out.spec.layout.slices(m.coordinate)])


def test_take_darray_index(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        for (shape, dtype), placements in (
            (c, p) for c in CASES[:4] for p in layouts(len(c[0]), m.ndim)
        ):
            full = data(shape, dtype)
            a = dmesh.distribute(full, m, list(placements))
            for axis, index_placements in itertools.product(
                range(len(shape)), index_layouts(m.ndim)
            ):
                n = shape[axis]
                for idx in (np.random.default_rng(n).integers(-n, n, 5), np.array([1, n - 1])):
                    idx = idx.astype(np.int32 if n == 7 else np.int64)
                    i = dmesh.distribute(idx, m, list(index_placements))
                    label = (
                        f"take DArray {idx.tolist()} {index_placements} axis {axis} of "
                        f"{full.dtype}{list(shape)} {placements}"
                    )
                    out, got = recorded(partial(np.take, a, i, axis))
                    predicted = take(m.shape, shape, full.dtype.itemsize, placements, idx, axis,
                                     index_placements)  # fmt: skip
                    check_traffic(m, predicted, got, label)
                    want = np.take(full, idx, axis)
                    v.equal(out.local, want[out.spec.layout.slices(m.coordinate)])


def test_setitem(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        for (shape, dtype), placements in (
            (c, p) for c in CASES for p in layouts(len(c[0]), m.ndim)
        ):
            full = data(shape, dtype)
            s = full.dtype.itemsize
            for axis in range(len(shape)):
                n = shape[axis]
                key: tuple[Any, ...] = (slice(None),) * axis
                idx = np.random.default_rng(n).permutation(n)[: max(1, n // 2)] - n // 3
                for value in (
                    5,
                    np.arange(idx.size).reshape((-1,) + (1,) * (len(shape) - axis - 1)),
                ):
                    a = dmesh.distribute(full, m, list(placements))
                    label = f"a[{idx.tolist()}] = v axis {axis} of {full.dtype}{shape} {placements}"
                    _, got = recorded(partial(a.__setitem__, (*key, idx), value))
                    check_traffic(m, setitem(m.shape, shape, s, placements, idx, axis), got, label)
                    want = full.copy()
                    want[(*key, idx)] = value
                    v.equal(a.local, want[a.spec.layout.slices(m.coordinate)])
                for index_placements in index_layouts(m.ndim):  # a DArray index, a scalar value
                    a = dmesh.distribute(full, m, list(placements))
                    i = dmesh.distribute(idx, m, list(index_placements))
                    label = f"a[DArray {index_placements}] = 5 axis {axis} {placements}"
                    _, got = recorded(partial(a.__setitem__, (*key, i), 5))
                    predicted = setitem(m.shape, shape, s, placements, idx, axis, index_placements)
                    check_traffic(m, predicted, got, label)
                    want = full.copy()
                    want[(*key, idx)] = 5
                    v.equal(a.local, want[a.spec.layout.slices(m.coordinate)])


def test_masks(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        for (shape, dtype), placements in (
            (c, p) for c in CASES for p in layouts(len(c[0]), m.ndim)
        ):
            full = data(shape, dtype)
            s = full.dtype.itemsize
            mask_full = full.real > 3
            for mask_placements in (placements, (R,) * m.ndim):
                a = dmesh.distribute(full, m, list(placements))
                mask = dmesh.distribute(mask_full, m, list(mask_placements))
                label = f"a[mask {mask_placements}] of {full.dtype}{list(shape)} {placements}"
                out, got = recorded(partial(a.__getitem__, mask))
                predicted = mask_select(m.shape, shape, s, placements, mask_placements)
                check_traffic(m, predicted, got, label)
                v.equal(out.local, full[mask_full][out.spec.layout.slices(m.coordinate)])
                if len(shape) != 1:
                    continue
                positions = np.flatnonzero(mask_full)
                _, got = recorded(partial(a.__setitem__, mask, 9))
                predicted = mask_assign(m.shape, shape[0], s, placements, positions,
                                        mask_placements)  # fmt: skip
                check_traffic(m, predicted, got, "a[mask] = 9: " + label)
                want = full.copy()
                want[mask_full] = 9
                v.equal(a.local, want[a.spec.layout.slices(m.coordinate)])
                values = np.arange(positions.size, dtype=full.dtype)
                _, got = recorded(partial(a.__setitem__, mask, values))
                predicted = mask_assign(m.shape, shape[0], s, placements, positions,
                                        mask_placements, scalar=False)  # fmt: skip
                check_traffic(m, predicted, got, "a[mask] = values: " + label)
                want[mask_full] = values
                v.equal(a.local, want[a.spec.layout.slices(m.coordinate)])
