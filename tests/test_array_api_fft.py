"""The Array API ``fft`` extension on DArrays (issue 15), compared with ``array_api_strict``
on one process: values, dtypes (single precision kept), shapes, the same bits on every
rank; ``fftfreq``/``rfftfreq`` on a ``device=`` Sharding; errors on every rank."""

from __future__ import annotations

from typing import Any

import array_api_strict as xs
import numpy as np
import pytest
from mpi4py import MPI

import dmesh
import dmesh.array_api as xp
from dmesh import Replicate, Shard
from dmesh.array_api import Sharding
from helpers import BitVerdict, assert_raises_all, signature_mismatches

xs.set_array_api_strict_flags(api_version="2024.12")
RNG = np.random.default_rng(150)
REAL = RNG.standard_normal((7, 6))
CPLX = REAL + 1j * RNG.standard_normal((7, 6))


def _rows(data: np.ndarray, mesh: dmesh.DeviceMesh, uneven: bool = False) -> dmesh.DArray:
    """``data`` row-sharded on every mesh dim; ``uneven``: shifted by one row."""
    place = [Shard(0)] * mesh.ndim
    if uneven:
        return dmesh.distribute(np.concatenate([data[:1], data]), mesh, place)[1:]
    return dmesh.distribute(data, mesh, place)


def _same(v: BitVerdict, label: str, got: Any, want: Any, rtol: float = 1e-12) -> None:
    """Record ``got`` (a DArray) against ``want`` (a strict array): dtype, shape, values, bits."""
    full = np.asarray(got.full_array())
    v.bits(label, full)
    expected = np.asarray(want)
    v.check(full.dtype == expected.dtype and full.shape == expected.shape,
            f"{label}: {full.dtype}{full.shape} != {expected.dtype}{expected.shape}")  # fmt: skip
    if full.shape == expected.shape:
        scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
        v.equal(full.astype(expected.dtype), expected, rtol=rtol, atol=rtol * scale)


@pytest.mark.pure
def test_signatures_match_the_standard() -> None:
    assert sorted(xp.fft.__all__) == sorted(xs.fft.__all__)
    assert not signature_mismatches(xp.fft, xs.fft, xs.fft.__all__)


@pytest.mark.parametrize("single", [False, True], ids=["double", "single"])
def test_transforms(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, single: bool) -> None:
    real, cplx = (REAL.astype(np.float32), CPLX.astype(np.complex64)) if single else (REAL, CPLX)
    tol = 1e-5 if single else 1e-12
    r, sr = _rows(real, mesh, uneven=True), xs.asarray(real)
    c, sc = _rows(cplx, mesh), xs.asarray(cplx)
    f, sf = xp.fft, xs.fft
    with BitVerdict(comm) as v:
        for name in ("fft", "ifft", "irfft", "hfft"):
            for kw in ({}, {"n": 5, "axis": 0, "norm": "ortho"}, {"n": 9, "norm": "forward"}):
                _same(v, f"{name} {kw}", getattr(f, name)(c, **kw), getattr(sf, name)(sc, **kw),
                      tol)  # fmt: skip
        for name in ("rfft", "ihfft"):
            for kw in ({}, {"n": 4, "axis": -2, "norm": "ortho"}):
                _same(v, f"{name} {kw}", getattr(f, name)(r, **kw), getattr(sf, name)(sr, **kw),
                      tol)  # fmt: skip
        for kw in ({}, {"s": (4, 5), "axes": (0, 1), "norm": "ortho"}, {"axes": (0,)}):
            _same(v, f"fftn {kw}", f.fftn(c, **kw), sf.fftn(sc, **kw), tol)
            _same(v, f"ifftn {kw}", f.ifftn(c, **kw), sf.ifftn(sc, **kw), tol)
            _same(v, f"rfftn {kw}", f.rfftn(r, **kw), sf.rfftn(sr, **kw), tol)
            _same(v, f"irfftn {kw}", f.irfftn(c, **kw), sf.irfftn(sc, **kw), tol)
        for axes in (None, 0, (1, 0)):
            _same(v, f"fftshift {axes}", f.fftshift(r, axes=axes), sf.fftshift(sr, axes=axes), 0)
            _same(v, f"ifftshift {axes}", f.ifftshift(c, axes=axes), sf.ifftshift(sc, axes=axes),
                  0)  # fmt: skip


def test_frequencies(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    f, sf = xp.fft, xs.fft
    with BitVerdict(comm) as v:
        for n in (1, 2, 7, 10):
            _same(v, f"fftfreq {n}", f.fftfreq(n, d=0.3), sf.fftfreq(n, d=0.3), 0)
            _same(v, f"rfftfreq {n}", f.rfftfreq(n), sf.rfftfreq(n), 0)
        dev = Sharding(mesh, [Replicate()] * mesh.ndim)
        got = f.fftfreq(9, dtype=np.float32, device=dev)
        _same(v, "fftfreq float32", got, sf.fftfreq(9, dtype=xs.float32), 0)
        v.check(got.device == dev, repr(got.device))
        got = f.rfftfreq(9, device=Sharding(mesh, [Shard(0)] * mesh.ndim))
        v.check(got.placements == (Shard(0),) * mesh.ndim, repr(got.placements))
        v.check(f.fftfreq(4).device == xp.creation.default_device(), "default device")


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    f = xp.fft
    r, c = _rows(REAL, mesh), _rows(CPLX, mesh)
    assert_raises_all(comm, TypeError, f.fft, CPLX, match="fft.*asarray")
    assert_raises_all(comm, TypeError, f.fft, r, match="fft: only complex")
    assert_raises_all(comm, TypeError, f.rfft, c, match="rfft: only real")
    assert_raises_all(comm, TypeError, f.fftshift, _rows(np.arange(4), mesh), match="floating")
    assert_raises_all(comm, ValueError, f.fft, c, norm="none", match="norm")
    assert_raises_all(comm, ValueError, f.fft, c, n=0, match="at least 1")
    assert_raises_all(comm, ValueError, f.fftn, c, s=(2, 2), axes=(0,), match="same length")
    assert_raises_all(comm, ValueError, f.fftfreq, 4, dtype=np.int64, match="real floating")
    assert_raises_all(comm, ValueError, f.rfftfreq, 0, match="positive")
    assert_raises_all(comm, TypeError, f.fftfreq, 4, device="cpu", match="Sharding")
