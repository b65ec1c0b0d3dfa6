"""Benchmark: ``np.isin`` of 10^6 sharded queries in 10^6 sharded test values.

At 2 ranks (``make bench``): dmesh's ``np.isin`` on a 1-D mesh (the test values
sample-sorted, each query answered by the rank owning its value: see
``ops/kernels/search.py``) beside ``numpy.isin`` on one process (rank 0, same run),
and ``np.isin`` of replicated test values (each rank answers its own queries, no
message). The result is checked against NumPy once, outside the timings.

Usage: ``mpiexec -n 2 python scripts/bench_sets.py [out.json]``
(default ``build/bench/sets.json``).
"""

from __future__ import annotations

import numpy as np
from bench_timing import median_time, one_rank_time, write_results
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard

N = 10**6


def main() -> None:
    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    rng = np.random.default_rng(0)
    queries = rng.integers(0, 4 * N, N)
    values = rng.integers(0, 4 * N, N)
    expected = np.isin(queries, values)
    repeats = 7
    numpy_s = one_rank_time(comm, lambda: np.isin(queries, values), repeats, warmup=True)
    rows = []
    with dmesh.init_mesh((p,), comm=comm) as mesh:
        q = dmesh.distribute(queries, mesh, [Shard(0)])
        for label, placement in (("sharded", Shard(0)), ("replicated", Replicate())):
            v = dmesh.distribute(values, mesh, [placement])
            got = np.asarray(np.isin(q, v).full_array())
            ok = bool(comm.allreduce(np.array_equal(got, expected), op=MPI.LAND))
            seconds = median_time(comm, lambda v=v: np.isin(q, v), repeats, warmup=True)
            rows.append({"test_values": label, "seconds": seconds, "numpy_seconds": numpy_s,
                         "speedup": numpy_s / seconds, "correct": ok})  # fmt: skip
    if comm.Get_rank() == 0:
        print(f"np.isin of {N:.0e} int64 queries in {N:.0e} values, {p} ranks, 1-D mesh")
        print("(baseline: numpy.isin on one process, rank 0, same run)")
        print(f"{'test values':<12} {'dmesh s':>9} {'numpy s':>9} {'speedup':>8}  correct")
        for r in rows:
            print(f"{r['test_values']:<12} {r['seconds']:9.4f} {r['numpy_seconds']:9.4f} "
                  f"{r['speedup']:7.2f}x  {r['correct']}")  # fmt: skip
        write_results("sets", {"ranks": p, "n": N, "rows": rows})


if __name__ == "__main__":
    main()
