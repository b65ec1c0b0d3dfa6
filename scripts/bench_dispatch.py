"""Benchmark: the cost of dispatching NumPy calls on DArrays, and their throughput.

At 2 ranks (one BLAS thread per rank):

* a cached ``a + b``, ``float(np.sum(a))`` and ``a @ b`` on tiny arrays, beside
  the same NumPy call on the local block (and, for the full sum, the raw
  mpi4py ``Allreduce`` of the local sum): the difference is the dispatch
  overhead;
* ``y = a * b + c`` on 2 x 10^7 float64 elements, beside NumPy on the local
  blocks: throughput ratio;
* a 2048 x 2048 float64 matmul, row-sharded times replicated, beside NumPy on
  one rank: speed-up.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_timing import alternating, write_results
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard


def per_call(comm: MPI.Intracomm, fn: Callable[[], Any], calls: int, repeats: int = 7) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append(comm.allreduce((time.perf_counter() - start) / calls, op=MPI.MAX))
    return float(statistics.median(samples))


def main() -> int:
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    rows = []

    tiny = np.arange(8.0 * p)
    a = dmesh.distribute(tiny, mesh, [Shard(0)])
    b = dmesh.distribute(tiny + 1, mesh, [Shard(0)])
    la, lb = a.local, b.local
    out = np.empty(1)
    m = dmesh.distribute(np.ones((4 * p, 4)), mesh, [Shard(0)])
    v = dmesh.distribute(np.ones(4), mesh, [Replicate()])
    lm, lv = m.local, v.local
    small = [
        ("a + b (tiny, cached)", lambda: a + b, lambda: la + lb),
        (
            "float(np.sum(a)) (tiny)",
            lambda: float(np.sum(a)),
            lambda: comm.Allreduce(np.sum(la, keepdims=True), out),
        ),
        ("a @ b (tiny, cached)", lambda: m @ v, lambda: lm @ lv),
    ]
    for name, ours, base in small:
        ours_t, base_t = alternating(comm, [ours, base], calls=2000)
        ratio = ours_t / base_t
        rows.append({"case": name, "dmesh_s": ours_t, "baseline_s": base_t, "ratio": ratio})

    n = 2 * 10**7
    big = [dmesh.full((n,), float(i + 1), mesh=mesh) for i in range(3)]
    x, y, z = big
    lx, ly, lz = x.local, y.local, z.local
    ours_t, base_t = alternating(comm, [lambda: x * y + z, lambda: lx * ly + lz], calls=3)
    rows.append({"case": "y = a*b + c (2e7 f64)", "dmesh_s": ours_t, "baseline_s": base_t,
                 "ratio": ours_t / base_t, "throughput_vs_numpy": base_t / ours_t})  # fmt: skip

    size = 2048
    full = np.random.default_rng(0).standard_normal((size, size))
    left = dmesh.distribute(full, mesh, [Shard(0)])
    right = dmesh.distribute(full, mesh, [Replicate()])
    ours_t = per_call(comm, lambda: left @ right, 1, repeats=5)
    one_rank = 0.0
    if rank == 0:
        start = time.perf_counter()
        for _ in range(3):
            full @ full
        one_rank = (time.perf_counter() - start) / 3
    one_rank = comm.bcast(one_rank, 0)
    rows.append({"case": f"{size}x{size} matmul S(0) @ R", "dmesh_s": ours_t,
                 "baseline_s": one_rank, "speedup": one_rank / ours_t})  # fmt: skip

    if rank == 0:
        print(f"dispatch at {p} ranks (baseline: NumPy on the local block, raw mpi4py for the sum,")
        print("one-rank NumPy for the matmul)")
        for r in rows:
            extra = f"speed-up {r['speedup']:.2f}" if "speedup" in r else f"ratio {r['ratio']:.2f}"
            times = f"dmesh {_fmt(r['dmesh_s']):>10}  baseline {_fmt(r['baseline_s']):>10}"
            print(f"{r['case']:<28} {times}  {extra}")
        write_results("dispatch", {"ranks": p, "rows": rows})
    mesh.close()
    comm.Free()
    return 0


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    sys.exit(main())
