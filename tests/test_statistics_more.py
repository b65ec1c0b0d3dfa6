"""``np.average``, ``np.ptp``, ``np.cov`` and ``np.corrcoef`` of DArrays (issue 14, item 7):
NumPy's values (sums over sharded axes to 1e-12), dtypes and shapes at 1-4 ranks, the same
bits on every rank; balanced, uneven and empty blocks; errors on every rank."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from helpers import BitVerdict, assert_raises_all, flat_results

R = Replicate()


def _compare(verdict: BitVerdict, func: Callable[..., Any], args: tuple[Any, ...],
             plain: tuple[Any, ...], exact: bool = False, **kwargs: Any) -> None:  # fmt: skip
    where = f"{func.__name__}({[np.shape(p) for p in plain]}, {kwargs})"
    numpy_kwargs = {k: v.full_array() if isinstance(v, dmesh.DArray) else v
                    for k, v in kwargs.items()}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = flat_results(func(*plain, **numpy_kwargs))
        got = [np.asarray(x.full_array()) if isinstance(x, dmesh.DArray) else np.asarray(x)
               for x in flat_results(func(*args, **kwargs))]  # fmt: skip
    verdict.check(len(got) == len(want), f"{where}: {len(got)} results")
    for i, (g, w) in enumerate(zip(got, want)):
        verdict.bits(f"{where}[{i}]", g)
        w = np.asarray(w)
        ok = g.dtype == w.dtype and g.shape == w.shape
        if ok and exact:
            ok = np.array_equal(g, w, equal_nan=True)
        elif ok:
            tol = 1e-5 if g.dtype in (np.float32, np.complex64) else 1e-12
            ok = np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
        verdict.check(ok, f"{where}[{i}]: {g!r} != {w!r}")


def _layouts(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    rest = [R] * (mesh.ndim - 1)
    both = [[Shard(0), Shard(1)], [Shard(1), Shard(1)]] if mesh.ndim == 2 else []
    return [[Shard(0), *rest], [Shard(1), *rest], [R] * mesh.ndim, *both]


X = np.random.default_rng(21).standard_normal((7, 5))
XI = np.random.default_rng(22).integers(-100, 100, (7, 5))


def test_average(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    w = np.random.default_rng(3).uniform(0.1, 2, (7, 5))
    with BitVerdict(comm) as verdict:
        for placements in _layouts(mesh):
            for x in (X, XI):
                twice = np.concatenate([x, x])
                whole = dmesh.distribute(twice, mesh, placements)
                pairs = ((dmesh.distribute(x, mesh, placements), x), (whole[4:11], twice[4:11]))
                for a, y in pairs:  # balanced; uneven (some blocks empty)
                    for axis in (None, 0, 1, (0, 1)):
                        _compare(verdict, np.average, (a,), (y,), axis=axis)
                        _compare(verdict, np.average, (a,), (y,), axis=axis, returned=True)
                        _compare(verdict, np.average, (a,), (y,), axis=axis, weights=w)
                        dw = dmesh.distribute(w, mesh, placements)
                        _compare(verdict, np.average, (a,), (y,), axis=axis, weights=dw,
                                 returned=True, keepdims=True)  # fmt: skip
                    _compare(verdict, np.average, (a,), (y,), axis=0, weights=w[:, 0])
                    _compare(verdict, np.average, (a,), (y,), axis=1, weights=w[0], returned=True)


def test_ptp(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    hostile = X.copy()
    hostile[1, 2], hostile[4, 0] = np.inf, -0.0
    with BitVerdict(comm) as verdict:
        for placements in _layouts(mesh):
            for x in (X, XI, hostile, XI.astype(np.int8)):
                a = dmesh.distribute(x, mesh, placements)
                for axis in (None, 0, 1):
                    _compare(verdict, np.ptp, (a,), (x,), exact=True, axis=axis)
                    _compare(
                        verdict, np.ptp, (a[2:],), (x[2:],), exact=True, axis=axis, keepdims=True
                    )


def test_cov_and_corrcoef(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    y = np.random.default_rng(8).standard_normal((2, 5))
    with BitVerdict(comm) as verdict:
        for placements in _layouts(mesh):
            a = dmesh.distribute(X, mesh, placements)
            ai = dmesh.distribute(XI, mesh, placements)
            for kwargs in ({}, {"rowvar": False}, {"bias": True}, {"ddof": 3}, {"ddof": 5},
                           {"dtype": np.float32}):  # fmt: skip
                _compare(verdict, np.cov, (a,), (X,), **kwargs)
                _compare(verdict, np.cov, (ai,), (XI,), **kwargs)
            _compare(verdict, np.corrcoef, (a,), (X,))
            _compare(verdict, np.corrcoef, (a,), (X,), rowvar=False)
            b = dmesh.distribute(y, mesh, [Shard(1)] + [R] * (mesh.ndim - 1))
            _compare(verdict, np.cov, (a[:2], b), (X[:2], y))
            _compare(verdict, np.corrcoef, (a[:2], b), (X[:2], y))
        v = dmesh.distribute(X[:, 0], mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
        _compare(verdict, np.cov, (v,), (X[:, 0],))
        _compare(verdict, np.corrcoef, (v,), (X[:, 0],))
        c = X[:3] + 1j * X[3:6]
        dc = dmesh.distribute(c, mesh, [Shard(1)] + [R] * (mesh.ndim - 1))
        _compare(verdict, np.cov, (dc,), (c,))
        _compare(verdict, np.corrcoef, (dc,), (c,))
        p = dmesh.distribute(X, mesh, [Partial("sum")] + [R] * (mesh.ndim - 1))
        _compare(verdict, np.cov, (p,), (X,))


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(X, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    assert_raises_all(comm, ArgumentTypeError, np.average, a, weights=np.ones(7), match="Axis")
    assert_raises_all(
        comm, ArgumentError, np.average, a, axis=0, weights=np.ones(3), match="consistent"
    )
    assert_raises_all(comm, ArgumentError, np.average, a, weights=np.zeros((7, 5)), match="zero")
    assert_raises_all(comm, ArgumentError, np.cov, a, ddof=1.5, match="integer")
    assert_raises_all(comm, UnsupportedError, np.cov, a, fweights=np.ones(5, int), match="fweights")
    assert_raises_all(comm, UnsupportedError, np.ptp, a, out=np.zeros(5), match="out")
