"""Benchmark: whole NumPy programs run unchanged on DArrays, beside NumPy on one process.

Each program is one function written the way NumPy users write it: ``np.``
calls, operators and indexing only, so the same code runs on ndarrays and on
DArrays (dispatched through ``__array_function__``/``__array_ufunc__``). The
NumPy run and the dmesh run differ only in how the inputs are made
(``dmesh.distribute`` of the same ndarrays) and in the final gather
(``.full_array()``):

* ``spectral NS``: 2-D vorticity Navier-Stokes, pseudo-spectral (``rfft2``/
  ``irfft2``, wavenumbers, 2/3 dealiasing mask, Heun RK2 steps);
* ``shallow water``: linear shallow-water equations by finite differences
  on shifted slices (``u[1:-1, 1:-1] = ...``, boundary rows and columns set
  with ``h[0] = h[1]``...), with a 5-point diffusion term;
* ``game of life``: the neighbour count from eight shifted slices, the new
  generation written through a mask, ``Z[1:-1, 1:-1][birth | survive] = 1``
  (N. Rougier's version); ``life, expr`` the same rules assigned as one
  expression, ``Z[1:-1, 1:-1] = (N == 3) | ((Z[1:-1, 1:-1] == 1) & (N == 2))``;
  ``life, roll`` the rules on a torus, the neighbours summed from
  ``np.roll(np.roll(Z, i, 0), j, 1)`` (J. VanderPlas's version);
* ``k-means``: distances by broadcasting ``((X[:, None, :] - C[None, :, :])
  ** 2).sum(-1)``, ``argmin``, centroids as masked means in a loop over the
  clusters (``X[labels == j].mean(axis=0)``);
* ``statistics``: moments (mean, std, skewness, kurtosis of the standardised
  ``(x - x.mean(0)) / x.std(0)``), percentiles along axis 0, a histogram;
* ``cavity flow``: lid-driven cavity, incompressible Navier-Stokes by finite
  differences (a pressure Poisson equation relaxed by Jacobi sweeps each
  step, boundary rows copied with ``p[0, :] = p[1, :]``), in the style of
  L. Barba's "CFD Python" lessons;
* ``dense CG``: conjugate gradients on a row-sharded SPD matrix (``A @ p``,
  dot products, a convergence test each iteration).

Every program is checked once: dmesh's gathered result against NumPy's (the
"max err" column: the largest absolute difference over the largest absolute
NumPy value); a mismatch exits non-zero. Then the dmesh run on the mesh of
all ranks and the NumPy run on the whole arrays on rank 0 alone are timed in
alternating batches (``bench_timing.alternating``: the slowest rank's median),
sizes chosen so that NumPy takes some 20-200 ms. The ratio is dmesh / NumPy:
there is no target for it, it says what dmesh costs (1 rank) or gains
(2 ranks) on programs nobody rewrote for it. The same function wrapped in
``dmesh.compile`` runs in the same batches (checked against the eager
result first, then called until it settles: a segmented signature weighs
segments against eager calls on its first five); the "compiled" column is
its time over the eager dmesh time, and a list after the table says where
each program's trace first breaks (from there it runs in segments, or
eagerly where segments were slower).

``spectral NS`` has a second baseline when ``mpi4py_fft`` can be imported:
the same solver (equations, size, steps, RK2, dealiasing) written the way an
mpi4py-fft user writes it (``spectral_ns_mpi4py_fft``): one ``PFFT(comm, (n,
n), axes=(0, 1), dtype=np.float64, slab=True)`` (real-to-complex, slab, its
default FFTW backend), ``newDistArray``, local wavenumbers cut with
``local_slice(True)``, ``forward``/``backward`` and elementwise arithmetic
on the local arrays. It runs on all ranks, in the same alternating batches
as the dmesh run (its ``PFFT`` is built once, outside the timings, as a
user's plan is), and "vs mpi4py-fft" is dmesh's time over its time; its
gathered solution is checked against NumPy's once. mpi4py-fft is not a
dependency: ``pip install mpi4py-fft`` builds against FFTW (e.g. Debian's
``libfftw3-dev``); without it one line says the baseline was skipped and why.

Then one dmesh run of each program under ``cProfile`` on rank 0: the five
functions of the dmesh package (``dmesh/``, ``ops/``, ``collectives/``) with
the most own time (tottime), with their cumulative time and call counts.

Last, a 5-point stencil step on a 512 x 512 ``Shard(0)`` field written with
shifted slices (``Z[2:, 1:-1] + Z[:-2, 1:-1] + ... - 4 * Z[1:-1, 1:-1]``)
against the same step through ``dmesh.map_overlap``; target: the slices at
most 1.3x map_overlap's time (shown, not enforced).

``make bench`` runs it at 1 and 2 ranks::

    .venv/bin/python scripts/mpi_env.py 2 .venv/bin/mpiexec -n 2 \\
        .venv/bin/python scripts/bench_programs.py [out.json]

Results go to ``build/bench/programs-<p>ranks.json``.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_timing import alternating, write_results
from mpi4py import MPI

import dmesh
from dmesh import DArray, Replicate, Shard
from dmesh.ops.compiler.api import EAGER_TRIAL, SEGMENT_TRIAL

ROOT = Path(__file__).resolve().parent.parent
DMESH_DIRS = tuple(str(ROOT / d) + "/" for d in ("dmesh", "ops", "collectives"))
STENCIL_RATIO = 1.3  # the sliced stencil at most this times map_overlap's time
TOP = 5  # profile entries per program
PFFT_TOL = 1e-12  # mpi4py-fft's solution against NumPy's, relative to its largest value


# ----------------------------------------------------------------------------
# The programs: NumPy code, nothing dmesh-specific.


def spectral_ns(w: Any, kx: Any, ky: Any, steps: int) -> Any:
    """2-D vorticity Navier-Stokes on [0, 2 pi)^2, pseudo-spectral, Heun (RK2) steps.

    ``w`` is the vorticity on an n x n grid, ``kx`` (n, 1) and ``ky``
    (1, n // 2 + 1) the wavenumbers of ``rfft2``'s spectrum.
    """
    n = w.shape[0]
    nu, dt = 1e-3, 2e-3
    k2 = kx**2 + ky**2
    k2inv = np.where(k2 == 0, 0.0, 1.0 / np.where(k2 == 0, 1.0, k2))
    dealias = (np.abs(kx) < n / 3) & (ky < n / 3)

    def rhs(w_hat: Any) -> Any:
        psi_hat = w_hat * k2inv  # -lap(psi) = w
        u = np.fft.irfft2(1j * ky * psi_hat, s=(n, n))  # u = d(psi)/dy
        v = np.fft.irfft2(-1j * kx * psi_hat, s=(n, n))  # v = -d(psi)/dx
        wx = np.fft.irfft2(1j * kx * w_hat, s=(n, n))
        wy = np.fft.irfft2(1j * ky * w_hat, s=(n, n))
        return -(dealias * np.fft.rfft2(u * wx + v * wy)) - nu * k2 * w_hat

    w_hat = np.fft.rfft2(w)
    for _ in range(steps):
        k1 = rhs(w_hat)
        k2_ = rhs(w_hat + dt * k1)
        w_hat = w_hat + 0.5 * dt * (k1 + k2_)
    return np.fft.irfft2(w_hat, s=(n, n))


def shallow_water(h: Any, u: Any, v: Any, steps: int) -> Any:
    """Linear shallow water, forward-backward in time, centred differences on slices."""
    h, u, v = h.copy(), u.copy(), v.copy()
    g_dt_2dx, depth_dt_2dx, nu = 0.1, 0.1, 0.05
    for _ in range(steps):
        u[1:-1, 1:-1] = u[1:-1, 1:-1] - g_dt_2dx * (h[2:, 1:-1] - h[:-2, 1:-1])
        v[1:-1, 1:-1] = v[1:-1, 1:-1] - g_dt_2dx * (h[1:-1, 2:] - h[1:-1, :-2])
        u[0] = 0.0  # walls: no normal flow
        u[-1] = 0.0
        v[:, 0] = 0.0
        v[:, -1] = 0.0
        h[1:-1, 1:-1] = (
            h[1:-1, 1:-1]
            - depth_dt_2dx * (u[2:, 1:-1] - u[:-2, 1:-1] + v[1:-1, 2:] - v[1:-1, :-2])
            + nu * (h[2:, 1:-1] + h[:-2, 1:-1] + h[1:-1, 2:] + h[1:-1, :-2] - 4 * h[1:-1, 1:-1])
        )
        h[0] = h[1]
        h[-1] = h[-2]
        h[:, 0] = h[:, 1]
        h[:, -1] = h[:, -2]
    return h, u, v


def neighbours(Z: Any) -> Any:
    """The live neighbours of each interior cell: eight shifted slices summed."""
    return (
        Z[0:-2, 0:-2] + Z[0:-2, 1:-1] + Z[0:-2, 2:]
        + Z[1:-1, 0:-2] + Z[1:-1, 2:]
        + Z[2:, 0:-2] + Z[2:, 1:-1] + Z[2:, 2:]
    )  # fmt: skip


def game_of_life(Z: Any, steps: int) -> Any:
    """Conway's Game of Life on a grid with a dead border (N. Rougier's NumPy version)."""
    Z = Z.copy()
    for _ in range(steps):
        N = neighbours(Z)
        birth = (N == 3) & (Z[1:-1, 1:-1] == 0)
        survive = ((N == 2) | (N == 3)) & (Z[1:-1, 1:-1] == 1)
        Z[...] = 0
        Z[1:-1, 1:-1][birth | survive] = 1
    return Z


def game_of_life_expr(Z: Any, steps: int) -> Any:
    """The same rules as one expression assigned to the interior (no mask assignment)."""
    Z = Z.copy()
    for _ in range(steps):
        N = neighbours(Z)
        Z[1:-1, 1:-1] = (N == 3) | ((Z[1:-1, 1:-1] == 1) & (N == 2))
    return Z


def game_of_life_roll(Z: Any, steps: int) -> Any:
    """The rules on a torus, neighbours from ``np.roll`` (J. VanderPlas's NumPy version)."""
    for _ in range(steps):
        N = sum(
            np.roll(np.roll(Z, i, 0), j, 1)
            for i in (-1, 0, 1)
            for j in (-1, 0, 1)
            if (i != 0 or j != 0)
        )
        Z = ((N == 3) | (Z & (N == 2))).astype(Z.dtype)
    return Z


def kmeans(X: Any, C: Any, steps: int) -> Any:
    """Lloyd's k-means: ``steps`` rounds of assignment and centroid update."""
    labels = None
    for _ in range(steps):
        d2 = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=-1)
        labels = d2.argmin(axis=1)
        C = np.stack([X[labels == j].mean(axis=0) for j in range(C.shape[0])])
    return C, labels


def statistics(x: Any, steps: int) -> Any:
    """Column moments, standardisation, percentiles and a histogram of a data table."""
    del steps  # one pass
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    z = (x - mean) / std
    skew = (z**3).mean(axis=0)
    kurt = (z**4).mean(axis=0) - 3.0
    q = np.percentile(x, [5, 25, 50, 75, 95], axis=0)
    counts, _ = np.histogram(z[:, 0], bins=64, range=(-5.0, 5.0))
    return mean, std, skew, kurt, q, counts


def cavity_flow(u: Any, v: Any, p: Any, steps: int, sweeps: int = 20) -> Any:
    """Lid-driven cavity on [0, 2]^2: ``steps`` time steps of ``sweeps`` pressure sweeps each."""
    u, v, p = u.copy(), v.copy(), p.copy()
    n = u.shape[0]
    h = 2.0 / (n - 1)  # grid spacing, both directions
    rho, nu, dt = 1.0, 0.1, 1e-3
    for _ in range(steps):
        un, vn = u.copy(), v.copy()
        # Source term of the pressure equation from the velocity field.
        dudx = (un[1:-1, 2:] - un[1:-1, :-2]) / (2 * h)
        dudy = (un[2:, 1:-1] - un[:-2, 1:-1]) / (2 * h)
        dvdx = (vn[1:-1, 2:] - vn[1:-1, :-2]) / (2 * h)
        dvdy = (vn[2:, 1:-1] - vn[:-2, 1:-1]) / (2 * h)
        b = rho * ((dudx + dvdy) / dt - dudx**2 - 2 * dudy * dvdx - dvdy**2)
        for _ in range(sweeps):
            pn = p.copy()
            p[1:-1, 1:-1] = (
                pn[1:-1, 2:] + pn[1:-1, :-2] + pn[2:, 1:-1] + pn[:-2, 1:-1] - h**2 * b
            ) / 4
            p[:, -1] = p[:, -2]  # dp/dx = 0 at the walls, dp/dy = 0 at the bottom
            p[0, :] = p[1, :]
            p[:, 0] = p[:, 1]
            p[-1, :] = 0.0  # p = 0 under the lid
        lap_u = un[1:-1, 2:] + un[1:-1, :-2] + un[2:, 1:-1] + un[:-2, 1:-1] - 4 * un[1:-1, 1:-1]
        lap_v = vn[1:-1, 2:] + vn[1:-1, :-2] + vn[2:, 1:-1] + vn[:-2, 1:-1] - 4 * vn[1:-1, 1:-1]
        uc, vc = un[1:-1, 1:-1], vn[1:-1, 1:-1]
        u[1:-1, 1:-1] = (
            uc
            - dt / h * (uc * (uc - un[1:-1, :-2]) + vc * (uc - un[:-2, 1:-1]))
            - dt / (2 * rho * h) * (p[1:-1, 2:] - p[1:-1, :-2])
            + nu * dt / h**2 * lap_u
        )
        v[1:-1, 1:-1] = (
            vc
            - dt / h * (uc * (vc - vn[1:-1, :-2]) + vc * (vc - vn[:-2, 1:-1]))
            - dt / (2 * rho * h) * (p[2:, 1:-1] - p[:-2, 1:-1])
            + nu * dt / h**2 * lap_v
        )
        u[0, :] = u[:, 0] = u[:, -1] = 0.0
        u[-1, :] = 1.0  # the moving lid
        v[0, :] = v[-1, :] = v[:, 0] = v[:, -1] = 0.0
    return u, v, p


def conjugate_gradient(A: Any, b: Any, steps: int) -> Any:
    """Conjugate gradients for ``A x = b``, ``A`` symmetric positive definite."""
    x = np.zeros_like(b)
    r = b - A @ x
    p = r.copy()
    rs = r @ r
    for _ in range(steps):
        Ap = A @ p
        alpha = rs / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rs_new = r @ r
        if np.sqrt(rs_new) < 1e-30:  # never, here: the same number of steps everywhere
            break
        p = r + (rs_new / rs) * p
        rs = rs_new
    return x


# ----------------------------------------------------------------------------
# ``spectral_ns`` as an mpi4py-fft user writes it: a PFFT plan, local arrays.


def spectral_ns_mpi4py_fft(fft: Any, w: Any, kx: Any, ky: Any, steps: int) -> Any:
    """``spectral_ns`` on mpi4py-fft's slab decomposition, returning the local block.

    ``fft`` is a real-to-complex ``PFFT`` over axes (0, 1) of the n x n grid,
    ``w`` this rank's block of the vorticity (rows ``local_slice(False)[0]``),
    ``kx`` (n, 1) and ``ky`` (1, local columns) this rank's wavenumbers of the
    half spectrum (``local_slice(True)``). ``forward`` divides by n^2 and
    ``backward`` does not: the spectral coefficients are NumPy's over n^2 and
    every grid function is NumPy's.
    """
    from mpi4py_fft import newDistArray

    n = fft.global_shape(False)[0]
    nu, dt = 1e-3, 2e-3
    k2 = kx**2 + ky**2
    k2inv = np.where(k2 == 0, 0.0, 1.0 / np.where(k2 == 0, 1.0, k2))
    dealias = (np.abs(kx) < n / 3) & (ky < n / 3)
    u, v, wx, wy = (newDistArray(fft, False) for _ in range(4))
    nonlinear_hat = newDistArray(fft, True)

    def rhs(w_hat: Any) -> Any:
        psi_hat = w_hat * k2inv  # -lap(psi) = w
        fft.backward(1j * ky * psi_hat, u)  # u = d(psi)/dy
        fft.backward(-1j * kx * psi_hat, v)  # v = -d(psi)/dx
        fft.backward(1j * kx * w_hat, wx)
        fft.backward(1j * ky * w_hat, wy)
        fft.forward(u * wx + v * wy, nonlinear_hat)
        return -(dealias * nonlinear_hat) - nu * k2 * w_hat

    w_hat = fft.forward(w, newDistArray(fft, True))
    for _ in range(steps):
        k1 = rhs(w_hat)
        k2_ = rhs(w_hat + dt * k1)
        w_hat = w_hat + 0.5 * dt * (k1 + k2_)
    return fft.backward(w_hat, newDistArray(fft, False))


Baseline = tuple[Callable[[], Any], Callable[[], "np.ndarray | None"], Callable[[], None]]


def mpi4py_fft_spectral(comm: MPI.Intracomm, full: list[np.ndarray], steps: int) -> Baseline | str:
    """The mpi4py-fft run of ``spectral NS`` on ``full`` (``_spectral_inputs``' arrays):
    the call to time, the gather of its solution to rank 0 (None elsewhere;
    collective) and the plan's destructor; or why it cannot run (collective)."""
    try:
        from mpi4py_fft import PFFT, newDistArray
    except ImportError as exc:
        return f"mpi4py_fft cannot be imported ({exc})"
    w, kx, ky = full
    n = w.shape[0]
    fft = PFFT(comm, (n, n), axes=(0, 1), dtype=np.float64, slab=True)
    rows = fft.local_slice(False)
    w_local = newDistArray(fft, False)
    w_local[:] = w[rows]
    spectral_rows, spectral_cols = fft.local_slice(True)
    kx_local, ky_local = kx[spectral_rows], ky[:, spectral_cols]

    def run() -> Any:
        return spectral_ns_mpi4py_fft(fft, w_local, kx_local, ky_local, steps)

    def gather() -> np.ndarray | None:
        blocks = comm.gather((rows, np.asarray(run())), 0)
        if blocks is None:
            return None
        out = np.empty_like(w)
        for where, block in blocks:
            out[where] = block
        return out

    return run, gather, fft.destroy


# ----------------------------------------------------------------------------
# Inputs: the same ndarrays for both runs, with the placements of the dmesh run.

Inputs = list[tuple[np.ndarray, list[Any]]]


def _spectral_inputs(n: int) -> Inputs:
    rng = np.random.default_rng(1)
    x = 2 * np.pi * np.arange(n) / n
    w = np.sin(4 * x)[:, None] * np.cos(3 * x)[None, :] + 0.1 * rng.standard_normal((n, n))
    kx = np.fft.fftfreq(n, 1.0 / n)[:, None]
    ky = np.arange(n // 2 + 1.0)[None, :]
    return [(w, [Shard(0)]), (kx, [Replicate()]), (ky, [Replicate()])]


def _shallow_water_inputs(n: int) -> Inputs:
    x = np.linspace(-1.0, 1.0, n)
    h = 1.0 + 0.1 * np.exp(-((x[:, None] - 0.2) ** 2 + (x[None, :] + 0.1) ** 2) / 0.02)
    return [(h, [Shard(0)]), (np.zeros((n, n)), [Shard(0)]), (np.zeros((n, n)), [Shard(0)])]


def _life_inputs(n: int) -> Inputs:
    Z = (np.random.default_rng(2).random((n, n)) < 0.3).astype(np.int64)
    Z[0] = Z[-1] = Z[:, 0] = Z[:, -1] = 0
    return [(Z, [Shard(0)])]


def _kmeans_inputs(n: int, k: int = 8, d: int = 4) -> Inputs:
    rng = np.random.default_rng(3)
    centres = 10.0 * rng.standard_normal((k, d))
    X = centres[rng.integers(0, k, n)] + rng.standard_normal((n, d))
    return [(X, [Shard(0)]), (X[:k].copy(), [Replicate()])]


def _statistics_inputs(n: int) -> Inputs:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((n, 4)) * [1.0, 2.0, 0.5, 3.0] + [0.0, 1.0, -2.0, 5.0]
    x[:, 1] = np.exp(x[:, 1] / 4)  # a skewed column
    return [(x, [Shard(0)])]


def _cavity_inputs(n: int) -> Inputs:
    return [(np.zeros((n, n)), [Shard(0)]) for _ in range(3)]


def _cg_inputs(n: int) -> Inputs:
    rng = np.random.default_rng(5)
    m = rng.standard_normal((n, n)) / np.sqrt(n)
    A = m @ m.T + np.eye(n)
    return [(A, [Shard(0)]), (rng.standard_normal(n), [Shard(0)])]


@dataclass
class Program:
    name: str
    size: str
    run: Callable[..., Any]
    inputs: Callable[[], Inputs]
    steps: int
    tol: float  # on the max error relative to the largest NumPy value
    repeats: int = 7
    # An mpi4py-fft baseline: (comm, the inputs, steps) -> Baseline, or why it is skipped.
    mpi4py_fft: Callable[[MPI.Intracomm, list[np.ndarray], int], Baseline | str] | None = None


PROGRAMS = [
    Program("spectral NS", "256^2, 10 RK2", spectral_ns, lambda: _spectral_inputs(256), 10,
            1e-10, mpi4py_fft=mpi4py_fft_spectral),
    Program("shallow water", "512^2, 20 steps", shallow_water,
            lambda: _shallow_water_inputs(512), 20, 1e-12),
    Program("game of life", "1024^2, 10 gen", game_of_life, lambda: _life_inputs(1024), 10, 0.0),
    Program("life, expr", "1024^2, 10 gen", game_of_life_expr, lambda: _life_inputs(1024), 10,
            0.0),
    Program("life, roll", "1024^2, 10 gen", game_of_life_roll, lambda: _life_inputs(1024), 10,
            0.0),
    Program("k-means", "5e4 x 4, k=8, 5 it", kmeans, lambda: _kmeans_inputs(50_000), 5, 1e-12),
    Program("statistics", "2.5e5 x 4", statistics, lambda: _statistics_inputs(250_000), 1,
            1e-12),
    Program("cavity flow", "256^2, 10 x 20 it", cavity_flow, lambda: _cavity_inputs(256), 10,
            1e-12),
    Program("dense CG", "2048^2, 40 it", conjugate_gradient, lambda: _cg_inputs(2048), 40,
            1e-10),
]  # fmt: skip


# ----------------------------------------------------------------------------
# Running, checking, timing, profiling.


def _gather(result: Any) -> list[np.ndarray]:
    """Every array of a program's result, whole (DArrays gathered: collective)."""
    parts = result if isinstance(result, tuple) else (result,)
    return [np.asarray(x.full_array() if isinstance(x, DArray) else x) for x in parts]


def _max_error(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    """The largest |got - want| over the largest |want|, across the result's arrays."""
    if len(got) != len(want) or any(g.shape != w.shape for g, w in zip(got, want)):
        return float("inf")
    diff = max(float(np.max(np.abs(g - w), initial=0.0)) for g, w in zip(got, want))
    scale = max(float(np.max(np.abs(w), initial=0.0)) for w in want)
    return diff / max(scale, 1e-300)


def _profile_top(profile: cProfile.Profile) -> list[dict[str, Any]]:
    """The ``TOP`` dmesh-internal functions by own time: tottime, cumtime, calls."""
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    rows = []
    for (filename, line, func), (_, calls, tottime, cumtime, _) in stats.items():
        if filename.startswith(DMESH_DIRS):
            where = f"{Path(filename).relative_to(ROOT)}:{line}({func})"
            rows.append({"function": where, "tottime_s": tottime, "cumtime_s": cumtime,
                         "calls": calls})  # fmt: skip
    rows.sort(key=lambda r: -r["tottime_s"])
    return rows[:TOP]


def measure(comm: MPI.Intracomm, mesh: Any, program: Program) -> dict[str, Any]:
    """Check, time and profile one program (collective)."""
    rank0 = comm.Get_rank() == 0
    inputs = program.inputs()
    full = [a for a, _ in inputs]
    dist = [dmesh.distribute(a, mesh, placements) for a, placements in inputs]
    steps = program.steps

    got = _gather(program.run(*dist, steps))
    want = _gather(program.run(*full, steps)) if rank0 else []
    error = float(comm.bcast(_max_error(got, want) if rank0 else 0.0, 0))

    # The mpi4py-fft baseline, if the program has one: checked here, timed below.
    baseline = None if program.mpi4py_fft is None else program.mpi4py_fft(comm, full, steps)
    pfft: dict[str, Any] | None = None
    pfft_fns: list[Callable[[], Any]] = []
    if isinstance(baseline, str):
        pfft = {"skipped": baseline}
    elif baseline is not None:
        pfft_run, pfft_gather, pfft_destroy = baseline
        solution = pfft_gather()
        pfft_error = _max_error([solution], want) if solution is not None else 0.0
        pfft = {"max_error": float(comm.bcast(pfft_error, 0))}
        pfft["ok"] = pfft["max_error"] <= PFFT_TOL
        pfft_fns.append(pfft_run)

    # The same function through dmesh.compile: its first call traces (and runs), then
    # replays; checked against the eager result, timed in the same batches.
    compiled = dmesh.compile(program.run)
    compiled_error = _max_error(_gather(compiled(*dist, steps)), _gather(program.run(*dist, steps)))
    compiled_error = float(comm.allreduce(compiled_error, op=MPI.MAX))
    # Its steady state is timed: a segmented signature first weighs segments against eager
    # calls (dmesh.compile's segments="auto": SEGMENT_TRIAL + EAGER_TRIAL calls).
    for _ in range(SEGMENT_TRIAL + EAGER_TRIAL):
        compiled(*dist, steps)

    def ours() -> None:
        program.run(*dist, steps)

    def ours_compiled() -> None:
        compiled(*dist, steps)

    def numpy_one_process() -> None:  # the others wait in the batch's closing all-reduce
        if rank0:
            program.run(*full, steps)

    fns = [ours, numpy_one_process, ours_compiled, *pfft_fns]
    times = alternating(comm, fns, 1, program.repeats)
    dmesh_s, numpy_s, compiled_s = times[:3]
    if pfft_fns and pfft is not None:
        pfft["mpi4py_fft_s"] = times[3]
        pfft["vs_mpi4py_fft"] = dmesh_s / times[3]
        pfft_destroy()

    profile = cProfile.Profile()
    if rank0:
        profile.enable()
    ours()
    if rank0:
        profile.disable()
    comm.Barrier()
    return {
        "case": program.name,
        "size": program.size,
        "numpy_one_process_s": numpy_s,
        "dmesh_s": dmesh_s,
        "ratio": dmesh_s / numpy_s,
        "max_error": error,
        "tolerance": program.tol,
        "compiled_s": compiled_s,
        "compiled_vs_eager": compiled_s / dmesh_s,
        "compiled_max_error": compiled_error,
        "compiled_breaks": list(compiled.breaks),
        "compiled_mode": _mode(compiled.describe_plan(*dist, steps)),
        "ok": error <= program.tol
        and compiled_error <= program.tol
        and (pfft is None or pfft.get("ok", True)),
        "mpi4py_fft": pfft,
        "profile": _profile_top(profile) if rank0 else [],
    }


def _mode(described: str) -> str:
    """How a compiled signature runs, from its ``describe_plan``: one plan, in segments,
    or eagerly (its segments were slower than eager calls)."""
    if described.startswith("runs eagerly"):
        return "eager"
    return "segments" if described.startswith("graph break") else "whole plan"


def _laplacian_block(block: np.ndarray) -> np.ndarray:
    """The 5-point Laplacian of a padded block, in the padded shape (zero rim)."""
    out = np.zeros_like(block)
    out[1:-1, 1:-1] = (
        block[2:, 1:-1] + block[:-2, 1:-1] + block[1:-1, 2:] + block[1:-1, :-2]
        - 4 * block[1:-1, 1:-1]
    )  # fmt: skip
    return out


def stencil_case(comm: MPI.Intracomm, mesh: Any, n: int = 512) -> dict[str, Any]:
    """The sliced 5-point stencil against ``dmesh.map_overlap`` on one ``Shard(0)`` field."""
    field = np.random.default_rng(6).standard_normal((n, n))
    Z = dmesh.distribute(field, mesh, [Shard(0)])

    def sliced() -> Any:
        return Z[2:, 1:-1] + Z[:-2, 1:-1] + Z[1:-1, 2:] + Z[1:-1, :-2] - 4 * Z[1:-1, 1:-1]

    def overlap() -> Any:
        return dmesh.map_overlap(_laplacian_block, Z, 1, boundary=0.0)

    def numpy_one_process() -> None:
        if comm.Get_rank() == 0:
            f = field
            f[2:, 1:-1] + f[:-2, 1:-1] + f[1:-1, 2:] + f[1:-1, :-2] - 4 * f[1:-1, 1:-1]

    error = _max_error(_gather(sliced()), [overlap().full_array()[1:-1, 1:-1]])
    sliced_s, overlap_s, numpy_s = alternating(comm, [sliced, overlap, numpy_one_process], 20)
    return {
        "case": f"5-point stencil {n}^2 S(0)",
        "sliced_s": sliced_s,
        "map_overlap_s": overlap_s,
        "numpy_one_process_s": numpy_s,
        "ratio": sliced_s / overlap_s,
        "target": STENCIL_RATIO,
        "met": sliced_s / overlap_s <= STENCIL_RATIO,
        "max_error": error,
        "ok": error <= 1e-14,
    }


def main() -> int:
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    rows = [measure(comm, mesh, program) for program in PROGRAMS]
    stencil = stencil_case(comm, mesh)
    if rank == 0:
        print(f"NumPy programs on DArrays at {p} rank{'s' * (p > 1)}, "
              f"{time.strftime('%Y-%m-%d %H:%M')}; one BLAS thread per rank")  # fmt: skip
        print("(numpy: the same function on the whole ndarrays on rank 0 alone, same run;")
        print(" ratio: dmesh / numpy, below 1 is faster; max err relative to the largest value)")
        print(" compiled: dmesh.compile of the same function, its time / the eager dmesh time)")
        print(f"{'program':<14} {'size':<19} {'numpy':>9} {'dmesh':>9} {'ratio':>6} "
              f"{'max err':>8}  ok  {'compiled':>8}")  # fmt: skip
        for r in rows:
            print(f"{r['case']:<14} {r['size']:<19} {r['numpy_one_process_s'] * 1e3:>6.1f} ms"
                  f" {r['dmesh_s'] * 1e3:>6.1f} ms {r['ratio']:>6.2f} {r['max_error']:>8.1e}  "
                  f"{'yes' if r['ok'] else 'NO '} {r['compiled_vs_eager']:>8.2f}")  # fmt: skip
        print("\nHow each compiled program runs (one plan; in segments from its first graph "
              "break; or eagerly, where segments were slower) and where it breaks:")  # fmt: skip
        for r in rows:
            breaks = r["compiled_breaks"]
            print(f"  {r['case']}: {r['compiled_mode']}, {breaks[0] if breaks else 'no break'}")
        for r in rows:
            b = r["mpi4py_fft"]
            if b is None:
                continue
            if "skipped" in b:
                print(f"{r['case']} vs mpi4py-fft: skipped, {b['skipped']}")
                continue
            print(f"{r['case']} vs mpi4py-fft (PFFT r2c slab, FFTW, {p} rank{'s' * (p > 1)}, "
                  f"same batches): dmesh {r['dmesh_s'] * 1e3:.1f} ms, mpi4py-fft "
                  f"{b['mpi4py_fft_s'] * 1e3:.1f} ms, vs mpi4py-fft "
                  f"{b['vs_mpi4py_fft']:.2f}")  # fmt: skip
            print(f"  (dmesh / mpi4py-fft; numpy 1 process {r['numpy_one_process_s'] * 1e3:.1f} ms;"
                  f" mpi4py-fft's max err vs numpy {b['max_error']:.1e}, tol {PFFT_TOL:.0e}, "
                  f"{'ok' if b['ok'] else 'NOT ok'})")  # fmt: skip
        print(f"\nTop {TOP} dmesh-internal costs of one dmesh run on rank 0 (cProfile, by tottime;")
        print(" a ufunc call has no entry of its own: its loop counts in its caller's tottime,")
        print(" e.g. ops/pipeline.py perform; an MPI call's wait counts in its caller's)")
        for r in rows:
            print(f"{r['case']}:")
            print(f"  {'tottime':>9} {'cumtime':>9} {'calls':>7}  function")
            for e in r["profile"]:
                print(f"  {e['tottime_s'] * 1e3:>6.1f} ms {e['cumtime_s'] * 1e3:>6.1f} ms "
                      f"{e['calls']:>7}  {e['function']}")  # fmt: skip
        s = stencil
        print(f"\n{s['case']}: shifted slices {s['sliced_s'] * 1e3:.2f} ms, map_overlap "
              f"{s['map_overlap_s'] * 1e3:.2f} ms, numpy 1 process "
              f"{s['numpy_one_process_s'] * 1e3:.2f} ms; slices / map_overlap {s['ratio']:.2f} "
              f"(target <= {STENCIL_RATIO}: {'met' if s['met'] else 'NOT met'}); "
              f"max err {s['max_error']:.1e}")  # fmt: skip
        write_results(f"programs-{p}ranks", {"ranks": p, "rows": rows, "stencil": stencil})
    ok = all(r["ok"] for r in rows) and stencil["ok"]
    if rank == 0 and not ok:
        bad = [r["case"] for r in rows if not r["ok"]] + ([] if stencil["ok"] else ["stencil"])
        print(f"FAILED: dmesh's (or mpi4py-fft's) result differs from NumPy's in "
              f"{', '.join(bad)}")  # fmt: skip
    mesh.close()
    comm.Free()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
