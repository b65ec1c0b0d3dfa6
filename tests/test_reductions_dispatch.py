"""Reductions on DArrays (np.sum & co., ndarray methods, ufunc.reduce) agree with NumPy."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import Verdict, assert_all, assert_raises_all

FUNCS = [np.sum, np.prod, np.max, np.min, np.mean, np.any, np.all, np.count_nonzero, np.nansum]


def sources(mesh: dmesh.DeviceMesh, a: np.ndarray) -> Iterator[dmesh.DArray]:
    choices = [Replicate()] + [Shard(d) for d in range(a.ndim)] + [Partial("sum")]
    for placements in itertools.product(choices, repeat=mesh.ndim):
        yield dmesh.distribute(a, mesh, list(placements))


def compare(
    comm: MPI.Intracomm, got: dmesh.DArray, want: np.ndarray, verdict: Verdict | None = None
) -> None:
    """``got`` gathered is ``want``: agreed at once, or recorded in ``verdict``."""
    full = np.asarray(got.full_array())
    kind = np.asarray(want).dtype.kind
    tol = {"rtol": 1e-12, "atol": 1e-12} if kind in "fc" else {}
    check = verdict or Verdict(comm)
    check.equal(full, np.asarray(want), **tol)
    if verdict is None:
        check.agree()


@pytest.mark.parametrize("func", FUNCS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
def test_reductions(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, func: object, axis: object
) -> None:
    a = (np.arange(35, dtype=np.float64).reshape(5, 7) % 4) - 1.0
    with Verdict(comm) as verdict:
        for d in sources(mesh, a):
            for keepdims in (False, True):
                want = func(a, axis=axis, keepdims=keepdims)
                compare(comm, func(d, axis=axis, keepdims=keepdims), want, verdict)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.float32])
def test_dtypes(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: type) -> None:
    a = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    with Verdict(comm) as verdict:
        for d in sources(mesh, a):
            for func in (np.sum, np.max, np.min, np.any, np.all, np.count_nonzero):
                for axis in (None, 1, (0, 2)):
                    want = func(a, axis=axis)
                    got = func(d, axis=axis)
                    dtype_ok = got.dtype == np.asarray(want).dtype
                    verdict.check(dtype_ok, f"{func.__name__}: {got.dtype}")
                    compare(comm, got, want, verdict)


def test_uneven_and_empty_blocks(comm: MPI.Intracomm) -> None:
    """min/max over a sharded axis where some ranks hold nothing of it."""
    with dmesh.init_mesh(comm=comm) as mesh:
        n, rank = mesh.size(), mesh.rank
        a = np.arange(6.0).reshape(3, 2) - 2.5
        sizes = [3] + [0] * (n - 1)
        block = a[sum(sizes[:rank]) : sum(sizes[: rank + 1])]
        d = dmesh.from_local(block, mesh, [Shard(0)])
        for func in (np.max, np.min, np.sum, np.mean, np.prod):
            compare(comm, func(d, axis=0), func(a, axis=0))
            compare(comm, func(d), func(a))


def test_methods_ufunc_reduce_and_scalars(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = np.arange(12.0).reshape(3, 4)
    d = dmesh.distribute(a, mesh, [Shard(1)] + [Replicate()] * (mesh.ndim - 1))
    compare(comm, d.sum(axis=0), a.sum(axis=0))
    compare(comm, d.mean(), a.mean())
    compare(comm, d.max(axis=1, keepdims=True), a.max(axis=1, keepdims=True))
    compare(comm, np.add.reduce(d, 1), np.add.reduce(a, 1))
    compare(comm, np.maximum.reduce(d, axis=0), np.maximum.reduce(a, axis=0))
    assert_all(comm, float(d.sum()) == a.sum() and int(d.max()) == 11 and bool(d.any()))


def test_deferred_partial_result(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = np.arange(12.0).reshape(4, 3)
    d = dmesh.distribute(a, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    total = np.sum(d, axis=0)
    assert_all(comm, total.placements[0] == Partial("sum"), repr(total))
    doubled = total * 2  # float terms: reduced before the product (0 * inf would be NaN)
    assert_all(comm, not doubled.placements[0].is_partial(), repr(doubled))
    compare(comm, doubled, a.sum(axis=0) * 2)
    counts = np.sum(dmesh.distribute(a.astype(np.int64), mesh, d.placements), axis=0)
    doubled = counts * 2  # integer terms times a Python int: still partial
    assert_all(comm, doubled.placements[0] == Partial("sum"), repr(doubled))
    compare(comm, doubled, a.astype(np.int64).sum(axis=0) * 2)


def test_reduction_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    d = dmesh.distribute(np.ones((3, 4)), mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, ValueError, np.sum, d, axis=2, match="out of bounds")
    assert_raises_all(comm, ValueError, np.sum, d, axis=(0, 0), match="duplicate")
    assert_raises_all(comm, NotImplementedError, np.nansum, d, where=d > 0, match="where")
    assert_raises_all(comm, ValueError, bool, d, match="ambiguous")
    empty = dmesh.distribute(np.ones((0, 2)), mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, ValueError, np.max, empty, axis=0, match="zero-size")
