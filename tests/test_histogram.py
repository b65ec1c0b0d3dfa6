"""``np.histogram``, ``histogram_bin_edges``, ``histogram2d``, ``histogramdd`` and ``bincount``
of DArrays (issue 14, item 7): NumPy's counts and edges, replicated, the same bits on every
rank, at 1-4 ranks; balanced, uneven, empty and replicated blocks; errors everywhere."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from helpers import BitVerdict, assert_raises_all, flat_results

R = Replicate()


def _compare(verdict: BitVerdict, func: Callable[..., Any], args: tuple[Any, ...],
             plain: tuple[Any, ...], rtol: float = 0.0, **kwargs: Any) -> None:  # fmt: skip
    where = f"{func.__name__}({[np.shape(p) for p in plain]}, {kwargs})"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        numpy_kwargs = {
            k: v.full_array() if isinstance(v, dmesh.DArray) else v for k, v in kwargs.items()
        }
        want = flat_results(func(*plain, **numpy_kwargs))
        got = [x.full_array() for x in flat_results(func(*args, **kwargs))]
    verdict.check(len(got) == len(want), f"{where}: {len(got)} results")
    for i, (g, w) in enumerate(zip(got, want)):
        verdict.bits(f"{where}[{i}]", g)
        w = np.asarray(w)
        ok = g.dtype == w.dtype and g.shape == w.shape
        if ok and rtol:
            ok = np.allclose(g, w, rtol=rtol, atol=0, equal_nan=True)
        elif ok:
            ok = np.array_equal(g, w, equal_nan=True)
        verdict.check(ok, f"{where}[{i}]: {g!r} != {w!r}")


def _data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    floats = rng.standard_normal(41)
    floats[[2, 9]] = [-0.0, 0.0]
    return {
        "floats": floats,
        "float32": floats.astype(np.float32),
        "ints": rng.integers(-50, 50, 37),
        "equal": np.full(9, 3.0),
        "with nan": np.array([1.0, np.nan, 2.0, 5.0, -np.inf, np.inf, 3.0]),
    }


def _layouts(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    rest = [R] * (mesh.ndim - 1)
    return [[Shard(0), *rest], [R] * mesh.ndim] + ([[Shard(0), Shard(0)]] if mesh.ndim == 2 else [])


def test_histogram_like_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    calls: list[dict[str, Any]] = [
        {},
        {"bins": 7},
        {"bins": 5, "range": (-1.0, 1.5)},
        {"bins": [-3, -1, 0, 0.5, 2, 10]},
        {"bins": 6, "density": True},
        {"bins": 4, "range": (0, 3), "density": True},
    ]
    with BitVerdict(comm) as verdict:
        for name, x in _data().items():
            for placements in _layouts(mesh):
                whole = dmesh.distribute(np.concatenate([x, x]), mesh, placements)
                for a, y in (
                    (dmesh.distribute(x, mesh, placements), x),
                    (whole[3:], np.concatenate([x, x])[3:]),
                ):
                    for kwargs in calls:
                        if (
                            name == "with nan"
                            and "range" not in kwargs
                            and np.ndim(kwargs.get("bins", 0)) == 0
                        ):
                            continue  # NumPy refuses a NaN range (tested below)
                        _compare(verdict, np.histogram, (a,), (y,), **kwargs)
                        _compare(
                            verdict,
                            np.histogram_bin_edges,
                            (a,),
                            (y,),
                            **{k: v for k, v in kwargs.items() if k != "density"},
                        )
                    w = np.linspace(0.5, 2, y.size)
                    dw = dmesh.distribute(w, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
                    _compare(
                        verdict, np.histogram, (a,), (y,), rtol=1e-12, bins=[-5, 0, 5], weights=dw
                    )
                    _compare(
                        verdict, np.histogram, (a,), (y,), rtol=1e-12, bins=[-5, 0, 5], weights=w
                    )


def test_histogram_of_2d_partial_and_empty(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.arange(24.0).reshape(4, 6) - 7
    with BitVerdict(comm) as verdict:
        a = dmesh.distribute(x, mesh, [Shard(1)] + [Shard(0)] * (mesh.ndim - 1))
        _compare(verdict, np.histogram, (a,), (x,), bins=5)
        p = dmesh.distribute(x, mesh, [Partial("sum")] + [R] * (mesh.ndim - 1))
        _compare(verdict, np.histogram, (p,), (x,), bins=3)
        e = dmesh.distribute(np.zeros(0), mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
        _compare(verdict, np.histogram, (e,), (np.zeros(0),), bins=4)
        b = dmesh.distribute(x > 0, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
        _compare(verdict, np.histogram, (b,), (x > 0,), bins=2)


def test_one_all_reduce_of_counts(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.random.default_rng(1).standard_normal(50)
    a = dmesh.distribute(x, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    with BitVerdict(comm) as verdict:
        with debug.CommMode() as mode:
            np.histogram(a, bins=[-1, 0, 1])
        expected = {"all_reduce": 1} if comm.Get_size() > 1 else {}
        verdict.check(mode.counts() == expected, f"collectives: {mode.counts()}")


def test_histogramdd_and_2d(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rng = np.random.default_rng(4)
    xs, ys = rng.standard_normal(33), rng.integers(0, 5, 33).astype(float)
    sample = np.stack([xs, ys, xs * ys], axis=1)
    rest = [R] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        for placements in ([Shard(0), *rest], [Shard(1), *rest], [R] * mesh.ndim):
            s = dmesh.distribute(sample, mesh, placements)
            uneven = {"bins": [[-2, 0, 2], 3, [-9, 0, 9]], "range": [None, (0, 4), None]}
            for kwargs in ({}, {"bins": (3, 4, 2)}, {"bins": 4, "density": True}, uneven):
                _compare(verdict, np.histogramdd, (s,), (sample,), **kwargs)
        x = dmesh.distribute(xs, mesh, [Shard(0), *rest])
        y = dmesh.distribute(ys, mesh, [R] * mesh.ndim)  # another layout: aligned to x's
        for kwargs in ({}, {"bins": 4}, {"bins": (3, 5), "density": True}, {"bins": [-1, 0, 1, 2]},
                       {"bins": [[-1, 0, 1], [0, 2, 4]], "range": [(-1, 1), (0, 4)]}):  # fmt: skip
            _compare(verdict, np.histogram2d, (x, y), (xs, ys), **kwargs)
        _compare(verdict, np.histogramdd, ([x, y],), ([xs, ys],), bins=3)
        w = np.linspace(0, 1, 33)
        _compare(verdict, np.histogram2d, (x, y), (xs, ys), rtol=1e-12, bins=3, weights=w)


def test_bincount(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.random.default_rng(9).integers(0, 12, 29)
    rest = [R] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        for placements in ([Shard(0), *rest], [R] * mesh.ndim):
            whole = dmesh.distribute(np.concatenate([x, x]), mesh, placements)
            for a, y in (
                (dmesh.distribute(x, mesh, placements), x),
                (whole[25:], np.concatenate([x, x])[25:]),
            ):
                _compare(verdict, np.bincount, (a,), (y,))
                _compare(verdict, np.bincount, (a,), (y,), minlength=20)
                w = np.linspace(-1, 1, y.size)
                _compare(verdict, np.bincount, (a,), (y,), rtol=1e-12, weights=w)
                _compare(verdict, np.bincount, (a.astype(np.uint8),), (y.astype(np.uint8),))
                _compare(verdict, np.bincount, (a > 5,), (y > 5,))
        e = dmesh.distribute(np.zeros(0, int), mesh, [Shard(0), *rest])
        _compare(verdict, np.bincount, (e,), (np.zeros(0, int),), minlength=3)


def test_bin_estimators(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """NumPy's width estimators from the data's size, extremes, quartiles and moments."""
    rng = np.random.default_rng(13)
    rest = [R] * (mesh.ndim - 1)
    cases = {
        "normal": rng.standard_normal(300),
        "ints": rng.integers(-20, 40, 211),
        "narrow": np.full(17, 2.5),
    }
    with BitVerdict(comm) as verdict:
        for x in cases.values():
            a = dmesh.distribute(x, mesh, [Shard(0), *rest])
            for bins in ("auto", "fd", "sqrt", "sturges", "rice", "scott", "doane"):
                for kwargs in ({}, {"range": (-1, 5)}):
                    _compare(verdict, np.histogram, (a,), (x,), bins=bins, **kwargs)
                    _compare(verdict, np.histogram_bin_edges, (a,), (x,), bins=bins, **kwargs)


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [R] * (mesh.ndim - 1)
    nan = dmesh.distribute(np.array([1.0, np.nan, 2.0, 3.0]), mesh, [Shard(0), *rest])
    ints = dmesh.distribute(np.array([3, -1, 2, 0]), mesh, [Shard(0), *rest])
    assert_raises_all(comm, ArgumentError, np.histogram, nan, match="not finite")
    assert_raises_all(comm, ArgumentError, np.histogram, ints, bins=0, match="positive")
    assert_raises_all(comm, ArgumentError, np.histogram, ints, bins=[2, 1], match="monoton")
    assert_raises_all(comm, ArgumentError, np.histogram, ints, range=(3, 1), match="larger")
    assert_raises_all(comm, UnsupportedError, np.histogram, ints, bins="stone", match="stone")
    assert_raises_all(comm, ArgumentError, np.histogram, ints, bins="nope", match="estimator")
    assert_raises_all(comm, ArgumentTypeError, np.histogram, ints, bins="fd", weights=np.ones(4),
                      match="weighted")  # fmt: skip
    assert_raises_all(comm, ArgumentError, np.histogram, ints, weights=np.ones(3), match="shape")
    assert_raises_all(comm, ArgumentError, np.bincount, ints, match="negative")
    assert_raises_all(comm, ArgumentTypeError, np.bincount, nan, match="cast")
    assert_raises_all(comm, ArgumentError, np.bincount, ints, minlength=-1, match="negative")
    assert_raises_all(comm, ArgumentError, np.histogramdd, ints, bins=[2, 3], match="dimension")


def _on_edges(x: np.ndarray, bins: int) -> np.ndarray:
    """``x`` with NumPy's edges and their neighbours inside its range: the estimate's hard cases."""
    edges = np.histogram_bin_edges(x, bins)
    near = np.concatenate([edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf)])
    near = near.astype(x.dtype)
    return np.concatenate([x, near[(near >= x.min()) & (near <= x.max())]])


@pytest.mark.parametrize("proofs", [True, False])
def test_uniform_fast_path_like_numpy(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, monkeypatch: Any, proofs: bool
) -> None:
    """The uniform-bin count (:mod:`histogram_count`) over many small chunks: NumPy's counts
    for values on and beside every edge, -0.0, explicit ranges dropping NaN and infinities;
    with the estimates proved inside their bins, and with NumPy's corrections everywhere."""
    from dmesh.ops.kernels import histogram_count

    monkeypatch.setattr(histogram_count, "CHUNK", 7)
    if not proofs:
        monkeypatch.setattr(histogram_count, "_thresholds", lambda *args: None)
    rng = np.random.default_rng(21)
    rest = [R] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        for dtype in (np.float64, np.float32):
            for bins in (1, 3, 10, 100):
                x = _on_edges(rng.standard_normal(40).astype(dtype), bins)
                x[:2] = [-0.0, 0.0]
                rng.shuffle(x)
                hostile = np.concatenate([x, np.array([np.nan, np.inf, -np.inf, 1e30], dtype)])
                span = (dtype(-0.5), dtype(1.25))  # in the data's dtype: the fast path too
                for placements in ([Shard(0), *rest], [R] * mesh.ndim):
                    a = dmesh.distribute(x, mesh, placements)
                    _compare(verdict, np.histogram, (a,), (x,), bins=bins)
                    _compare(verdict, np.histogram, (a[5:],), (x[5:],), bins=bins, density=True)
                    h = dmesh.distribute(hostile, mesh, placements)
                    _compare(verdict, np.histogram, (h,), (hostile,), bins=bins, range=span)
                    _compare(verdict, np.histogram, (h,), (hostile,), bins=bins, range=(-1, 2))
        tiny = np.array([5e-324, 1e-323, 0.0, -0.0, 1.5e-323])  # subnormal widths
        big = np.array([-1e307, 1e308, 3.0, 1e308])
        for y, bins in ((tiny, 1), (tiny, 3), (big, 1), (big, 2), (np.full(9, 7.0), 4)):
            a = dmesh.distribute(y, mesh, [Shard(0), *rest])
            _compare(verdict, np.histogram, (a,), (y,), bins=bins)
