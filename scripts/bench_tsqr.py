"""Benchmark: TSQR of a tall row-sharded matrix against one-process NumPy in the same run.

A 2 x 10^6 x 32 float64 matrix, row-sharded over the ranks (run at 2 ranks, one
BLAS thread per rank), beside NumPy on the whole matrix on rank 0:

* ``np.linalg.qr`` (reduced: Q row-sharded, R replicated) and ``mode="r"``;
* ``np.linalg.lstsq`` with a 1-D right-hand side (x replicated);
* ``np.linalg.svd(full_matrices=False)``;
* the same ``qr`` on a one-rank mesh on rank 0 (dmesh's local algorithm alone:
  the block factored by cache-sized pieces), which separates what the pieces
  gain from what the ranks gain;
* the combine step alone (a 64 x 32 block per rank), with the butterfly tree
  and with a gather of every R (``ops.kernels.linalg.COMBINE``).

dmesh times are the slowest rank's, median of 5; NumPy's are one run (they take
seconds). ``python scripts/bench_tsqr.py [out.json]`` under mpiexec; results go
to ``build/bench/tsqr.json``.
"""

from __future__ import annotations

import os

# One BLAS thread per rank (ranks are the parallelism), also when run by hand;
# set before NumPy is imported.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from bench_timing import median_time, one_rank_time, write_results  # noqa: E402
from mpi4py import MPI  # noqa: E402

import dmesh  # noqa: E402
from dmesh import Shard  # noqa: E402
from dmesh.ops.kernels import linalg  # noqa: E402

ROWS, COLS = 2_000_000, 32


def main() -> int:
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    full = rhs = None
    if rank == 0:
        rng = np.random.default_rng(0)
        full = rng.standard_normal((ROWS, COLS))
        rhs = full @ np.linspace(-1, 1, COLS) + 0.1 * rng.standard_normal(ROWS)
    a = dmesh.distribute(full, mesh, [Shard(0)], src=0)
    b = dmesh.distribute(rhs, mesh, [Shard(0)], src=0)

    # The results are right before they are fast (rank 0 checks them against NumPy below).
    q, r = np.linalg.qr(a)
    x = np.linalg.lstsq(a, b)[0].full_array()
    rows = []
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        ("qr (reduced)", lambda: np.linalg.qr(a), lambda: np.linalg.qr(full)),
        ("qr (mode='r')", lambda: np.linalg.qr(a, mode="r"), lambda: np.linalg.qr(full, "r")),
        ("lstsq (b 1-D)", lambda: np.linalg.lstsq(a, b), lambda: np.linalg.lstsq(full, rhs)),
        (
            "svd (full_matrices=False)",
            lambda: np.linalg.svd(a, full_matrices=False),
            lambda: np.linalg.svd(full, full_matrices=False),
        ),
    ]
    for name, ours, numpy_call in cases:
        ours_t = median_time(comm, ours, repeats=5)
        base_t = one_rank_time(comm, numpy_call)
        speedup = base_t / ours_t
        rows.append({"case": name, "dmesh_s": ours_t, "numpy_s": base_t, "speedup": speedup})
    if rank == 0:  # the first check: dmesh's factors are NumPy's (signs included)
        q_np, r_np = np.linalg.qr(full)
        x_np = np.linalg.lstsq(full, rhs)[0]
        errors = {
            "R": float(np.max(np.abs(r.full_array() - r_np))),
            "Q block": float(np.max(np.abs(q.local - q_np[: q.local.shape[0]]))),
            "lstsq x": float(np.max(np.abs(x - x_np)) / np.max(np.abs(x_np))),
        }
        del q_np
    errors = comm.bcast(errors if rank == 0 else None, 0)
    if max(errors.values()) > 1e-8:
        raise RuntimeError(f"dmesh and NumPy disagree: {errors}")
    del q

    # dmesh's algorithm on one process: the whole matrix on a one-rank mesh.
    one = 0.0
    if rank == 0:
        with dmesh.init_mesh(comm=MPI.COMM_SELF) as alone:
            whole = dmesh.from_local(full, alone, [Shard(0)], shape=full.shape)
            one = median_time(MPI.COMM_SELF, lambda: np.linalg.qr(whole), repeats=1)
    one = comm.bcast(one, 0)
    numpy_qr = rows[0]["numpy_s"]
    rows.append({"case": "qr (reduced), dmesh on 1 rank", "dmesh_s": one, "numpy_s": numpy_qr,
                 "speedup": numpy_qr / one})  # fmt: skip

    # The combine step alone: latency, with either strategy.
    small = dmesh.from_local(np.random.default_rng(rank).standard_normal((64, COLS)), mesh)
    combine = {}
    for strategy in ("tree", "gather"):
        linalg.COMBINE = strategy
        np.linalg.qr(small, mode="r")
        combine[strategy] = median_time(comm, lambda: np.linalg.qr(small, mode="r"), repeats=201)
    linalg.COMBINE = "tree"

    if rank == 0:
        print(f"TSQR of a {ROWS} x {COLS} float64 matrix, rows sharded over {p} ranks")
        print("(baseline: NumPy on the whole matrix on rank 0; one BLAS thread per rank)")
        for row in rows:
            times = f"dmesh {_fmt(row['dmesh_s']):>9}  numpy {_fmt(row['numpy_s']):>9}"
            print(f"{row['case']:<32} {times}  speed-up {row['speedup']:.1f}")
        print(f"check against NumPy: {', '.join(f'{k} {v:.1e}' for k, v in errors.items())}")
        print(
            f"qr(mode='r') of 64 x {COLS} per rank (the combine step): tree "
            f"{_fmt(combine['tree'])}, gather {_fmt(combine['gather'])}"
        )
        result = {"ranks": p, "shape": [ROWS, COLS], "rows": rows, "errors": errors,
                  "combine_64_rows_s": combine}  # fmt: skip
        write_results("tsqr", result)
    mesh.close()
    comm.Free()
    return 0


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


if __name__ == "__main__":
    sys.exit(main())
