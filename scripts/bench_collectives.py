"""Benchmark: dmesh collectives against the raw mpi4py call on the same communicator.

Run under MPI (``python scripts/bench.py`` does so at 2 ranks). Each case times
batches of calls, alternating dmesh and raw batches so that both see the same
machine state; a batch's time is the slowest rank's (a collective is done when
its last rank is), and the reported figure is the median batch, per call.

The raw baselines are what a hand-written mpi4py program does: the uppercase
call on preallocated buffers, with even pieces (``Allgather``,
``Reduce_scatter_block``, ``Alltoall``). dmesh returns a new array per call,
so its figure includes allocating the result.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

import collectives as C

SIZES = {"8 el": 8, "64 KiB": 64 * 1024 // 8, "16 MiB": 16 * 1024 * 1024 // 8}


def batch_time(comm: MPI.Intracomm, fn: Callable[[], Any], calls: int) -> float:
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = (time.perf_counter() - start) / calls
    return float(comm.allreduce(elapsed, op=MPI.MAX))


def compare(
    comm: MPI.Intracomm, ours: Callable[[], Any], raw: Callable[[], Any], nbytes: int
) -> tuple[float, float]:
    calls = max(4, min(2000, (4 << 20) // max(nbytes, 1)))
    batches = 15
    for fn in (ours, raw):  # warm up: caches, communicators, page mappings
        batch_time(comm, fn, calls)
    ours_t, raw_t = [], []
    for _ in range(batches):
        ours_t.append(batch_time(comm, ours, calls))
        raw_t.append(batch_time(comm, raw, calls))
    return statistics.median(ours_t), statistics.median(raw_t)


def cases(comm: MPI.Intracomm, n: int) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    p = comm.Get_size()
    n = max(p, n - n % p)  # even pieces, so the raw baseline can use the simplest call
    x = np.random.default_rng(comm.Get_rank()).standard_normal(n)
    out_same = np.empty(n)
    out_gather = np.empty(n * p)
    out_piece = np.empty(n // p)
    piece_sizes = [n // p] * p
    return {
        "all_reduce": (
            lambda: C.all_reduce(x, "sum", comm),
            lambda: comm.Allreduce(x, out_same, MPI.SUM),
        ),
        "all_gather": (
            lambda: C.all_gather(x, 0, comm),
            lambda: comm.Allgather(x, out_gather),
        ),
        "all_gather(sizes=)": (
            lambda: C.all_gather(x, 0, comm, sizes=[n] * p),
            lambda: comm.Allgather(x, out_gather),
        ),
        "reduce_scatter": (
            lambda: C.reduce_scatter(x, "sum", 0, comm),
            lambda: comm.Reduce_scatter_block(x, out_piece, MPI.SUM),
        ),
        "all_to_all": (
            lambda: C.all_to_all(x, 0, 0, comm),
            lambda: comm.Alltoall(x, out_same),
        ),
        "all_to_all(sizes=)": (
            lambda: C.all_to_all(x, 0, 0, comm, concat_sizes=piece_sizes),
            lambda: comm.Alltoall(x, out_same),
        ),
    }


def main() -> int:
    comm = MPI.COMM_WORLD.Dup()
    rows = []
    for label, n in SIZES.items():
        for name, (ours, raw) in cases(comm, n).items():
            ours_t, raw_t = compare(comm, ours, raw, n * 8)
            rows.append({"op": name, "size": label, "dmesh_s": ours_t, "mpi4py_s": raw_t})
    if comm.Get_rank() == 0:
        print(f"collectives at {comm.Get_size()} ranks (median per call; float64)")
        print(f"{'op':<20} {'size':>7} {'dmesh':>11} {'mpi4py':>11} {'ratio':>6}")
        for r in rows:
            ratio = r["dmesh_s"] / r["mpi4py_s"]
            r["ratio"] = ratio
            print(
                f"{r['op']:<20} {r['size']:>7} {_fmt(r['dmesh_s']):>11} "
                f"{_fmt(r['mpi4py_s']):>11} {ratio:>6.2f}"
            )
        out = Path(sys.argv[1] if len(sys.argv) > 1 else "build/bench/collectives.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"ranks": comm.Get_size(), "rows": rows}, indent=1))
    comm.Free()
    return 0


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e3:.3f} ms"


if __name__ == "__main__":
    sys.exit(main())
