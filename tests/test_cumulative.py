"""``np.cumsum``/``cumprod`` without an axis on N-D DArrays (flattened in C order),
``np.nancumsum``/``nancumprod`` and ``np.cumulative_sum``/``cumulative_prod``
(``include_initial=``) (issue 14, item 7): NumPy's values at 1-4 ranks, the same bits on every
rank; sharded, uneven, empty and replicated blocks, NaN/inf, integers; errors everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from helpers import BitVerdict, assert_equal_all, assert_raises_all

R = Replicate()


def _compare(verdict: BitVerdict, func: Callable[..., Any], a: Any, x: np.ndarray,
             **kwargs: Any) -> None:  # fmt: skip
    where = f"{func.__name__}({x.dtype}{list(x.shape)}, {kwargs}) on {a.placements}"
    with np.errstate(all="ignore"):
        want = func(x, **kwargs)
        got = func(a, **kwargs).full_array()
    verdict.bits(where, got)
    ok = got.dtype == want.dtype and got.shape == want.shape
    if ok and got.dtype.kind in "fc" and not np.array_equal(got, want, equal_nan=True):
        tol = 1e-5 if got.dtype in (np.float32, np.complex64) else 1e-12
        ok = np.allclose(got, want, rtol=tol, atol=0, equal_nan=True)  # grouped sums
    elif ok:
        ok = np.array_equal(got, want, equal_nan=True)
    verdict.check(ok, f"{where}: {got!r} != {want!r}")


def _layouts(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    rest = [R] * (mesh.ndim - 1)
    both = (
        [[Shard(0), Shard(1)], [Shard(1), Shard(0)], [Shard(0), Shard(0)]] if mesh.ndim == 2 else []
    )
    return [[Shard(0), *rest], [Shard(1), *rest], [R] * mesh.ndim, *both]


def _data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    floats = rng.uniform(0.5, 1.5, (5, 4))
    hostile = floats.copy()
    hostile[1, 2], hostile[3, 0], hostile[0, 3] = np.nan, np.inf, -0.0
    return {"floats": floats, "hostile": hostile, "ints": rng.integers(-3, 4, (5, 4))}


def test_flattening_scans(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for placements in _layouts(mesh):
            for x in _data().values():
                twice = np.concatenate([x, x])
                whole = dmesh.distribute(twice, mesh, placements)
                for a, y in ((dmesh.distribute(x, mesh, placements), x), (whole[3:9], twice[3:9])):
                    for func in (np.cumsum, np.cumprod, np.nancumsum, np.nancumprod):
                        _compare(verdict, func, a, y)
                        _compare(verdict, func, a, y, axis=0)
                        _compare(verdict, func, a, y, axis=1)
                    _compare(verdict, np.nancumsum, a, y, axis=0, dtype=np.float32)


def test_cumulative_functions(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for placements in _layouts(mesh):
            for x in _data().values():
                a = dmesh.distribute(x, mesh, placements)
                for func in (np.cumulative_sum, np.cumulative_prod):
                    for axis in (0, 1, -1):
                        for initial in (False, True):
                            _compare(verdict, func, a, x, axis=axis, include_initial=initial)
                    _compare(verdict, func, a[2:], x[2:], axis=0, include_initial=True)
        v = np.arange(1, 10)
        for placements in ([Shard(0)] + [R] * (mesh.ndim - 1), [R] * mesh.ndim):
            d = dmesh.distribute(v, mesh, placements)
            for func in (np.cumulative_sum, np.cumulative_prod):
                _compare(verdict, func, d, v)
                _compare(verdict, func, d, v, include_initial=True, dtype=np.float64)
                _compare(verdict, func, d[7:], v[7:], include_initial=True)
        p = dmesh.distribute(_data()["floats"], mesh, [Partial("sum")] + [R] * (mesh.ndim - 1))
        _compare(verdict, np.nancumsum, p, _data()["floats"])


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(np.ones((4, 3)), mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    assert_raises_all(comm, ArgumentError, np.cumulative_sum, a, match="axis")
    assert_raises_all(comm, ArgumentError, np.nancumsum, a, axis=2, match="out of bounds")
    assert_raises_all(comm, ArgumentTypeError, np.cumulative_prod, a, axis=0,
                      out=np.ones((4, 3)), match="out=")  # fmt: skip
    assert_raises_all(comm, ArgumentError, np.cumsum, a, axis=0, out=a[:2], match="out=")


def test_out_writes_through_views(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``out=`` of scans and argmax/argmin: the result written into ``out`` (cast as NumPy
    casts it), a row of a row-sharded array included (a view that is no block view)."""
    rest = [R] * (mesh.ndim - 1)
    x = np.arange(20.0).reshape(4, 5) * 1.5 - 7
    for placements in ([Shard(0), *rest], [Shard(1), *rest], [R, *rest]):
        want, d = x.copy(), dmesh.distribute(x, mesh, placements)
        ints = dmesh.distribute(np.zeros((4, 5), np.int64), mesh, placements)
        for out in (want, d):
            np.cumsum(out[1], out=out[2])
            np.cumprod(out[:, 0], out=out[:, 4])
            np.cumulative_sum(out, axis=0, out=out)
        np.cumsum(d, axis=1, out=ints)
        np.argmax(d, axis=0, out=ints[3])
        want_ints = np.cumsum(want, axis=1).astype(np.int64)
        want_ints[3] = np.argmax(want, axis=0)
        assert_equal_all(comm, d.full_array(), want)
        assert_equal_all(comm, ints.full_array(), want_ints)
