"""``dmesh.tri``, ``indices``, ``meshgrid``, ``fromfunction``, ``fftfreq``/``rfftfreq`` and the
window functions (issue 14, item 2): NumPy's values bit for bit, each block made locally
(no communication), at 1-4 ranks, balanced, uneven and empty blocks, several placements."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard, debug
from dmesh.collectives.errors import ArgumentError
from helpers import BitVerdict, assert_raises_all


def layouts(mesh: dmesh.DeviceMesh, ndim: int) -> list[Any]:
    """Shard of each axis on the first mesh dim, Replicate, and both mesh dims of a 2-D mesh."""
    rest = [Replicate()] * (mesh.ndim - 1)
    out: list[Any] = [[Shard(d), *rest] for d in range(ndim)] + [[Replicate()] * mesh.ndim]
    if mesh.ndim == 2 and ndim >= 2:
        out.append([Shard(0), Shard(ndim - 1)])
    if mesh.ndim == 2 and ndim >= 1:
        out.append([Shard(0), Shard(0)])
    return out


def check(
    verdict: BitVerdict, label: str, want: Any, make: Callable[..., Any], *args: Any, **kw: Any
) -> None:
    """``make(*args, **kw)`` communicates nothing and gathers to ``want``: same dtype, shape
    and bits."""
    with debug.CommMode() as mode:
        got = make(*args, **kw)
    verdict.check(mode.counts() == {}, f"{label}: communicated {mode.counts()}")
    gots = got if isinstance(got, tuple) else (got,)
    wants = want if isinstance(want, tuple) else (want,)
    verdict.check(len(gots) == len(wants), f"{label}: {len(gots)} results")
    for i, (g, w) in enumerate(zip(gots, wants)):
        full = g.full_array()
        verdict.bits(f"{label}[{i}]", full)
        same = full.dtype == w.dtype and full.shape == w.shape
        same = same and full.tobytes() == np.ascontiguousarray(w).tobytes()
        verdict.check(same, f"{label}[{i}]: {full!r} != NumPy's {w!r}")


def test_tri(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for p in layouts(mesh, 2):
            for args, kw in [((5,), {}), ((3, 7, 2), {}), ((6, 4, -2), {}), ((2, 5), {"k": 10**18}),
                             ((4,), {"k": -(10**18), "dtype": np.int8}), ((0, 3), {}),
                             ((5, 3), {"dtype": bool})]:  # fmt: skip
                want = np.tri(*args, **kw)
                check(
                    verdict,
                    f"tri{args}{kw} {p}",
                    want,
                    dmesh.tri,
                    *args,
                    **kw,
                    mesh=mesh,
                    placements=p,
                )


def test_indices(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for dims in [(3, 5), (1, 2, 6), (7,), (0, 4)]:
            for kw in [{}, {"dtype": np.float32}]:
                want = np.indices(dims, **kw)
                check(verdict, f"indices{dims}", want, dmesh.indices, dims, **kw, mesh=mesh)
                for p in layouts(mesh, len(dims) + 1):
                    check(
                        verdict,
                        f"indices{dims} {p}",
                        want,
                        dmesh.indices,
                        dims,
                        **kw,
                        mesh=mesh,
                        placements=p,
                    )
                sparse = np.indices(dims, sparse=True, **kw)
                check(
                    verdict,
                    f"sparse indices{dims}",
                    sparse,
                    dmesh.indices,
                    dims,
                    sparse=True,
                    **kw,
                    mesh=mesh,
                )


def test_meshgrid(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.array([-0.0, np.nan, np.inf, 1.5, -np.inf])
    y = np.arange(3, dtype=np.int8)
    z = np.array([[1, 2], [3, 4]], np.uint16)  # flattened, as NumPy does
    with BitVerdict(comm) as verdict:
        for xi in [(x,), (x, y), (x, y, z), (y, x[:0])]:
            for kw in [
                {},
                {"indexing": "ij"},
                {"sparse": True},
                {"sparse": True, "indexing": "ij"},
            ]:
                want = np.meshgrid(*xi, **kw)
                label = f"meshgrid {len(xi)} {kw}"
                check(verdict, label, want, dmesh.meshgrid, *xi, **kw, mesh=mesh)
                if not kw.get("sparse"):
                    for p in layouts(mesh, len(xi)):
                        check(
                            verdict,
                            f"{label} {p}",
                            want,
                            dmesh.meshgrid,
                            *xi,
                            **kw,
                            mesh=mesh,
                            placements=p,
                        )


def test_fromfunction(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for func, shape, kw in [
            (lambda i, j: i + 2 * j, (5, 3), {}),
            (lambda i, j: i == j, (4, 6), {"dtype": int}),
            (lambda i: np.sin(i) / i, (9,), {}),  # NaN at 0
            (lambda i, j, scale: scale * i - j, (3, 4), {"dtype": np.int16, "scale": 300}),
            (lambda i, j: 7, (3, 2), {"dtype": int}),  # a scalar: broadcast to the shape
        ]:
            with np.errstate(all="ignore"):
                want = np.broadcast_to(np.fromfunction(func, shape, **kw), shape)
            for p in layouts(mesh, len(shape)):
                with np.errstate(all="ignore"):
                    check(
                        verdict,
                        f"fromfunction{shape}{kw} {p}",
                        want,
                        dmesh.fromfunction,
                        func,
                        shape,
                        **kw,
                        mesh=mesh,
                        placements=p,
                    )


def test_fftfreq(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for n, d in [(1, 1.0), (2, 0.1), (7, 0.3), (10, 1e-300), (9, np.float32(0.7)), (5, -2),
                     (3, 1)]:  # fmt: skip
            for p in layouts(mesh, 1):
                check(
                    verdict,
                    f"fftfreq({n}, {d}) {p}",
                    np.fft.fftfreq(n, d),
                    dmesh.fftfreq,
                    n,
                    d,
                    mesh=mesh,
                    placements=p,
                )
                check(
                    verdict,
                    f"rfftfreq({n}, {d}) {p}",
                    np.fft.rfftfreq(n, d),
                    dmesh.fft.rfftfreq,  # the numpy.fft-shaped namespace: the same function
                    n,
                    d,
                    mesh=mesh,
                    placements=p,
                )


def test_fft_namespace() -> None:
    assert dmesh.fft.fftfreq is dmesh.fftfreq
    assert dmesh.fft.rfftfreq is dmesh.rfftfreq


def test_windows(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for m in [0, 1, 2, 3, 8, 11, 5.5, -3, 257]:
            for name in ("hanning", "hamming", "blackman", "bartlett"):
                want = getattr(np, name)(m)
                for p in layouts(mesh, 1):
                    check(
                        verdict,
                        f"{name}({m}) {p}",
                        want,
                        getattr(dmesh, name),
                        m,
                        mesh=mesh,
                        placements=p,
                    )
            for beta in (0.0, 8.6, 14):
                with np.errstate(all="ignore"):
                    want = np.kaiser(m, beta)
                for p in layouts(mesh, 1):
                    check(
                        verdict,
                        f"kaiser({m}, {beta}) {p}",
                        want,
                        dmesh.kaiser,
                        m,
                        beta,
                        mesh=mesh,
                        placements=p,
                    )


def test_bad_arguments_raise_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    assert_raises_all(comm, ArgumentError, dmesh.fftfreq, 2.5, mesh=mesh, match="integer")
    assert_raises_all(comm, ZeroDivisionError, dmesh.rfftfreq, 0, mesh=mesh)
    assert_raises_all(comm, ArgumentError, dmesh.meshgrid, [1, 2], indexing="xz", mesh=mesh)
    assert_raises_all(comm, ArgumentError, dmesh.tri, -1, mesh=mesh, match="negative")
    assert_raises_all(comm, ArgumentError, dmesh.indices, (2, -3), mesh=mesh, match="negative")
    x = dmesh.arange(4, mesh=mesh)
    assert_raises_all(comm, TypeError, dmesh.meshgrid, x, mesh=mesh, match="np.meshgrid")
