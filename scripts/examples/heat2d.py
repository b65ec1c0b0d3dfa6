"""2-D heat equation with halo exchange, checked against NumPy on one process.

Explicit finite differences for u_t = alpha * (u_xx + u_yy) on an n x n grid
with fixed zero temperature outside the domain, a hot square in the middle
at the start. Each step is one ``dmesh.map_overlap``: every rank gets its
block with one cell from each neighbour (corners included), applies the
five-point stencil written for plain NumPy, and the halo is trimmed.

    python scripts/examples/heat2d.py                 # one rank
    mpiexec -n 4 python scripts/examples/heat2d.py    # a (2, 2) mesh
    python scripts/examples/heat2d.py --compiled      # each step through dmesh.compile

Exits non-zero if the field after the last step differs from NumPy's.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Shard


def initial_field(n: int) -> np.ndarray:
    u = np.zeros((n, n))
    u[n // 4 : 3 * n // 4, n // 4 : 3 * n // 4] = 100.0
    return u


def step(padded: np.ndarray, alpha: float) -> np.ndarray:
    """One explicit step on a block padded by one cell (the NumPy stencil)."""
    out = padded.copy()
    centre = padded[1:-1, 1:-1]
    out[1:-1, 1:-1] = centre + alpha * (
        padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * centre
    )
    return out


def numpy_reference(n: int, steps: int, alpha: float) -> np.ndarray:
    u = initial_field(n)
    for _ in range(steps):
        u = step(np.pad(u, 1), alpha)[1:-1, 1:-1]
    return u


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="grid points per side")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--compiled", action="store_true", help="steps through dmesh.compile")
    args = parser.parse_args()
    alpha = 0.2  # below 0.25: the explicit scheme is stable

    world = MPI.COMM_WORLD
    side = math.isqrt(world.size)
    shape = (side, side) if side * side == world.size else (world.size,)
    mesh = dmesh.init_mesh(shape, names=("x", "y")[: len(shape)])
    placements = [Shard(d) for d in range(len(shape))]
    u = dmesh.distribute(initial_field(args.n), mesh, placements)

    def advance(u: dmesh.DArray) -> dmesh.DArray:
        return dmesh.map_overlap(step, u, depth=1, boundary="constant", alpha=alpha)

    if args.compiled:  # traced once, replayed: no per-step shape check
        advance = dmesh.compile(advance)
    start = time.perf_counter()
    for _ in range(args.steps):
        u = advance(u)
    elapsed = time.perf_counter() - start

    field = u.full_array()
    total = float(np.sum(u))
    ok = True
    if world.rank == 0:
        want = numpy_reference(args.n, args.steps, alpha)
        error = float(np.max(np.abs(field - want)))
        ok = error <= 1e-12 * float(np.max(np.abs(want)))
        print(f"heat2d: {args.n}x{args.n} grid, {args.steps} steps on mesh {shape}, "
              f"{elapsed:.3f} s; heat left {total:.6f}")  # fmt: skip
        print(f"max |dmesh - numpy| = {error:.3e}: {'OK' if ok else 'MISMATCH'}")
    ok = world.bcast(ok, root=0)
    mesh.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
