"""``np.lexsort``, ``np.partition`` and ``np.argpartition`` of DArrays against NumPy at any
rank count. Along an axis that is whole on each rank (or made so) the result is NumPy's
exactly; a 1-D array sharded along its axis is sorted (a partition at every ``kth``), so
there the partition property is checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI
from set_layouts import check, layouts

import dmesh
from dmesh import Replicate, Shard
from helpers import BitVerdict, assert_raises_all

_R = np.random.default_rng(3)
K0 = _R.integers(0, 3, 19).astype(np.float64)
K0[[3, 11]] = [np.nan, -0.0]
K1 = _R.integers(0, 4, 19)
K1[5] = np.iinfo(np.int64).min
M = _R.normal(size=(7, 9))
M[2, 3], M[5, 1], M[0, 0] = np.nan, np.inf, -0.0


def test_lexsort(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for label, k0 in layouts(mesh, K0):
            k1 = dmesh.distribute(K1, mesh, [Replicate()] * mesh.ndim)
            check(verdict, f"{label} (k0, k1)", np.lexsort((k0, k1)), np.lexsort((K0, K1)))
            check(verdict, f"{label} (K1, k0)", np.lexsort((K1, k0)), np.lexsort((K1, K0)))
            check(verdict, f"{label} one key", np.lexsort((k0,)), np.lexsort((K0,)))
        stacked = np.stack([K0, K1.astype(np.float64)])
        for label, s in layouts(mesh, stacked):
            check(verdict, f"2-D keys {label}", np.lexsort(s), np.lexsort(stacked))
        for label, m in layouts(mesh, M):
            for axis in (0, 1):
                check(verdict, f"{label} axis {axis}", np.lexsort((m, m > 0), axis=axis),
                      np.lexsort((M, M > 0), axis=axis))  # fmt: skip
        empty = np.zeros(0)
        for label, e in layouts(mesh, empty):
            check(verdict, f"empty {label}", np.lexsort((e,)), np.lexsort((empty,)))


@pytest.mark.parametrize("indices", [False, True])
def test_partition_whole_axis(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, indices: bool) -> None:
    """N-D (any axis sharded or not) and replicated 1-D: NumPy's exact arrangement."""
    func = np.argpartition if indices else np.partition
    with BitVerdict(comm) as verdict:
        for label, m in layouts(mesh, M):
            for axis, kth in ((0, 2), (1, [0, 4, -1]), (-1, 8), (None, [5, 60])):
                if axis is None and label != "replicated":
                    continue  # flattened: a sharded 1-D array (test_partition_sharded_1d)
                check(verdict, f"{label} {axis} {kth}", func(m, kth, axis=axis),
                      func(M, kth, axis=axis))  # fmt: skip
        v = M[0]
        r = dmesh.distribute(v, mesh, [Replicate()] * mesh.ndim)
        check(verdict, "replicated 1-D", func(r, 3), func(v, 3))


@pytest.mark.parametrize("indices", [False, True])
def test_partition_sharded_1d(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, indices: bool) -> None:
    """A sharded 1-D array comes back sorted: a valid partition at every kth."""
    v = np.concatenate([M.ravel(), [np.nan, 1.0, 1.0]])
    s = np.sort(v)
    func = np.argpartition if indices else np.partition
    with BitVerdict(comm) as verdict:
        for label, x in layouts(mesh, v):
            if not any(p.is_shard() for p in x.placements):
                continue
            for kth in (0, 30, -1, [2, 40]):
                got = np.asarray(func(x, kth).full_array())
                values = v[got] if indices else got
                ks = np.atleast_1d(kth)
                ok = np.array_equal(values[ks], s[ks], equal_nan=True)
                for k in ks % v.size:
                    ok = ok and bool(np.all(~(values[:k] > s[k])) and np.all(~(values[k:] < s[k])))
                verdict.check(ok and values.shape == v.shape, f"{label} kth {kth}: {values}")
                verdict.bits(f"{label} {kth}", got)
                if indices:
                    verdict.check(sorted(got.tolist()) == list(range(v.size)), f"{label}: {got}")


def test_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(M[0], mesh, [Shard(0)] * mesh.ndim)
    for func in (np.partition, np.argpartition):
        assert_raises_all(comm, ValueError, func, x, 9, match="out of bounds")
        assert_raises_all(comm, ValueError, func, x, [0, -10], match="out of bounds")
        assert_raises_all(comm, TypeError, func, x, 1.5, match="integer")
        assert_raises_all(comm, NotImplementedError, func, x, 1, kind="quick", match="kind")
    y = dmesh.distribute(K1[:5], mesh)
    assert_raises_all(comm, ValueError, np.lexsort, (x, y), match="shape")
