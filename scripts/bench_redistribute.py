"""Benchmark: DArray redistribution against the best hand-written mpi4py in the same run.

A 4096 x 4096 float64 array at 2 ranks:

* ``Shard(0) -> Shard(1)``: baselines are packing the column blocks into one
  buffer plus ``Alltoall``, and ``Alltoallw`` with subarray datatypes (no
  packing); the faster of the two is the reference.
* ``Shard(0) -> Replicate()``: ``Allgather`` into a preallocated array.
* ``Partial("sum") -> Shard(0)``: ``Reduce_scatter_block``.

Times are medians of alternating runs (the slowest rank's time). Peak memory is
the largest extra NumPy allocation during one call (``tracemalloc``), in units
of the rank's local block.
"""

from __future__ import annotations

import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_timing import write_results
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard

N = 4096
REPEATS = 11


def timed(comm: MPI.Intracomm, fn: Callable[[], Any]) -> float:
    comm.Barrier()
    start = time.perf_counter()
    fn()
    return float(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))


def peak_extra(fn: Callable[[], Any]) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak - base


def main() -> int:
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    rows = N // p
    local = np.random.default_rng(rank).standard_normal((rows, N))
    block_bytes = local.nbytes
    a = dmesh.from_local(local, mesh, [Shard(0)], shape=(N, N))
    partial = dmesh.from_local(
        np.random.default_rng(9).standard_normal((N, N)), mesh, [Partial()], shape=(N, N)
    )

    # Hand-written baselines.
    out_cols = np.empty((N, N // p))
    packed = np.empty(rows * N)

    def pack_alltoall() -> np.ndarray:
        send = packed.reshape(p, rows, N // p)
        for q in range(p):  # the column block for rank q, made contiguous
            send[q] = local[:, q * (N // p) : (q + 1) * (N // p)]
        comm.Alltoall(packed, out_cols)
        return out_cols

    send_types = [
        MPI.DOUBLE.Create_subarray([rows, N], [rows, N // p], [0, q * (N // p)]).Commit()
        for q in range(p)
    ]
    recv_types = [
        MPI.DOUBLE.Create_subarray([N, N // p], [rows, N // p], [q * rows, 0]).Commit()
        for q in range(p)
    ]

    def alltoallw() -> np.ndarray:
        comm.Alltoallw(
            [local, [1] * p, [0] * p, send_types], [out_cols, [1] * p, [0] * p, recv_types]
        )
        return out_cols

    full = np.empty((N, N))
    piece = np.empty((rows, N))
    cases: dict[str, tuple[Callable[[], Any], dict[str, Callable[[], Any]]]] = {
        "Shard(0)->Shard(1)": (
            lambda: a.redistribute(mesh, [Shard(1)]),
            {"pack+Alltoall": pack_alltoall, "Alltoallw(subarray)": alltoallw},
        ),
        "Shard(0)->Replicate": (
            lambda: a.redistribute(mesh, [Replicate()]),
            {"Allgather": lambda: comm.Allgather(local, full)},
        ),
        "Partial->Shard(0)": (
            lambda: partial.redistribute(mesh, [Shard(0)]),
            {"Reduce_scatter_block": lambda: comm.Reduce_scatter_block(partial.local, piece)},
        ),
    }
    # The results are right before they are fast.
    moved = a.redistribute(mesh, [Shard(1)]).local
    if not (np.array_equal(moved, pack_alltoall()) and np.array_equal(moved, alltoallw())):
        raise RuntimeError("Shard(0)->Shard(1): dmesh and the baselines disagree")

    rows_out = []
    for name, (ours, baselines) in cases.items():
        fns = {"dmesh": ours, **baselines}
        for fn in fns.values():
            fn()  # warm up
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(REPEATS):
            for k, fn in fns.items():
                times[k].append(timed(comm, fn))
        medians = {k: statistics.median(v) for k, v in times.items()}
        best = min(baselines, key=lambda k: medians[k])
        peaks = comm.allreduce(peak_extra(ours), op=MPI.MAX)
        rows_out.append(
            {
                "case": name,
                "dmesh_s": medians["dmesh"],
                "baselines_s": {k: medians[k] for k in baselines},
                "best": best,
                "ratio": medians["dmesh"] / medians[best],
                "peak_extra_blocks": peaks / block_bytes,
            }
        )
    for t in send_types + recv_types:
        t.Free()
    if rank == 0:
        print(f"redistribution of a {N}x{N} float64 array at {p} ranks (median of {REPEATS})")
        print(f"{'case':<22} {'dmesh':>9} {'best baseline':>30} {'ratio':>6} {'peak/block':>10}")
        for r in rows_out:
            best = f"{r['best']} {r['baselines_s'][r['best']] * 1e3:.1f} ms"
            others = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in r["baselines_s"].items())
            print(
                f"{r['case']:<22} {r['dmesh_s'] * 1e3:>6.1f} ms {best:>30} "
                f"{r['ratio']:>6.2f} {r['peak_extra_blocks']:>10.2f}"
            )
            print(f"{'':<22} baselines: {others}")
        write_results("redistribute", {"ranks": p, "n": N, "rows": rows_out})
    mesh.close()
    comm.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
