"""``np.nanargmax``/``np.nanargmin`` and ``np.argmax``/``np.argmin`` of complex DArrays, and
the complex max/min kernel (``argextreme.extreme_values``) (issue 14, item 7): NumPy's
indices and values at 1-4 ranks (complex ordered lexicographically, the first NaN wins), the
same bits on every rank; an all-NaN slice raises ValueError on every rank, as NumPy."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from dmesh.collectives.errors import ArgumentError
from dmesh.ops.kernels.argextreme import extreme_values
from helpers import BitVerdict, assert_raises_all

R = Replicate()


def _compare(verdict: BitVerdict, func: Callable[..., Any], a: Any, x: np.ndarray,
             want: Any = None, **kwargs: Any) -> None:  # fmt: skip
    where = (
        f"{getattr(func, '__name__', func)}({x.dtype}{list(x.shape)}, {kwargs}) on {a.placements}"
    )
    want = np.asarray(func(x, **kwargs) if want is None else want)
    got = func(a, **kwargs).full_array()
    verdict.bits(where, got)
    ok = got.dtype == want.dtype and got.shape == want.shape
    verdict.check(ok and np.array_equal(got, want, equal_nan=True), f"{where}: {got!r} != {want!r}")


def _layouts(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    rest = [R] * (mesh.ndim - 1)
    both = [[Shard(0), Shard(1)], [Shard(1), Shard(1)]] if mesh.ndim == 2 else []
    return [[Shard(0), *rest], [Shard(1), *rest], [R] * mesh.ndim, *both]


def _floats() -> np.ndarray:
    x = np.random.default_rng(2).integers(-3, 3, (6, 5)).astype(float)
    x[0, :] = np.nan
    x[0, 2] = -1.0  # a row with one number
    x[2, 1], x[4, 4], x[3, 3] = np.nan, np.inf, -np.inf
    return x


def _complex() -> np.ndarray:
    rng = np.random.default_rng(6)
    re = rng.integers(-2, 2, (6, 5)).astype(float)  # ties in the real part
    return re + 1j * rng.integers(-2, 2, (6, 5))


def test_nanargmax_nanargmin(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = _floats()
    with BitVerdict(comm) as verdict:
        for placements in _layouts(mesh):
            twice = np.concatenate([x, x])
            whole = dmesh.distribute(twice, mesh, placements)
            for a, y in ((dmesh.distribute(x, mesh, placements), x), (whole[4:10], twice[4:10])):
                for func in (np.nanargmax, np.nanargmin):
                    _compare(verdict, func, a, y)
                    _compare(verdict, func, a, y, axis=1)
                    _compare(verdict, func, a, y, axis=1, keepdims=True)
                    ints = np.arange(30).reshape(6, 5) % 7
                    _compare(verdict, func, dmesh.distribute(ints, mesh, placements), ints, axis=0)
            c = _complex()
            c[1, 1] = complex(np.nan, 1)
            dc = dmesh.distribute(c, mesh, placements)
            for func in (np.nanargmax, np.nanargmin):
                _compare(verdict, func, dc, c)
                _compare(verdict, func, dc, c, axis=0)


def test_all_nan_slice_raises_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = _floats()
    x[:, 3] = np.nan
    a = dmesh.distribute(x, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    for func in (np.nanargmax, np.nanargmin):
        assert_raises_all(comm, ArgumentError, func, a, axis=0, match="All-NaN")
        assert_raises_all(comm, ValueError, func, a[:1, 3:4], match="All-NaN")
    empty = dmesh.distribute(np.zeros(0), mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    assert_raises_all(comm, ValueError, np.nanargmax, empty, match="empty")


def test_complex_argmax_and_extremes(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    c = _complex()
    hostile = c.copy()
    hostile[2, 3], hostile[4, 0] = complex(1, np.nan), complex(np.inf, -np.inf)
    with BitVerdict(comm) as verdict:
        for placements in _layouts(mesh):
            for x in (c, hostile, c.astype(np.complex64)):
                a = dmesh.distribute(x, mesh, placements)
                for axis in (None, 0, 1):
                    for func in (np.argmax, np.argmin):
                        _compare(verdict, func, a, x, axis=axis)
                    for find_max, numpy in ((True, np.max), (False, np.min)):
                        got = functools.partial(extreme_values, find_max=find_max)
                        _compare(verdict, got, a, x, numpy(x, axis=axis), axis=axis)
                        _compare(verdict, got, a, x, numpy(x, axis=axis, keepdims=True),
                                 axis=axis, keepdims=True)  # fmt: skip
