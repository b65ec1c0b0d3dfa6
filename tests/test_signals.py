"""Differences, signals and the 1-D FFT on DArrays (issue 14, items 8 and 10): NumPy's
values at 1-4 ranks on balanced, uneven and empty blocks, every rank the same bits."""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.placement import Placement
from helpers import BitVerdict, assert_raises_all

RNG = np.random.default_rng(8)
X = RNG.normal(size=(13, 6))
H = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -2.0, 3.5, np.nan, 4.0, -0.0, 2.0, 7.0])


def layouts(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[Placement]]:
    """Shard on each axis (each mesh dim), Replicate, Partial, and both mesh dims."""
    rest = [Replicate()] * (mesh.ndim - 1)
    out = [[Shard(d), *rest] for d in range(ndim)] + [[Replicate(), *rest]]
    out.append([Partial("sum"), *rest])
    if mesh.ndim == 2:
        out += [[Replicate(), Shard(0)], [Shard(0), Shard(ndim - 1)]]
    return out


def arrays(mesh: dmesh.DeviceMesh, x: np.ndarray) -> list[tuple[str, dmesh.DArray, np.ndarray]]:
    """``x`` in every layout, and uneven (a slice) and empty-block (a short slice) forms."""
    out = []
    for placements in layouts(mesh, x.ndim):
        out.append((str(placements), dmesh.distribute(x, mesh, placements), x))
    rest = [Replicate()] * (mesh.ndim - 1)
    whole = np.concatenate([x, x])
    sharded = dmesh.distribute(whole, mesh, [Shard(0), *rest])
    n = len(x)
    out.append(("uneven, first empty", sharded[n:], whole[n:]))
    out.append(("uneven, last empty", sharded[:n], whole[:n]))
    return out


def check(verdict: BitVerdict, label: str, got: Any, want: Any, rtol: float = 0.0) -> None:
    if isinstance(want, tuple):
        for i, (g, w) in enumerate(zip(got, want)):
            check(verdict, f"{label}[{i}]", g, w, rtol)
        return
    full = got.full_array()
    verdict.bits(label, full)
    same = full.shape == want.shape and full.dtype == want.dtype
    if rtol:
        same = same and np.allclose(full, want, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        same = same and np.array_equal(full, want, equal_nan=True)
    verdict.check(same, f"{label}: {full!r} != {want!r}")


def test_gradient(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    coords = np.cumsum(RNG.uniform(0.5, 1.5, size=26))
    with BitVerdict(comm) as v:
        for label, a, x in arrays(mesh, X):
            for eo in (1, 2):
                c = coords[: x.shape[0]]
                check(
                    v,
                    f"{label} eo{eo}",
                    np.gradient(a, edge_order=eo),
                    np.gradient(x, edge_order=eo),
                )
                got = np.gradient(a, c, 0.5, edge_order=eo)
                check(v, f"{label} coords eo{eo}", got, np.gradient(x, c, 0.5, edge_order=eo))
                got = np.gradient(a, np.arange(x.shape[0]) * 2, axis=0, edge_order=eo)
                check(
                    v,
                    f"{label} int coords",
                    got,
                    np.gradient(x, np.arange(x.shape[0]) * 2, axis=0, edge_order=eo),
                )
        for label, a, x in arrays(mesh, H):
            with np.errstate(all="ignore"):
                want = np.gradient(x, edge_order=2)
            check(v, f"hostile {label}", np.gradient(a, edge_order=2), want)
        ints = np.array([np.iinfo(np.int64).max, 0, np.iinfo(np.int64).min, 5, -3, 7, 1, 2])
        a = dmesh.distribute(ints, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
        check(v, "int64 extremes", np.gradient(a), np.gradient(ints))


def test_ediff1d_and_trapezoid(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as v:
        for label, a, x in arrays(mesh, X):
            check(v, f"ediff1d {label}", np.ediff1d(a), np.ediff1d(x))
            want = np.ediff1d(x, to_begin=[1, 2], to_end=-0.0)
            check(v, f"ediff1d ends {label}", np.ediff1d(a, to_begin=[1, 2], to_end=-0.0), want)
            for axis in (0, 1):
                got = np.trapezoid(a, axis=axis)
                check(v, f"trapezoid {label}", got, np.trapezoid(x, axis=axis), 1e-12)
            c = np.linspace(0, 1, x.shape[0]) ** 2
            check(
                v,
                f"trapezoid x {label}",
                np.trapezoid(a, c, axis=0),
                np.trapezoid(x, c, axis=0),
                1e-12,
            )
        for label, a, x in arrays(mesh, H):
            check(
                v,
                f"ediff1d hostile {label}",
                np.ediff1d(a, to_end=[np.nan]),
                np.ediff1d(x, to_end=[np.nan]),
            )
        i8 = np.array([127, -128, 5, 0, -1, 100, -100, 3], dtype=np.int8)
        a = dmesh.distribute(i8, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
        check(v, "int8 wraps", np.ediff1d(a, to_begin=7), np.ediff1d(i8, to_begin=7))


def test_interp_and_polynomials(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    xp, fp = np.sort(RNG.uniform(-1, 1, 9)), RNG.normal(size=9)
    p = np.array([2.0, -1.0, 0.5, 3.0])
    with BitVerdict(comm) as v:
        for label, a, x in arrays(mesh, X):
            check(v, f"interp {label}", np.interp(a, xp, fp), np.interp(x, xp, fp))
            got = np.interp(a, xp, fp + 1j, left=-5, right=np.nan)
            check(
                v, f"interp complex {label}", got, np.interp(x, xp, fp + 1j, left=-5, right=np.nan)
            )
            check(
                v,
                f"interp period {label}",
                np.interp(a, xp, fp, period=0.7),
                np.interp(x, xp, fp, period=0.7),
            )
            check(v, f"polyval {label}", np.polyval(p, a), np.polyval(p, x))
        for label, a, x in arrays(mesh, H):
            check(v, f"interp hostile {label}", np.interp(a, xp, fp), np.interp(x, xp, fp))
            with np.errstate(all="ignore"):
                want = np.polyval(p, x)
            check(v, f"polyval hostile {label}", np.polyval(p, a), want)
        for label, a, x in arrays(mesh, np.array([1.0, -6, 11, -6, 0, 0, 0, 0])):
            check(v, f"roots {label}", np.roots(a), np.roots(x))
            q = dmesh.distribute(t_query := np.linspace(-2, 2, 5), mesh, [Replicate()] * mesh.ndim)
            check(v, f"polyval of p {label}", np.polyval(a, q), np.polyval(x, t_query))
        t = np.linspace(-1, 1, 26)
        y = 3 * t**3 - t + 0.25 + 0.01 * np.sin(40 * t)
        w = RNG.uniform(0.5, 1, 26)
        for label, a, x in arrays(mesh, t):
            n = len(x)
            yy = dmesh.distribute(y[:n], mesh, [Replicate()] * mesh.ndim)
            check(v, f"polyfit {label}", np.polyfit(a, yy, 3), np.polyfit(x, y[:n], 3), 1e-10)
            got = np.polyfit(a, yy, 2, w=w[:n], full=True)
            want = np.polyfit(x, y[:n], 2, w=w[:n], full=True)
            check(
                v,
                f"polyfit full {label}",
                (got[0], got[1], got[3]),
                (want[0], want[1], want[3]),
                1e-10,
            )
            v.check(got[2] == want[2] and got[4] == want[4], f"rank/rcond {got[2]} {got[4]}")


def test_convolve_and_correlate(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    signal = RNG.normal(size=17)
    with BitVerdict(comm) as v:
        for label, a, x in [*arrays(mesh, signal), *arrays(mesh, H)]:
            for m in (1, 2, 3):
                k = RNG.normal(size=m) if m != 2 else np.array([np.inf, -0.0])
                for mode in ("full", "same", "valid"):
                    with np.errstate(all="ignore"):
                        for f in (np.convolve, np.correlate):
                            check(
                                v,
                                f"{f.__name__} {label} {m} {mode}",
                                f(a, k, mode),
                                f(x, k, mode),
                                1e-12,
                            )
        z = signal + 1j * RNG.normal(size=17)
        for label, a, x in arrays(mesh, z):
            k = np.array([1 - 1j, 2j])
            check(
                v,
                f"correlate complex {label}",
                np.correlate(a, k, "full"),
                np.correlate(x, k, "full"),
                1e-12,
            )
            check(v, f"convolve swapped {label}", np.convolve(k, a), np.convolve(k, x), 1e-12)


def test_fft_of_a_sharded_1d_array(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as v:
        for n in (20, 36, 64):
            z = RNG.normal(size=n) + 1j * RNG.normal(size=n)
            for label, a, x in arrays(mesh, z):
                for f in (np.fft.fft, np.fft.ifft):
                    for norm in (None, "ortho", "forward"):
                        check(
                            v,
                            f"{f.__name__} {n} {label} {norm}",
                            f(a, norm=norm),
                            f(x, norm=norm),
                            1e-12,
                        )
                check(v, f"fft n= {label}", np.fft.fft(a, n=n - 4), np.fft.fft(x, n=n - 4), 1e-12)
                check(v, f"rfft {label}", np.fft.rfft(a.real), np.fft.rfft(x.real), 1e-12)
                check(v, f"ihfft {label}", np.fft.ihfft(a.real), np.fft.ihfft(x.real), 1e-12)
                f32 = x.real.astype(np.float32)
                got = np.fft.rfft(dmesh.distribute(f32, mesh, [Shard(0)] * mesh.ndim))
                check(v, f"rfft float32 {label}", got, np.fft.rfft(f32), 1e-4)


def test_shifts_and_hermitian(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as v:
        for label, a, x in arrays(mesh, X):
            for axes in (None, 0, 1, (1, 0), -1):
                check(
                    v,
                    f"fftshift {label} {axes}",
                    np.fft.fftshift(a, axes=axes),
                    np.fft.fftshift(x, axes=axes),
                )
                check(
                    v,
                    f"ifftshift {label} {axes}",
                    np.fft.ifftshift(a, axes=axes),
                    np.fft.ifftshift(x, axes=axes),
                )
            for norm in (None, "ortho", "forward"):
                check(
                    v,
                    f"hfft {label}",
                    np.fft.hfft(a + 1j, axis=0, norm=norm),
                    np.fft.hfft(x + 1j, axis=0, norm=norm),
                    1e-12,
                )
                check(
                    v,
                    f"ihfft {label}",
                    np.fft.ihfft(a, n=5, norm=norm),
                    np.fft.ihfft(x, n=5, norm=norm),
                    1e-12,
                )
        for label, a, x in arrays(mesh, H):
            check(v, f"fftshift hostile {label}", np.fft.fftshift(a), np.fft.fftshift(x))


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    a = dmesh.distribute(X, mesh, [Shard(0), *rest])
    s = dmesh.distribute(X[:, 0], mesh, [Shard(0), *rest])
    assert_raises_all(comm, ArgumentError, np.gradient, a, edge_order=3, match="edge_order")
    assert_raises_all(
        comm, ArgumentError, np.gradient, a[:2], axis=0, edge_order=2, match="too small"
    )
    assert_raises_all(comm, ArgumentError, np.gradient, a, np.ones(5), axis=0, match="match")
    assert_raises_all(comm, TypeError, np.ediff1d, s, to_begin=np.array([1j]), match="same_kind")
    assert_raises_all(comm, UnsupportedError, np.interp, s, s, s, match="xp")
    assert_raises_all(comm, UnsupportedError, np.convolve, s, s, match="two sharded")
    assert_raises_all(comm, ArgumentError, np.convolve, s, np.ones(2), mode="middle", match="mode")
    assert_raises_all(comm, ArgumentError, np.correlate, s, np.ones(0), match="empty")
    if comm.Get_size() > 1:
        assert_raises_all(comm, UnsupportedError, np.convolve, s, np.ones(14), match="longer")
        long = dmesh.distribute(np.ones(max(4, comm.Get_size())), mesh, [Shard(0), *rest])
        assert_raises_all(
            comm,
            UnsupportedError,
            np.convolve,
            long,
            np.ones(4),
            match="too thin",
        )
