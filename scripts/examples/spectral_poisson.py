"""Periodic 3-D Poisson equation solved with the distributed FFT, checked two ways.

Solves -lap(u) = f on [0, 2 pi)^3 with periodic boundaries on an n^3 grid:
``rfftn`` of f, division by |k|^2 (the zero mode, the free constant, set to
0), ``irfftn`` back. On a 2-D mesh of ranks this is the pencil decomposition:
f is ``(Shard(0), Shard(1))``, its spectrum ``(Shard(1), Shard(2))`` (one
all-to-all per mesh dim), and u comes back as ``(Shard(0), Shard(1))`` with
no redistribution in between; no rank holds more than its blocks. The right
side is built from u = sin(x) cos(2y) sin(3z) + cos(x - z)/2, so u is known.

    python scripts/examples/spectral_poisson.py                 # one rank
    mpiexec -n 4 python scripts/examples/spectral_poisson.py    # a (2, 2) mesh

Checks u against the analytic solution and against the same solve with
``numpy.fft`` on one process (rank 0); exits non-zero on a mismatch.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import DArraySpec, Shard


def local_grid(spec: DArraySpec, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The coordinates of this rank's block of the n^3 grid, as broadcastable 1-D arrays."""
    start, shape = spec.offsets(), spec.local_shape()
    points = 2 * np.pi * np.arange(n) / n
    x, y, z = (points[s : s + m] for s, m in zip(start, shape))
    return x[:, None, None], y[None, :, None], z[None, None, :]


def exact(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    return np.sin(x) * np.cos(2 * y) * np.sin(3 * z) + 0.5 * np.cos(x - z)


def rhs(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """-lap(u): each Fourier mode is multiplied by |k|^2 (14 and 2)."""
    return 14 * np.sin(x) * np.cos(2 * y) * np.sin(3 * z) + np.cos(x - z)


def wavenumbers(spec: DArraySpec, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """|k| components of this rank's block of the rfftn spectrum (n, n, n // 2 + 1)."""
    start, shape = spec.offsets(), spec.local_shape()
    full = (np.fft.fftfreq(n, 1 / n), np.fft.fftfreq(n, 1 / n), np.arange(n // 2 + 1.0))
    kx, ky, kz = (k[s : s + m] for k, s, m in zip(full, start, shape))
    return kx[:, None, None], ky[None, :, None], kz[None, None, :]


def divide_by_k2(f_hat: np.ndarray, kx: np.ndarray, ky: np.ndarray, kz: np.ndarray) -> np.ndarray:
    """Solve |k|^2 u_hat = f_hat on one block; the k = 0 mode (the mean) is set to 0."""
    k2 = kx**2 + ky**2 + kz**2
    return np.where(k2 == 0, 0, f_hat / np.where(k2 == 0, 1, k2))


def solve_numpy(f: np.ndarray) -> np.ndarray:
    """The same solve with numpy.fft on one process."""
    n = f.shape[0]
    kx = np.fft.fftfreq(n, 1 / n)[:, None, None]
    ky = np.fft.fftfreq(n, 1 / n)[None, :, None]
    kz = np.arange(n // 2 + 1.0)[None, None, :]
    return np.fft.irfftn(divide_by_k2(np.fft.rfftn(f), kx, ky, kz), s=f.shape, axes=(0, 1, 2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="grid points per side")
    parser.add_argument("--compiled", action="store_true", help="the solve through dmesh.compile")
    args = parser.parse_args()
    n = args.n

    world = MPI.COMM_WORLD
    shape = tuple(MPI.Compute_dims(world.size, 2))
    mesh = dmesh.init_mesh(shape, names=("x", "y"))
    placements = [Shard(0), Shard(1)]
    template = dmesh.empty((n, n, n), mesh=mesh, placements=placements)
    f = dmesh.from_local(rhs(*local_grid(template.spec, n)), mesh, placements, shape=(n, n, n))

    def solve(f: dmesh.DArray) -> tuple[dmesh.DArray, dmesh.DArray]:
        f_hat = np.fft.rfftn(f)
        u_hat = dmesh.map_blocks(divide_by_k2, f_hat, *wavenumbers(f_hat.spec, n))
        return f_hat, np.fft.irfftn(u_hat, s=(n, n, n), axes=(0, 1, 2))

    if args.compiled:  # the FFTs read blocks: a graph break, run eagerly with the same result
        solve = dmesh.compile(solve)
    start = time.perf_counter()
    f_hat, u = solve(f)
    elapsed = world.allreduce(time.perf_counter() - start, op=MPI.MAX)

    # The analytic check on each rank's block, then one verdict.
    analytic = float(np.max(np.abs(u.local - exact(*local_grid(u.spec, n))), initial=0.0))
    analytic = world.allreduce(analytic, op=MPI.MAX)
    field, rhs_full = u.full_array(), f.full_array()  # gathered once, for the check only
    ok = True
    if world.rank == 0:
        against_numpy = float(np.max(np.abs(field - solve_numpy(rhs_full))))
        ok = analytic < 1e-12 and against_numpy < 1e-12
        print(f"spectral_poisson: {n}^3 grid on mesh {shape}, f {f.spec}")
        print(f"  spectrum {f_hat.spec}; u {u.spec}; solve {elapsed * 1e3:.1f} ms")
        print(f"  max |u - exact| = {analytic:.2e}, max |u - numpy.fft| = {against_numpy:.2e}: "
              f"{'OK' if ok else 'MISMATCH'}")  # fmt: skip
    ok = world.bcast(ok, root=0)
    mesh.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
