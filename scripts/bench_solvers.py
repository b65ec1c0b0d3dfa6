"""Benchmark: blocked distributed solvers of a row-sharded matrix against one-process NumPy.

An ``n x n`` float64 matrix (``n`` = 2048 by default, more sizes as arguments
``--n 2048 4096``), row-sharded over the ranks, above the gather threshold (set
to 0 here, so the blocked algorithms of :mod:`dmesh.ops.kernels.blocked` run),
beside NumPy on the whole matrix on rank 0; one BLAS thread per rank:
``np.linalg.cholesky``, ``solve`` (one right-hand side), ``det``, ``slogdet``,
``inv`` and ``eigh`` (parallel block Jacobi, :mod:`dmesh.ops.kernels.jacobi_eigh`).
dmesh times are the slowest rank's, median of 3; NumPy's one run. Each result
is first checked against NumPy. ``python scripts/bench_solvers.py [out.json]
[--n N...]`` under mpiexec; results go to ``build/bench/solvers.json``.
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
from dmesh.ops.kernels import solvers  # noqa: E402


def _sizes() -> list[int]:
    if "--n" in sys.argv:
        i = sys.argv.index("--n")
        sizes = [int(x) for x in sys.argv[i + 1 :]]
        del sys.argv[i:]
        return sizes
    return [2048]


def _case(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, n: int) -> list[dict[str, Any]]:
    rank = comm.Get_rank()
    full = spd = rhs = None
    if rank == 0:
        rng = np.random.default_rng(0)
        full = rng.standard_normal((n, n))
        spd = full @ full.T + n * np.eye(n)
        rhs = rng.standard_normal(n)
    a = dmesh.distribute(full, mesh, [Shard(0)], src=0)
    s = dmesh.distribute(spd, mesh, [Shard(0)], src=0)
    b = dmesh.distribute(rhs, mesh, [Shard(0)], src=0)
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any], Callable[[], Any]]] = [
        ("cholesky", lambda: np.linalg.cholesky(s), lambda: np.linalg.cholesky(spd),
         lambda: np.linalg.cholesky(s).full_array()),
        ("solve (b 1-D)", lambda: np.linalg.solve(a, b), lambda: np.linalg.solve(full, rhs),
         lambda: np.linalg.solve(a, b).full_array()),
        ("det", lambda: np.linalg.det(a), lambda: np.linalg.det(full),
         lambda: np.linalg.det(a).full_array()),
        ("slogdet", lambda: np.linalg.slogdet(a), lambda: np.linalg.slogdet(full),
         lambda: np.linalg.slogdet(a)[1].full_array()),
        ("inv", lambda: np.linalg.inv(a), lambda: np.linalg.inv(full),
         lambda: np.linalg.inv(a).full_array()),
        ("eigh", lambda: np.linalg.eigh(s), lambda: np.linalg.eigh(spd),
         lambda: np.linalg.eigh(s)[0].full_array()),
    ]  # fmt: skip
    rows = []
    with solvers.gather_threshold(0):
        for name, ours, numpy_call, check in cases:
            got = check()  # right before fast: rank 0 compares with NumPy
            error = 0.0
            if rank == 0:
                want = numpy_call()
                want = want[1] if name == "slogdet" else want[0] if name == "eigh" else want
                with np.errstate(invalid="ignore"):  # det overflows to inf in both
                    diff = np.where(got == want, 0.0, np.abs(got - want))
                error = float(np.max(diff) / max(np.max(np.abs(want)), 1e-300))
            error = comm.bcast(error, 0)
            if error > 1e-8:
                raise RuntimeError(f"{name} at n = {n}: relative error {error:.1e}")
            ours_t = median_time(comm, ours, repeats=3)
            base_t = one_rank_time(comm, numpy_call)
            rows.append({"case": name, "n": n, "dmesh_s": ours_t, "numpy_s": base_t,
                         "ratio": ours_t / base_t, "error": error})  # fmt: skip
    return rows


def main() -> int:
    sizes = _sizes()
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    rows = [row for n in sizes for row in _case(comm, mesh, n)]
    if rank == 0:
        print(f"Blocked solvers of a row-sharded float64 matrix over {p} ranks")
        print("(baseline: NumPy on the whole matrix on rank 0; one BLAS thread per rank;")
        print(" ratio: dmesh time / NumPy time, below 1 is faster)")
        for row in rows:
            print(f"{row['case']:<15} n={row['n']:<5} dmesh {row['dmesh_s']:7.3f} s  "
                  f"numpy {row['numpy_s']:7.3f} s  ratio {row['ratio']:.2f}  "
                  f"rel. error {row['error']:.0e}")  # fmt: skip
        write_results("solvers", {"ranks": p, "rows": rows})
    mesh.close()
    comm.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
