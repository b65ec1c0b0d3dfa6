"""The sort and unique formulas of ``dmesh.scaling.sorting`` against ``CommMode`` and NumPy.

On every 1-D and 2-D mesh of the world size: ``np.sort``/``np.argsort`` of
1-D arrays sharded (over one mesh dim, or nested over two) and replicated,
of 2-D arrays along a sharded and an unsharded axis, and ``np.unique`` with
and without its ``return_*`` results. Lengths give even, uneven and empty
blocks at 1-4 ranks; the data are random with repeats, sorted, reversed and
constant (every element to one block: the worst case); dtypes are float64,
int32 and complex128. The sample sort's destination counts come from the
whole input, computed with NumPy (``sample_sort_counts``), never from what
was recorded. Each call's collectives must be the formula's, exactly, and
the values NumPy's.
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
from dmesh.core.layout import sharding_mesh_dims
from dmesh.core.placement import Placement
from dmesh.scaling.sorting import argsort, sample_sort_counts, sort, unique
from helpers import Verdict

DTYPES = [np.float64, np.int32, np.complex128]
# 12 splits evenly at 1, 2, 3, 4 ranks; 7 unevenly; 3 leaves an empty block at 4.
LENGTHS = [12, 7, 3]


def data(kind: str, n: int, dtype: Any) -> np.ndarray:
    rng = np.random.default_rng(n)
    values = {
        "random": rng.integers(0, 6, n),
        "sorted": np.arange(n),
        "reversed": np.arange(n)[::-1],
        "constant": np.full(n, 3),
    }[kind]
    out = values.astype(dtype)
    return out - 0.5j * (values % 2) if out.dtype.kind == "c" else out


def one_d(mesh_ndim: int) -> list[tuple[Placement, ...]]:
    if mesh_ndim == 1:
        return [(Shard(0),), (Replicate(),)]
    return [(Shard(0), Replicate()), (Replicate(), Shard(0)), (Shard(0), Shard(0)),
            (Replicate(), Replicate())]  # fmt: skip


def blocks(mesh: dmesh.DeviceMesh, placements: tuple[Placement, ...]) -> int:
    return math.prod(mesh.shape[m] for m in sharding_mesh_dims(placements, 0))


def test_sort_1d(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        for n, dtype, kind in itertools.product(LENGTHS, DTYPES, ["random", "constant"]):
            full = data(kind, n, dtype)
            for placements in one_d(m.ndim):
                a = dmesh.distribute(full, m, list(placements))
                received = sample_sort_counts(full, blocks(m, placements)).sum(axis=0).tolist()
                label = f"sort of {kind} {full.dtype}[{n}] {placements}"
                s = full.dtype.itemsize
                out, got = recorded(partial(np.sort, a))
                check_traffic(m, sort(m.shape, (n,), s, placements, 0, received), got, label)
                v.equal(out.local, np.sort(full)[out.spec.layout.slices(m.coordinate)])
                out, got = recorded(partial(np.argsort, a, kind="stable"))
                check_traffic(m, argsort(m.shape, (n,), s, placements, -1, received), got, label)
                want = np.argsort(full, kind="stable")
                v.equal(out.local, want[out.spec.layout.slices(m.coordinate)])


def test_sort_data_shapes(traffic_mesh: dmesh.DeviceMesh) -> None:
    """Sorted and reversed data (few elements cross, or all do), float64, sharded over the mesh."""
    m = traffic_mesh
    placements = (Shard(0),) * m.ndim
    k = blocks(m, placements)
    with Verdict(m.comm()) as v:
        for n, kind in itertools.product([12, 5], ["sorted", "reversed"]):
            full = data(kind, n, np.float64)
            a = dmesh.distribute(full, m, list(placements))
            counts = sample_sort_counts(full, k)
            out, got = recorded(partial(np.sort, a))
            predicted = sort(m.shape, (n,), 8, placements, None, counts.sum(axis=0).tolist())
            check_traffic(m, predicted, got, f"sort of {kind} [{n}]")
            v.equal(out.local, np.sort(full)[out.spec.layout.slices(m.coordinate)])


def test_sort_2d(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    every = [(Shard(0),), (Shard(1),)] if m.ndim == 1 else [
        (Shard(0), Shard(1)), (Shard(1), Shard(0)), (Shard(0), Replicate()),
        (Replicate(), Shard(1))]  # fmt: skip
    with Verdict(m.comm()) as v:
        for shape, dtype in [((6, 4), np.float64), ((5, 3), np.int32), ((3, 2), np.complex128)]:
            full = data("random", math.prod(shape), dtype).reshape(shape)
            for placements, axis in itertools.product(every, [0, 1, -1]):
                a = dmesh.distribute(full, m, list(placements))
                s = full.dtype.itemsize
                label = f"sort of {full.dtype}{list(shape)} {placements} axis {axis}"
                out, got = recorded(partial(np.sort, a, axis=axis))
                check_traffic(m, sort(m.shape, shape, s, placements, axis), got, label)
                v.equal(out.local, np.sort(full, axis=axis)[out.spec.layout.slices(m.coordinate)])
                out, got = recorded(partial(np.argsort, a, axis=axis, kind="stable"))
                check_traffic(m, argsort(m.shape, shape, s, placements, axis), got, label)
                want = np.argsort(full, axis=axis, kind="stable")
                v.equal(out.local, want[out.spec.layout.slices(m.coordinate)])


NUMPY_UNIQUE: Any = np.unique  # called with its flags as positional arguments
FLAGS = [(False, False, False), (True, False, False), (False, True, False),
         (False, False, True), (True, True, True)]  # fmt: skip


def test_unique(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    cases: list[tuple[tuple[int, ...], Any]] = [
        ((12,), np.float64), ((7,), np.int32), ((3,), np.complex128), ((5, 3), np.float64)
    ]  # fmt: skip
    with Verdict(m.comm()) as v:
        for (shape, dtype), kind in itertools.product(cases, ["random", "constant"]):
            full = data(kind, math.prod(shape), dtype).reshape(shape)
            for placements in one_d(m.ndim):
                a = dmesh.distribute(full, m, list(placements))
                k = blocks(m, placements)
                rows = a.spec.layout.sizes(0)
                lengths = [r * math.prod(shape[1:]) for r in rows]
                counts = sample_sort_counts(full, k, lengths)
                s = full.dtype.itemsize
                for flags in FLAGS:
                    label = f"unique{flags} of {kind} {full.dtype}{list(shape)} {placements}"
                    out, got = recorded(partial(np.unique, a, *flags))
                    predicted = unique(m.shape, shape, s, placements,
                                       counts.sum(axis=0).tolist(), *flags)  # fmt: skip
                    check_traffic(m, predicted, got, label)
                    want = NUMPY_UNIQUE(full, *flags)
                    outs = out if isinstance(out, tuple) else (out,)
                    wants = want if isinstance(want, tuple) else (want,)
                    for o, w in zip(outs, wants):
                        w = np.reshape(w, o.shape)
                        v.equal(o.local, w[o.spec.layout.slices(m.coordinate)])
