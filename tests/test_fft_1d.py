"""The FFT of a 1-D DArray sharded along its only axis (issue 14, item 10): ``n`` padding
and cutting for ``fft``/``ifft``/``rfft``, ``irfft`` and ``hfft`` (the Hermitian spectrum
built on the mesh), at 1-4 ranks on balanced, uneven and empty blocks; NumPy's values to
rounding, every rank the same bits, errors on every rank."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.core.placement import Placement
from helpers import BitVerdict, assert_raises_all

RNG = np.random.default_rng(10)
NORMS = (None, "ortho", "forward")


def layouts(mesh: dmesh.DeviceMesh) -> list[list[Placement]]:
    """Shard(0) on each mesh dim, on both (nested), Replicate and Partial."""
    rest = [Replicate()] * (mesh.ndim - 1)
    out = [[Shard(0), *rest], [Replicate(), *rest], [Partial("sum"), *rest]]
    if mesh.ndim == 2:
        out += [[Replicate(), Shard(0)], [Shard(0), Shard(0)], [Partial("sum"), Shard(0)]]
    return out


def arrays(mesh: dmesh.DeviceMesh, x: np.ndarray) -> list[tuple[str, dmesh.DArray, np.ndarray]]:
    """``x`` in every layout, uneven (slices of a sharded array) and with empty blocks."""
    out = [(str(p), dmesh.distribute(x, mesh, p), x) for p in layouts(mesh)]
    rest = [Replicate()] * (mesh.ndim - 1)
    whole = np.concatenate([x, x[::-1], x[:3]])
    sharded = dmesh.distribute(whole, mesh, [Shard(0), *rest])
    m = len(x)
    tail = len(whole) - m
    out.append(("uneven, first blocks empty", sharded[tail:], whole[tail:]))
    out.append(("uneven, last blocks empty", sharded[:m], whole[:m]))
    out.append(("uneven, middle", sharded[1 : m + 1], whole[1 : m + 1]))
    return out


def check(v: BitVerdict, label: str, got: Any, want: np.ndarray, rtol: float = 1e-12) -> None:
    """``got`` has NumPy's shape and dtype, its values to ``rtol`` of the largest, same bits."""
    full = got.full_array()
    v.bits(label, full)
    ok = full.shape == want.shape and full.dtype == want.dtype
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    ok = ok and np.allclose(full, want, rtol=rtol, atol=rtol * scale, equal_nan=True)
    v.check(ok, f"{label}: {full!r} != {want!r}")


def test_fft_ifft_rfft_pad_and_cut(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``n`` above the length pads with zeros, below it cuts; default ``n`` as before."""
    with BitVerdict(comm) as v:
        z = RNG.normal(size=18) + 1j * RNG.normal(size=18)
        for label, a, x in arrays(mesh, z):
            for n in (None, 16, 36, 25):  # 18 = 3 * 6: no factorization at 4 blocks
                for norm in NORMS:
                    for f in (np.fft.fft, np.fft.ifft):
                        name = f"{f.__name__} n={n} {norm} {label}"
                        if n is None and comm.Get_size() == 4 and a.placements[-1] != Replicate():
                            continue
                        check(v, name, f(a, n=n, norm=norm), f(x, n=n, norm=norm))
                    if n is not None:
                        got = np.fft.rfft(a.real, n=n, norm=norm)
                        check(
                            v, f"rfft n={n} {norm} {label}", got, np.fft.rfft(x.real, n, norm=norm)
                        )
                        got = np.fft.ihfft(a.real, n=n, norm=norm)
                        want = np.fft.ihfft(x.real, n=n, norm=norm)
                        check(v, f"ihfft n={n} {norm} {label}", got, want)


def test_short_signals_and_dtypes(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Signals shorter than the mesh (empty blocks) padded to 16; float32, ints, -0.0, extremes."""
    rest = [Replicate()] * (mesh.ndim - 1)
    big = np.iinfo(np.int64)
    cases = [
        ("short", RNG.normal(size=2)),
        ("one point", np.array([-0.0])),
        ("float32", RNG.normal(size=9).astype(np.float32)),
        ("complex64", (RNG.normal(size=9) + 1j).astype(np.complex64)),
        ("int extremes", np.array([big.max, big.min, 0, -1, 1, big.max], dtype=np.int64)),
        ("signed zeros", np.array([-0.0, 0.0, -0.0, 0.0, -0.0, -0.0, 0.0, 0.0])),
    ]
    with BitVerdict(comm) as v:
        for label, x in cases:
            a = dmesh.distribute(x, mesh, [Shard(0), *rest])
            tol = 1e-5 if x.dtype in (np.float32, np.complex64) else 1e-12
            for f in (np.fft.fft, np.fft.ifft, np.fft.irfft, np.fft.hfft):
                check(v, f"{f.__name__} {label}", f(a, n=16), f(x, n=16), tol)
            if x.dtype.kind != "c":
                check(v, f"rfft {label}", np.fft.rfft(a, n=16), np.fft.rfft(x, n=16), tol)
        empty = dmesh.distribute(np.zeros(0), mesh, [Shard(0), *rest])
        check(v, "fft of empty, n=16", np.fft.fft(empty, n=16), np.fft.fft(np.zeros(0), n=16))
        check(v, "rfft of empty, n=16", np.fft.rfft(empty, n=16), np.fft.rfft(np.zeros(0), n=16))


def test_irfft_and_hfft(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``irfft`` of a sharded half spectrum: default, odd, padded and cut ``n``; ``hfft``."""
    with BitVerdict(comm) as v:
        # Default n = 16 and 36; odd n; padded (h > m); cut (h < m).
        for m, lengths in ((9, (None, 25, 36)), (19, (None, 45, 76, 16))):
            # Imaginary parts at 0 and at n/2 too: NumPy's c2r ignores them.
            h = RNG.normal(size=m) + 1j * RNG.normal(size=m)
            for label, a, x in arrays(mesh, h):
                for n in lengths:
                    for norm in NORMS:
                        name = f"irfft m={m} n={n} {norm} {label}"
                        check(v, name, np.fft.irfft(a, n, norm=norm), np.fft.irfft(x, n, norm=norm))
                        got = np.fft.hfft(a, n, norm=norm)
                        check(
                            v, f"hfft m={m} n={n} {norm} {label}", got, np.fft.hfft(x, n, norm=norm)
                        )
                check(v, f"irfft of reals {label}", np.fft.irfft(a.real), np.fft.irfft(x.real))


def test_round_trips(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``irfft(rfft(x), n)`` and ``ifft(fft(x))`` give ``x`` back (NumPy's rounding)."""
    rest = [Replicate()] * (mesh.ndim - 1)
    with BitVerdict(comm) as v:
        for n in (16, 45):
            x = RNG.normal(size=n)
            a = dmesh.distribute(x, mesh, [Shard(0), *rest])
            want = np.fft.irfft(np.fft.rfft(x), n)
            check(v, f"irfft(rfft) {n}", np.fft.irfft(np.fft.rfft(a), n), want)
            check(v, f"ifft(fft) {n}", np.fft.ifft(np.fft.fft(a)), np.fft.ifft(np.fft.fft(x)))


@pytest.mark.parametrize("length", [1, 2, 3, 7, 13, 97])
def test_lengths_without_factorization_take_bluestein(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, length: int
) -> None:
    """Primes and lengths too short for the blocks: Bluestein's convolution, NumPy's values."""
    rest = [Replicate()] * (mesh.ndim - 1)
    x = RNG.normal(size=length) + 1j * RNG.normal(size=length)
    x[0] = -0.0 if length > 1 else x[0]
    whole = np.concatenate([x, x])
    with BitVerdict(comm) as v:
        for a in (dmesh.distribute(x, mesh, [Shard(0), *rest]),
                  dmesh.distribute(whole, mesh, [Shard(0), *rest])[length:]):  # fmt: skip
            calls: list[tuple[Any, dict[str, Any]]] = [
                (np.fft.fft, {}), (np.fft.ifft, {"norm": "ortho"}),
                (np.fft.fft, {"n": 2 * length + 1}), (np.fft.ifft, {"norm": "forward"}),
            ]  # fmt: skip
            for f, kw in calls:
                check(v, f"{f.__name__} {length} {kw}", f(a, **kw), f(x, **kw))
            real = np.real(a)
            check(v, f"rfft {length}", np.fft.rfft(real), np.fft.rfft(x.real))
            if length > 1:
                check(v, f"irfft {length}", np.fft.irfft(a, n=length), np.fft.irfft(x, n=length))
                check(v, f"hfft {length}", np.fft.hfft(a, n=31), np.fft.hfft(x, n=31))


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Bad ``n``, ``norm`` and dtypes: raised everywhere."""
    rest = [Replicate()] * (mesh.ndim - 1)
    s = dmesh.distribute(RNG.normal(size=13), mesh, [Shard(0), *rest])
    z = s + 0.5j
    if comm.Get_size() > 1:
        one = dmesh.distribute(np.ones(1) + 0j, mesh, [Shard(0), *rest])
        assert_raises_all(comm, ArgumentError, np.fft.irfft, one, match="data points")
        assert_raises_all(comm, ArgumentError, np.fft.fft, s, n=0, match="data points")
        assert_raises_all(comm, ArgumentError, np.fft.irfft, z, n=-2, match="data points")
        assert_raises_all(comm, ArgumentError, np.fft.irfft, z, n=16, norm="bad", match="norm")
        assert_raises_all(comm, ArgumentTypeError, np.fft.rfft, z, n=16, match="real")


def test_real_transforms_of_even_lengths_are_half_length(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """rfft/irfft of an even ``n`` are complex transforms of ``n / 2`` points (float32 and
    float64, every norm, a cut signal or spectrum): NumPy's values, the half spectrum in
    balanced blocks (no block holds more than one block's share plus one four-step row)."""
    rest = [Replicate()] * (mesh.ndim - 1)
    with BitVerdict(comm) as v:
        for dtype in (np.float32, np.float64):
            tol = 1e-5 if dtype == np.float32 else 1e-12
            x = RNG.standard_normal(1030).astype(dtype)
            x[[3, 700]] = [1e6, -0.0]
            a = dmesh.distribute(x, mesh, [Shard(0), *rest])
            for n in (1024, 1030, 64):
                for norm in NORMS:
                    label = f"{np.dtype(dtype).name} n={n} {norm}"
                    spectrum = np.fft.rfft(a, n=n, norm=norm)
                    check(v, f"rfft {label}", spectrum, np.fft.rfft(x, n=n, norm=norm), tol)
                    blocks = spectrum.spec.layout.sizes(0)
                    share = (n // 2 + 1) / len(blocks)
                    v.check(max(blocks) <= share + 64, f"rfft {label}: blocks {blocks}")
                    half = np.fft.rfft(x, n=n, norm=norm)
                    check(v, f"irfft {label}", np.fft.irfft(spectrum, n=n, norm=norm),
                          np.fft.irfft(half, n=n, norm=norm), tol)  # fmt: skip
                    check(v, f"irfft cut {label}", np.fft.irfft(spectrum, n=n - 2, norm=norm),
                          np.fft.irfft(half, n=n - 2, norm=norm), tol)  # fmt: skip
