"""Benchmark: dmesh collectives against the raw mpi4py call on the same communicator.

Run under MPI (``python scripts/bench.py`` does so at 2 ranks). Each case times
batches of calls, alternating dmesh and raw batches so that both see the same
machine state; a batch's time is the slowest rank's (a collective is done when
its last rank is), and the reported figure is the median batch, per call.

The raw baselines are what a hand-written mpi4py program does: the uppercase
call on preallocated buffers, with even pieces (``Allgather``,
``Reduce_scatter_block``, ``Alltoall``). dmesh returns a new array per call,
so its figure includes allocating the result.

Targets (issue 29), on dmesh's time over the raw call's: ``all_reduce`` of
8 float64 at most 1.5x, of 16 MiB at most 1.05x, every rank getting the same
bits all the same (NaNs made ``+nan``: ``dmesh/collectives/reduce_ops.py``).
Run at 2 ranks with one BLAS thread per rank::

    .venv/bin/python scripts/mpi_env.py 2 .venv/bin/mpiexec -n 2 \\
        .venv/bin/python scripts/bench_collectives.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_timing import alternating, write_results
from mpi4py import MPI

import dmesh.collectives as C

SIZES = {"8 el": 8, "64 KiB": 64 * 1024 // 8, "16 MiB": 16 * 1024 * 1024 // 8}
TARGETS = {("all_reduce", "8 el"): 1.5, ("all_reduce", "16 MiB"): 1.05}  # ratio at most


Case = tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any]]


def cases(comm: MPI.Intracomm, n: int) -> dict[str, Case]:
    """Per op: (dmesh, raw mpi4py into a preallocated output, raw into a new output)."""
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
            lambda: comm.Allreduce(x, np.empty(n), MPI.SUM),
        ),
        "all_gather": (
            lambda: C.all_gather(x, 0, comm),
            lambda: comm.Allgather(x, out_gather),
            lambda: comm.Allgather(x, np.empty(n * p)),
        ),
        "all_gather(sizes=)": (
            lambda: C.all_gather(x, 0, comm, sizes=[n] * p),
            lambda: comm.Allgather(x, out_gather),
            lambda: comm.Allgather(x, np.empty(n * p)),
        ),
        "reduce_scatter": (
            lambda: C.reduce_scatter(x, "sum", 0, comm),
            lambda: comm.Reduce_scatter_block(x, out_piece, MPI.SUM),
            lambda: comm.Reduce_scatter_block(x, np.empty(n // p), MPI.SUM),
        ),
        "all_to_all": (
            lambda: C.all_to_all(x, 0, 0, comm),
            lambda: comm.Alltoall(x, out_same),
            lambda: comm.Alltoall(x, np.empty(n)),
        ),
        # sizes_agree: the same sizes on every rank, as a redistribution passes.
        "all_to_all(sizes=)": (
            lambda: C.all_to_all(x, 0, 0, comm, concat_sizes=piece_sizes, sizes_agree=True),
            lambda: comm.Alltoall(x, out_same),
            lambda: comm.Alltoall(x, np.empty(n)),
        ),
    }


def main() -> int:
    comm = MPI.COMM_WORLD.Dup()
    rows = []
    for label, n in SIZES.items():
        for name, fns in cases(comm, n).items():
            calls = max(4, min(2000, (4 << 20) // max(n * 8, 1)))
            ours_t, raw_t, alloc_t = alternating(comm, fns, calls)
            row = {
                "op": name,
                "size": label,
                "dmesh_s": ours_t,
                "mpi4py_s": raw_t,
                "mpi4py_new_output_s": alloc_t,
                "ratio": ours_t / raw_t,
                "ratio_new_output": ours_t / alloc_t,
            }
            if (name, label) in TARGETS:
                row["target"] = TARGETS[name, label]
                row["met"] = bool(row["ratio"] <= row["target"])
            rows.append(row)
    if comm.Get_rank() == 0:
        print(f"collectives at {comm.Get_size()} ranks (median per call; float64)")
        print("mpi4py: preallocated output; mpi4py+new: a new output array per call, as dmesh")
        header = f"{'op':<20} {'size':>7} {'dmesh':>10} {'mpi4py':>10} {'ratio':>6}"
        print(f"{header} {'mpi4py+new':>11} {'ratio':>6}  target")
        for r in rows:
            line = (
                f"{r['op']:<20} {r['size']:>7} {_fmt(r['dmesh_s']):>10} "
                f"{_fmt(r['mpi4py_s']):>10} {r['ratio']:>6.2f} "
                f"{_fmt(r['mpi4py_new_output_s']):>11} {r['ratio_new_output']:>6.2f}"
            )
            if "target" in r:
                line += f"  <= {r['target']:.2f} {'met' if r['met'] else 'NOT met'}"
            print(line)
        write_results("collectives", {"ranks": comm.Get_size(), "rows": rows})
    comm.Free()
    return 0


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e3:.3f} ms"


if __name__ == "__main__":
    sys.exit(main())
