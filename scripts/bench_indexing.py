"""Benchmark: the per-call cost of indexing DArrays, against NumPy on ndarrays.

Run at 1 rank (``make bench`` does; it also runs at more)::

    .venv/bin/python scripts/mpi_env.py 1 .venv/bin/mpiexec -n 1 \\
        .venv/bin/python scripts/bench_indexing.py [out.json]

Each case is the indexing a NumPy program does in its inner loop, timed on a
DArray beside the same statement on an ndarray of the same global shape, in
the same process, in alternating batches (``bench_timing.alternating``: the
median batch, the slowest rank's):

* ``a[0] = 0``, ``a[np.int64(3)]``, ``a[0] += 1``: 1-D, 1000 float64,
  ``Shard(0)``;
* ``U[1]`` and ``U[1] = V``: a spectral solver's state, (3, 64, 8, 8)
  float64 sharded on axis 1 (``Shard(1)``), ``V = U[2].copy()`` (the layout
  of ``U[1]``);
* ``Z[1:-1, 1:-1]``: 512 x 512 float64, ``Shard(0)``;
* ``row = a2d[4]; row += 1``: a view written through, (16, 64) ``Shard(0)``.

Target: dmesh at most 5 us more than NumPy per call (shown in the table,
not enforced). After the timing, each case's array (or the last value read)
is checked against NumPy's: both ran the statement the same number of times;
a mismatch exits non-zero. Results go to ``build/bench/indexing-<p>ranks.json``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from bench_timing import alternating, write_results
from mpi4py import MPI

import dmesh
from dmesh import DArray, Shard

EXTRA_US = 5.0  # dmesh at most this many microseconds more than NumPy per call
CALLS = 200  # calls per batch


@dataclass
class Case:
    name: str
    layout: str
    ours: Callable[[], Any]
    theirs: Callable[[], Any]
    result: Callable[[], tuple[Any, Any]]  # (dmesh's array or value, NumPy's), to compare


def _last(fn: Callable[[], Any]) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``fn`` wrapped to keep its last return value, and a getter of that value."""
    box: list[Any] = [None]

    def call() -> Any:
        box[0] = fn()
        return box[0]

    return call, lambda: box[0]


def cases(mesh: Any) -> list[Case]:
    """The indexing cases, each on a fresh DArray and the same ndarray."""
    rng = np.random.default_rng(0)
    out: list[Case] = []

    a_np = np.arange(1000.0)
    a = dmesh.distribute(a_np, mesh, [Shard(0)])

    def set_a() -> None:
        a[0] = 0

    def set_a_np() -> None:
        a_np[0] = 0

    out.append(Case("a[0] = 0", "(1000,) S(0)", set_a, set_a_np, lambda: (a, a_np)))

    ours, ours_last = _last(lambda: a[np.int64(3)])
    theirs, theirs_last = _last(lambda: a_np[np.int64(3)])
    out.append(Case("a[np.int64(3)]", "(1000,) S(0)", ours, theirs,
                    lambda: (ours_last(), theirs_last())))  # fmt: skip

    U_np = rng.standard_normal((3, 64, 8, 8))
    U = dmesh.distribute(U_np, mesh, [Shard(1)])
    ours, ours_last = _last(lambda: U[1])
    theirs, theirs_last = _last(lambda: U_np[1])
    out.append(Case("U[1]", "(3, 64, 8, 8) S(1)", ours, theirs,
                    lambda: (ours_last(), theirs_last())))  # fmt: skip

    V_np = U_np[2].copy()
    V = U[2].copy()

    def set_U() -> None:
        U[1] = V

    def set_U_np() -> None:
        U_np[1] = V_np

    out.append(Case("U[1] = V", "(3, 64, 8, 8) S(1)", set_U, set_U_np, lambda: (U, U_np)))

    Z_np = rng.standard_normal((512, 512))
    Z = dmesh.distribute(Z_np, mesh, [Shard(0)])
    ours, ours_last = _last(lambda: Z[1:-1, 1:-1])
    theirs, theirs_last = _last(lambda: Z_np[1:-1, 1:-1])
    out.append(Case("Z[1:-1, 1:-1]", "(512, 512) S(0)", ours, theirs,
                    lambda: (ours_last(), theirs_last())))  # fmt: skip

    b_np = np.arange(1000.0)
    b = dmesh.distribute(b_np, mesh, [Shard(0)])

    def add_b() -> None:
        b[0] += 1

    def add_b_np() -> None:
        b_np[0] += 1

    out.append(Case("a[0] += 1", "(1000,) S(0)", add_b, add_b_np, lambda: (b, b_np)))

    m_np = np.zeros((16, 64))
    m = dmesh.distribute(m_np, mesh, [Shard(0)])

    def row_add() -> None:
        row = m[4]
        row += 1

    def row_add_np() -> None:
        row = m_np[4]
        row += 1

    out.append(Case("row = a2d[4]; row += 1", "(16, 64) S(0)", row_add, row_add_np,
                    lambda: (m, m_np)))  # fmt: skip
    return out


def _same(ours: Any, theirs: Any) -> bool:
    """Whether dmesh's array or value equals NumPy's (collective for DArrays)."""
    got = ours.full_array() if isinstance(ours, DArray) else ours
    return bool(np.array_equal(np.asarray(got), np.asarray(theirs)))


def main() -> int:
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    rows: list[dict[str, Any]] = []
    for case in cases(mesh):
        ours_s, numpy_s = alternating(comm, [case.ours, case.theirs], CALLS)
        same = bool(comm.allreduce(_same(*case.result()), op=MPI.LAND))
        extra_us = (ours_s - numpy_s) * 1e6
        rows.append({"case": case.name, "layout": case.layout, "dmesh_s": ours_s,
                     "numpy_s": numpy_s, "extra_us": extra_us, "target_extra_us": EXTRA_US,
                     "met": extra_us <= EXTRA_US, "same_as_numpy": same})  # fmt: skip
    if rank == 0:
        print(f"indexing at {p} rank{'s' * (p > 1)}, {time.strftime('%Y-%m-%d %H:%M')}; per call,"
              f" median of alternating batches of {CALLS}")  # fmt: skip
        print("(numpy: the same statement on an ndarray of the same global shape, same process;")
        print(f" target: dmesh at most {EXTRA_US:.0f} us more than NumPy)")
        print(f"{'case':<24} {'layout':<19} {'dmesh':>10} {'numpy':>9} {'extra':>10}  "
              f"{'<= 5 us':<7} same")  # fmt: skip
        for r in rows:
            print(f"{r['case']:<24} {r['layout']:<19} {r['dmesh_s'] * 1e6:>7.2f} us "
                  f"{r['numpy_s'] * 1e6:>6.2f} us {r['extra_us']:>7.2f} us  "
                  f"{'yes' if r['met'] else 'no':<7} "
                  f"{'yes' if r['same_as_numpy'] else 'NO'}")  # fmt: skip
        write_results(f"indexing-{p}ranks", {"ranks": p, "rows": rows})
    ok = all(r["same_as_numpy"] for r in rows)
    if rank == 0 and not ok:
        bad = ", ".join(r["case"] for r in rows if not r["same_as_numpy"])
        print(f"FAILED: dmesh's result differs from NumPy's in {bad}")
    mesh.close()
    comm.Free()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
