"""Benchmark: the cost of dispatching NumPy calls on DArrays, against targets.

Run at 1 and 2 ranks (one BLAS thread per rank, ``scripts/mpi_env.py``)::

    .venv/bin/python scripts/mpi_env.py 2 .venv/bin/mpiexec -n 2 \\
        .venv/bin/python scripts/bench_dispatch.py

Each case is timed beside its baseline in the same process, in alternating
batches, and the median batch of the slowest rank is reported
(``bench_timing.alternating``). Tiny arrays (8 float64 per rank, ``S(0)``):

* cached ``a + b``, ``a.sum()`` and ``np.sum(a)`` left ``Partial``, ``a @ b``:
  the target is an absolute cost (at most 3 us a call); the baseline, the
  same NumPy call on the local blocks, shows what dispatch adds;
* ``a.sum().full_array()``, ``float(np.sum(a))``, ``a.sum().item()``: the
  target is at most 2x the local sum plus a raw mpi4py ``Allreduce``;

the per-call table on 1,000 float64 per rank (a Python float, NumPy scalars and a 0-d
array as operands, ``out=``, a reduction into ``out=``, ``a.max()``, a reduction over an
axis given positionally, a mask selection, a reshape, a vector norm): at 1 rank each
costs at most 2 us per dmesh call over the same NumPy call (with the same messages);

and two throughput cases against NumPy on the local blocks: ``y = a*b + c``
on 2**21 float64 per rank (temporary elision, ``dmesh._elision``) and a
2048 x 2048 matmul, row-sharded times replicated, against one rank.
Results go to ``build/bench/dispatch-<p>ranks.json``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_timing import alternating, one_rank_time, write_results
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard

TINY_US = 3.0  # a cached tiny op costs at most this
FULL_RATIO = 2.0  # a tiny full reduction costs at most this times local sum + Allreduce


def tiny_cases(
    comm: MPI.Intracomm, mesh: Any
) -> list[tuple[str, Callable[[], Any], Callable[[], Any], str]]:
    """(case, dmesh call, baseline call, target kind) for the tiny arrays."""
    p = comm.Get_size()
    a = dmesh.distribute(np.arange(8.0 * p), mesh, [Shard(0)])
    b = dmesh.distribute(np.arange(8.0 * p) + 1, mesh, [Shard(0)])
    m = dmesh.distribute(np.ones((4 * p, 4)), mesh, [Shard(0)])
    v = dmesh.distribute(np.ones(4), mesh, [Replicate()])
    la, lb, lm, lv = a.local, b.local, m.local, v.local
    out = np.empty(1)

    def local_sum_allreduce() -> Any:
        comm.Allreduce(la.sum(keepdims=True), out)
        return out

    return [
        ("a + b", lambda: a + b, lambda: la + lb, "us"),
        ("a.sum() (Partial)", lambda: a.sum(), lambda: la.sum(), "us"),
        ("np.sum(a) (Partial)", lambda: np.sum(a), lambda: np.sum(la), "us"),
        ("a @ b", lambda: m @ v, lambda: lm @ lv, "us"),
        ("a.sum().full_array()", lambda: a.sum().full_array(), local_sum_allreduce, "ratio"),
        ("float(np.sum(a))", lambda: float(np.sum(a)), local_sum_allreduce, "ratio"),
        ("a.sum().item()", lambda: a.sum().item(), local_sum_allreduce, "ratio"),
    ]


PER_CALL_US = 2.0  # a cached call at 1 rank: at most this over NumPy's own time, per call


def per_call_cases(
    comm: MPI.Intracomm, mesh: Any
) -> list[tuple[str, Callable[[], Any], Callable[[], Any], int]]:
    """(case, dmesh call, NumPy on the local blocks, dmesh calls in it) on 1,000 float64
    per rank: the scalar kinds that key the step cache, ``out=``, a reduction into out."""
    p = comm.Get_size()
    rng = np.random.default_rng(0)
    a = dmesh.distribute(rng.random(1000 * p), mesh, [Shard(0)])
    b = dmesh.distribute(rng.random(1000 * p), mesh, [Shard(0)])
    o = dmesh.zeros_like(a)
    u = dmesh.distribute(rng.random((10 * p, 100)), mesh, [Shard(0)])
    v = dmesh.zeros((100,), mesh=mesh, placements=[Replicate()])
    la, lb, lo, lu, lv = a.local, b.local, o.local, u.local, v.local
    f64, i32, zero_d = np.float64(2), np.int32(2), np.array(2.0)
    summed = np.empty(100)

    def local_sum_into() -> Any:
        np.sum(lu * lu, 0, out=summed)
        comm.Allreduce(summed, lv)
        return lv

    mask = a > 0.5
    lmask = mask.local
    count, counts = np.zeros(1, np.int64), np.zeros(p, np.int64)

    def local_axis_sum() -> Any:
        np.sum(lu, 0, out=summed)
        comm.Allreduce(summed, lv)
        return lv

    def local_selection() -> Any:  # (the local selection and the counts' Allgather)
        selected = la[lmask]
        count[0] = selected.shape[0]
        comm.Allgather(count, counts)
        return selected

    def local_norm() -> Any:
        total = np.array([np.dot(la, la)])
        comm.Allreduce(MPI.IN_PLACE, total)
        return np.sqrt(total[0])

    return [
        ("a * 2.0", lambda: a * 2.0, lambda: la * 2.0, 1),
        ("a * np.float64(2)", lambda: a * f64, lambda: la * f64, 1),
        ("a * np.int32(2)", lambda: a * i32, lambda: la * i32, 1),
        ("a + np.array(2.0)", lambda: a + zero_d, lambda: la + zero_d, 1),
        ("np.add(a, b, out=o)", lambda: np.add(a, b, out=o), lambda: np.add(la, lb, out=lo), 1),
        ("np.sum(U*U, 0, out=V)", lambda: np.sum(u * u, 0, out=v), local_sum_into, 2),
        ("a.max()", lambda: a.max(), lambda: la.max(), 1),
        ("np.sum(U, 0)", lambda: np.sum(u, 0).full_array(), local_axis_sum, 2),
        ("a[mask]", lambda: a[mask], local_selection, 1),
        ("U.reshape(-1)", lambda: u.reshape(-1), lambda: lu.reshape(-1), 1),
        ("np.linalg.norm(a)", lambda: float(np.linalg.norm(a)), local_norm, 2),
    ]


def main() -> int:
    """Time every case, print the table on rank 0 and write the JSON."""
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    rows: list[dict[str, Any]] = []

    for name, ours, base, kind in tiny_cases(comm, mesh):
        ours_t, base_t = alternating(comm, [ours, base], calls=2000)
        ratio = ours_t / base_t
        if kind == "us":
            target, met = f"<= {TINY_US:.0f} us", ours_t * 1e6 <= TINY_US
        else:
            target, met = f"<= {FULL_RATIO:.0f}x", ratio <= FULL_RATIO
        rows.append({"case": name, "dmesh_s": ours_t, "baseline_s": base_t, "ratio": ratio,
                     "target": target, "met": bool(met)})  # fmt: skip

    for name, ours, base, calls in per_call_cases(comm, mesh):
        ours_t, base_t = alternating(comm, [ours, base], calls=2000)
        row = {"case": name + " (1e3/rank)", "dmesh_s": ours_t, "baseline_s": base_t,
               "ratio": ours_t / base_t}  # fmt: skip
        if p == 1:  # (the target is NumPy's own time at one rank)
            limit = calls * PER_CALL_US
            row.update(target=f"+{limit:.0f} us", met=bool((ours_t - base_t) * 1e6 <= limit))
        rows.append(row)

    n = 2**21 * p
    x, y, z = (dmesh.full((n,), float(i + 1), mesh=mesh) for i in range(3))
    lx, ly, lz = x.local, y.local, z.local
    ours_t, base_t = alternating(comm, [lambda: x * y + z, lambda: lx * ly + lz], calls=5)
    rows.append({"case": "y = a*b + c (2**21 f64/rank)", "dmesh_s": ours_t,
                 "baseline_s": base_t, "ratio": ours_t / base_t})  # fmt: skip

    size = 2048
    full = np.random.default_rng(0).standard_normal((size, size))
    left = dmesh.distribute(full, mesh, [Shard(0)])
    right = dmesh.distribute(full, mesh, [Replicate()])
    ours_t = alternating(comm, [lambda: left @ right], calls=1, repeats=5)[0]
    one_rank = one_rank_time(comm, lambda: full @ full, repeats=3, warmup=True)
    rows.append({"case": f"{size}x{size} matmul S(0) @ R", "dmesh_s": ours_t,
                 "baseline_s": one_rank, "speedup": one_rank / ours_t})  # fmt: skip

    if rank == 0:
        print(f"dispatch at {p} ranks, {time.strftime('%Y-%m-%d %H:%M')}, "
              f"elision {os.environ.get('DMESH_ELIDE', 'default')}")  # fmt: skip
        print("baseline: NumPy on the local blocks; the local sum + raw Allreduce for full")
        print("reductions; one-rank NumPy for the matmul")
        print(f"{'case':<30} {'dmesh':>10} {'baseline':>10} {'ratio':>7}  {'target':<9} met?")
        for r in rows:
            ratio = r["ratio"] if "ratio" in r else 1 / r["speedup"]
            line = f"{r['case']:<30} {_fmt(r['dmesh_s']):>10} {_fmt(r['baseline_s']):>10}"
            line += f" {ratio:>7.2f}"
            if "target" in r:
                line += f"  {r['target']:<9} {'yes' if r['met'] else 'NO'}"
            print(line)
        write_results(f"dispatch-{p}ranks", {"ranks": p, "rows": rows})
    mesh.close()
    comm.Free()
    return 0


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    sys.exit(main())
