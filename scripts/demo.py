"""dmesh demo: 2-D heat diffusion on a mesh of ranks, with a checkpoint and restart.

The field (a hot square on a cold plate, zero temperature outside) is split
into blocks over a 2-D mesh. Each explicit finite-difference step exchanges
one cell with each neighbour (``dmesh.map_overlap``: a halo exchange, corners
included) and applies the five-point stencil written for plain NumPy. Half
way through, the run is checkpointed, the field is dropped, and the run
resumes from the files, as a job restarted by Slurm would. At the end:

* the sharding picture of the field (``dmesh.visualize``),
* the table of the communication this rank took part in (``dmesh.debug.CommMode``),
* the check: the field equals NumPy's on one process.

    make demo                                 # mpiexec -n 4: a (2, 2) mesh
    python scripts/demo.py                    # one rank
    mpiexec -n 4 python scripts/demo.py --n 512 --steps 400

Exits non-zero on every rank if the field differs from NumPy's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Shard

# The field, the NumPy stencil and the one-process reference of the heat example.
sys.path.insert(0, str(Path(__file__).resolve().parent / "examples"))
from heat2d import initial_field, numpy_reference, step

ALPHA = 0.2  # diffusion number; below 0.25 the explicit scheme is stable


def run(u: dmesh.DArray, steps: int) -> dmesh.DArray:
    """``steps`` diffusion steps, each one halo exchange and one NumPy stencil per block."""
    for _ in range(steps):
        u = dmesh.map_overlap(step, u, depth=1, boundary="constant", alpha=ALPHA)
    return u


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="grid points per side (default 256)")
    parser.add_argument("--steps", type=int, default=200, help="time steps (default 200)")
    parser.add_argument(
        "--checkpoint", default="build/demo-checkpoint", help="checkpoint directory"
    )
    args = parser.parse_args()

    world = MPI.COMM_WORLD
    shape = tuple(MPI.Compute_dims(world.size, 2))  # (2, 2) on 4 ranks
    mesh = dmesh.init_mesh(shape, names=("x", "y"))
    show = mesh.rank == 0
    placements = [Shard(0), Shard(1)]
    if show:
        print(f"dmesh demo: {args.n}x{args.n} heat diffusion, {args.steps} steps, "
              f"{world.size} rank(s) on a {shape} mesh\n")  # fmt: skip
    if world.rank == 0:
        Path(args.checkpoint).parent.mkdir(parents=True, exist_ok=True)
    world.Barrier()  # the checkpoint's parent exists before any rank uses it

    start = time.perf_counter()
    with dmesh.debug.CommMode() as comm:
        u = dmesh.distribute(initial_field(args.n), mesh, placements)
        heat_before = float(np.sum(u))
        half = args.steps // 2
        u = run(u, half)
        dmesh.save_checkpoint(args.checkpoint, {"u": u}, metadata={"step": half})
        del u  # a restarted job has only the files
        arrays, metadata = dmesh.load_checkpoint(args.checkpoint, mesh)
        u = run(arrays["u"], args.steps - metadata["step"])
        heat_after = float(np.sum(u))
        field = u.full_array()
    elapsed = time.perf_counter() - start

    dmesh.visualize(u)  # prints on mesh rank 0
    if show:
        print(f"\ntotal heat: {heat_before:.1f} at the start, {heat_after:.1f} after "
              f"{args.steps} steps")  # fmt: skip
        print(f"checkpoint at step {half}: {args.checkpoint}/ (manifest.json, u.npy)\n")
        print(comm.summary())

    want = numpy_reference(args.n, args.steps, ALPHA)
    error = float(np.max(np.abs(field - want)))
    ok = error <= 1e-12 * float(np.max(np.abs(want)))
    ok = bool(world.allreduce(ok, op=MPI.LAND))  # every rank exits with the same verdict
    if show:
        verdict = "OK, matches" if ok else "MISMATCH with"
        print(f"\ncheck: max |dmesh - numpy| = {error:.2e}: {verdict} NumPy on one process")
        print(f"time: {elapsed:.2f} s for the distributed run")
    mesh.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
