"""Benchmark: one halo exchange of a 4096 x 4096 float64 field, row slabs, at 2 ranks.

``dmesh.halo(a, ((1, 1), (0, 0)))`` against the same work written by hand with
mpi4py: a padded block allocated, the block copied in, two ``Sendrecv`` of
one row each (``MPI.PROC_NULL`` at the global edges, zero rows there). The
ratio is dmesh's time over the hand-written one (target: at most 1.1). Also
the async form (``async_op=True`` then ``wait()``) and a periodic exchange.
"""

from __future__ import annotations

import sys

import numpy as np
from bench_timing import alternating, write_results
from mpi4py import MPI

import dmesh
from dmesh import Shard


def by_hand(comm: MPI.Intracomm, block: np.ndarray, periodic: bool) -> np.ndarray:
    """The mpi4py baseline: what a user writes for the same padded block."""
    p, r = comm.Get_size(), comm.Get_rank()
    up = (r - 1) % p if periodic or r > 0 else MPI.PROC_NULL
    down = (r + 1) % p if periodic or r < p - 1 else MPI.PROC_NULL
    padded = np.empty((block.shape[0] + 2, block.shape[1]))
    padded[1:-1] = block
    if up == MPI.PROC_NULL:
        padded[0] = 0.0
    if down == MPI.PROC_NULL:
        padded[-1] = 0.0
    comm.Sendrecv(block[-1], dest=down, recvbuf=padded[0], source=up)
    comm.Sendrecv(block[0], dest=up, recvbuf=padded[-1], source=down)
    return padded


def main() -> int:
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    n = 4096
    dmesh.random.seed(1)
    field = dmesh.random.normal(size=(n, n), mesh=mesh, placements=[Shard(0)])
    block = field.local
    rows_only = ((1, 1), (0, 0))
    for periodic in (False, True):  # the same cells both ways
        same = np.array_equal(
            dmesh.halo(field, rows_only, periodic), by_hand(comm, block, periodic)
        )
        if not comm.allreduce(same, op=MPI.LAND):
            raise SystemExit("bench_halo: dmesh.halo and the mpi4py baseline disagree")
    cases = [
        ("halo (sync)", lambda: dmesh.halo(field, rows_only), False),
        ("halo (async + wait)", lambda: dmesh.halo(field, rows_only, async_op=True).wait(), False),
        ("halo (periodic)", lambda: dmesh.halo(field, rows_only, periodic=True), True),
    ]
    rows = []
    for name, ours, periodic in cases:
        base = lambda periodic=periodic: by_hand(comm, block, periodic)  # noqa: E731
        ours_t, base_t = alternating(comm, [ours, base], calls=10)
        rows.append({"case": name, "dmesh_s": ours_t, "mpi4py_s": base_t, "ratio": ours_t / base_t})
    if rank == 0:
        print(f"halo exchange of a {n}x{n} float64 field, Shard(0), width 1, at {p} ranks")
        print("baseline: padded block + 2 Sendrecv written with mpi4py")
        for r in rows:
            print(f"{r['case']:<22} dmesh {r['dmesh_s'] * 1e3:7.3f} ms  "
                  f"mpi4py {r['mpi4py_s'] * 1e3:7.3f} ms  ratio {r['ratio']:.2f}")  # fmt: skip
        write_results("halo", {"ranks": p, "rows": rows})
    mesh.close()
    comm.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
