"""A least-squares polynomial fit to noisy samples, solved with np.linalg.lstsq on DArrays.

Draws ``t`` uniform in [-1, 1] and ``y = p(t) + noise`` (``dmesh.random``: the
same global arrays whatever the rank count), builds the design matrix
``A = [1, t, t^2, ..., t^d]`` with its rows sharded (``Shard(0)``: each rank
holds only its samples) and fits ``A x ~ y`` with ``np.linalg.lstsq``, which
runs TSQR: each rank factors its rows, the small R factors are combined in a
tree of ``log2 p`` messages, and ``x`` comes back replicated. No rank ever
holds the whole matrix.

    python scripts/examples/least_squares.py
    mpiexec -n 4 python scripts/examples/least_squares.py --samples 1000000

Checks ``x``, the residual and the singular values against numpy.linalg.lstsq
of the same data on one process (rank 0); exits non-zero on a mismatch.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Shard

TRUE = np.array([0.5, -2.0, 0.0, 3.0, 1.0, -0.75])  # p(t), lowest degree first
NOISE = 0.05


def samples(n: int, mesh: dmesh.DeviceMesh) -> tuple[dmesh.DArray, dmesh.DArray]:
    """The design matrix and the noisy observations, rows sharded over ``mesh``."""
    dmesh.random.seed(2024)  # the same draws (and so the same arrays) on any mesh
    t = dmesh.random.uniform(-1.0, 1.0, size=(n,), mesh=mesh, placements=[Shard(0)])
    noise = dmesh.random.normal(0.0, NOISE, size=(n,), mesh=mesh, placements=[Shard(0)])
    powers = [t**k for k in range(len(TRUE))]
    y = sum(c * p for c, p in zip(TRUE, powers)) + noise
    return np.stack(powers, axis=1), y


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000, help="number of samples")
    parser.add_argument("--compiled", action="store_true", help="the fit through dmesh.compile")
    args = parser.parse_args()
    n = args.samples
    # Compiled, TSQR reads the blocks itself: a graph break, run eagerly with the same result.
    lstsq = dmesh.compile(np.linalg.lstsq) if args.compiled else np.linalg.lstsq

    world = MPI.COMM_WORLD
    mesh = dmesh.init_mesh()
    a, y = samples(n, mesh)
    start = time.perf_counter()
    x, residuals, rank, s = lstsq(a, y)
    elapsed = world.allreduce(time.perf_counter() - start, op=MPI.MAX)
    fit, res, values = x.full_array(), residuals.full_array(), s.full_array()  # replicated

    ok = True
    if world.rank == 0:
        # The same data on one process: a one-rank mesh draws the same global arrays.
        with dmesh.init_mesh(comm=MPI.COMM_SELF) as alone:
            a1, y1 = samples(n, alone)
            x_np, res_np, rank_np, s_np = np.linalg.lstsq(a1.to_local(), y1.to_local())
        errors = {
            "x": float(np.max(np.abs(fit - x_np)) / np.max(np.abs(x_np))),
            "residual": float(np.max(np.abs(res - res_np)) / np.max(res_np)),
            "s": float(np.max(np.abs(values - s_np)) / s_np[0]),
        }
        ok = rank == rank_np and max(errors.values()) < 1e-10
        sigma = float(np.sqrt(res[0] / (n - len(TRUE))))
        print(f"least_squares: {n} samples, degree {len(TRUE) - 1}, on {world.size} rank(s)")
        cond = s_np[0] / s_np[-1]
        print(f"  A {a.spec}; lstsq {elapsed * 1e3:.1f} ms; rank {rank}, condition {cond:.1f}")
        print(f"  fitted {np.round(fit, 3)}")
        print(f"  true   {TRUE}; noise estimate {sigma:.4f} (true {NOISE})")
        relative = ", ".join(f"{k} {v:.1e}" for k, v in errors.items())
        print(f"  against numpy.linalg.lstsq (relative): {relative}: {'OK' if ok else 'MISMATCH'}")
    ok = world.bcast(ok, root=0)
    mesh.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
