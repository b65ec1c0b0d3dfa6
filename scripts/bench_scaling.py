"""Benchmark: strong and weak scaling, each case's time at several rank counts on a 1-D mesh.

The cases are in ``scaling_cases.py``. The same global problem at every rank
count (strong scaling):

* ``a @ b``, 2048 x 2048 float64, ``a`` ``Shard(0)``, ``b`` ``Replicate()``;
* one heat-equation step (5-point stencil through ``dmesh.map_overlap``, depth
  1, zero boundary) on a 4096 x 4096 float64 field, ``Shard(0)``;
* ``np.fft.fftn`` of a 128^3 complex128 array, ``Shard(0)`` (slab transpose);
* ``float(np.sum(a))`` of 2 x 10^7 float64, ``Shard(0)``.

Run without MPI (``python scripts/bench_scaling.py [--ranks 1 2 4]``), it
launches itself under ``mpiexec -n k`` for each rank count ``k`` (default:
powers of two up to ``os.cpu_count()``, and that count; 1 is always run), with
``mpi_env.rank_env(k)`` (one BLAS thread per rank, MPICH yielding when
oversubscribed). Each run writes ``build/bench/scaling-runs/n{k}.json``; they
are merged into ``build/bench/scaling.json`` and printed as a table.

Weak scaling keeps the work per rank fixed (``scaling_cases.WEAK``: a
``(512 p, 1024) @ (1024, 1024)`` product, a ``(1024 p, 1024)`` heat step, a
``(32 p, 64, 64)`` FFT, a sum of ``5 p 10^6`` elements); its efficiency is the
1-rank time over the time at ``p`` (1.0: ideal, the time stays constant).

``--model`` then fits the latency-bandwidth model of ``dmesh.scaling`` to
collectives measured at the largest rank count run (``scaling_model.py``) and
prints each strong case's predicted time at 16, 256 and 4,096 ranks beside the
measured ones.

Timing as in ``bench_timing``: the median of batches, each the slowest rank's
time. The baseline is one-process NumPy on the full array, measured in the
1-rank run in batches alternating with dmesh's (under the same one-BLAS-thread
setting). Speed-up is the NumPy time over dmesh's time at p ranks; parallel
efficiency is that speed-up over p (1.0: ideal, NumPy's time divided by p).
Every result is checked against NumPy once, outside the timings.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling_cases import STRONG, WEAK, Case

from mpi_env import mpiexec_command, rank_env

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "bench" / "scaling.json"


# -- pure parts: rank counts, merging, the table ----------------------------------


def default_ranks(cores: int | None = None) -> list[int]:
    """Powers of two up to ``cores`` (default ``os.cpu_count()``), and ``cores`` itself."""
    cores = max(1, cores or os.cpu_count() or 1)
    ranks = [1 << i for i in range(cores.bit_length()) if 1 << i <= cores]
    return sorted({*ranks, cores})


def merge(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One document from the per-rank-count runs: time, speed-up and efficiency per case.

    Each run is ``{"ranks": p, "rows": [{"case", "dmesh_s", "numpy_s"?}, ...]}``;
    the 1-rank run carries each case's ``numpy_s`` baseline. Rows come out
    sorted by case (in first-seen order), then rank count.
    """
    by_ranks = {int(run["ranks"]): run for run in runs}
    if 1 not in by_ranks:
        raise ValueError(
            f"bench_scaling: no 1-rank run among rank counts {sorted(by_ranks)}; the NumPy "
            "baseline is measured there, so include 1 in --ranks"
        )
    baseline = {row["case"]: float(row["numpy_s"]) for row in by_ranks[1]["rows"]}
    order = list(baseline)
    rows = []
    for p in sorted(by_ranks):
        for row in by_ranks[p]["rows"]:
            numpy_s, time_s = baseline[row["case"]], float(row["dmesh_s"])
            rows.append({
                "case": row["case"],
                "ranks": p,
                "time_s": time_s,
                "numpy_s": numpy_s,
                "speedup": numpy_s / time_s,
                "efficiency": numpy_s / time_s / p,
                "max_relative_error": row.get("max_relative_error"),
            })  # fmt: skip
    rows.sort(key=lambda r: (order.index(r["case"]), r["ranks"]))
    load = {
        str(p): [run.get("loadavg_before"), run.get("loadavg_after")]
        for p, run in sorted(by_ranks.items())
    }
    doc = {"ranks": sorted(by_ranks), "cpu_count": os.cpu_count(), "loadavg": load, "rows": rows}
    return {**doc, "weak_rows": merge_weak(by_ranks)}


def merge_weak(by_ranks: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Weak-scaling rows: time at p ranks, the 1-rank time, efficiency = 1-rank time / time.

    The work per rank is fixed, so ideal weak scaling keeps the time constant
    (efficiency 1.0); ``numpy_s`` is one-process NumPy on the 1-rank problem.
    """
    base = {row["case"]: row for row in by_ranks[1].get("weak_rows", [])}
    rows = []
    for p in sorted(by_ranks):
        for row in by_ranks[p].get("weak_rows", []):
            one = base.get(row["case"])
            if one is None:
                continue
            time_s, time_1 = float(row["dmesh_s"]), float(one["dmesh_s"])
            rows.append({
                "case": row["case"],
                "ranks": p,
                "time_s": time_s,
                "time_1_s": time_1,
                "numpy_s": float(one["numpy_s"]),
                "efficiency": time_1 / time_s,
                "max_relative_error": row.get("max_relative_error"),
            })  # fmt: skip
    order = list(base)
    rows.sort(key=lambda r: (order.index(r["case"]), r["ranks"]))
    return rows


def table(doc: dict[str, Any]) -> str:
    """The merged rows as text: case, ranks, time, NumPy's time, speed-up, efficiency."""
    head = f"{'case':<30} {'ranks':>5} {'time':>10} {'numpy 1p':>10} {'speed-up':>9}"
    lines = [head + f" {'efficiency':>10}"]
    previous = None
    for r in doc["rows"]:
        if previous is not None and r["case"] != previous:
            lines.append("")
        previous = r["case"]
        lines.append(
            f"{r['case']:<30} {r['ranks']:>5} {_fmt(r['time_s']):>10} {_fmt(r['numpy_s']):>10} "
            f"{r['speedup']:>9.2f} {r['efficiency']:>10.2f}"
        )
    if doc.get("weak_rows"):
        lines += ["", "weak scaling (fixed work per rank):",
                  f"{'case':<32} {'ranks':>5} {'time':>10} {'time 1p':>10} {'numpy 1p':>10}"
                  f" {'efficiency':>10}"]  # fmt: skip
        previous = None
        for r in doc["weak_rows"]:
            if previous is not None and r["case"] != previous:
                lines.append("")
            previous = r["case"]
            lines.append(
                f"{r['case']:<32} {r['ranks']:>5} {_fmt(r['time_s']):>10} "
                f"{_fmt(r['time_1_s']):>10} {_fmt(r['numpy_s']):>10} {r['efficiency']:>10.2f}"
            )
    return "\n".join(lines)


def _load(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.3f} s"


# -- one run at p ranks (under mpiexec) --------------------------------------------


def _time_case(comm: Any, mesh: Any, case: Case, placement: dict[str, Any]) -> dict[str, Any]:
    """One case's row at this rank count: dmesh's time, NumPy's at 1 rank, the error.

    Collective: every rank builds the inputs and times the same calls.
    """
    from bench_timing import alternating
    from mpi4py import MPI

    import dmesh

    p = comm.Get_size()
    fulls = case.make(p)
    ours = [dmesh.distribute(x, mesh, [placement[k]]) for x, k in zip(fulls, case.placements)]
    # The check, outside the timings: each rank compares its block with NumPy's.
    got, expected = case.compute(*ours), case.compute(*fulls)
    if isinstance(got, float):
        error = abs(got - expected) / abs(expected)
    else:
        block = expected[got.spec.layout.slices(mesh.coordinate)]
        error = float(np.max(np.abs(got.local - block), initial=0.0))
        error /= float(np.max(np.abs(expected)))
    error = float(comm.allreduce(error, op=MPI.MAX))
    del got, expected
    fns: list[Callable[[], Any]] = [partial(case.compute, *ours)]
    if p == 1:
        fns.append(partial(case.compute, *fulls))
    times = alternating(comm, fns, case.calls, case.repeats)
    row: dict[str, Any] = {"case": case.name, "dmesh_s": times[0], "max_relative_error": error}
    if p == 1:
        row["numpy_s"] = times[1]
    return row


def run_ranks(out: Path) -> int:
    """Time every case at this job's rank count; rank 0 writes ``out`` (collective)."""
    from mpi4py import MPI

    import dmesh
    from dmesh import Replicate, Shard

    load = os.getloadavg()[0]  # other work on the machine: a hint of noise
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    placement = {"S(0)": Shard(0), "R": Replicate()}
    rows: dict[str, list[dict[str, Any]]] = {"rows": [], "weak_rows": []}
    ok = True
    for key, cases in (("rows", STRONG), ("weak_rows", WEAK)):
        for case in cases:
            row = _time_case(comm, mesh, case, placement)
            ok &= row["max_relative_error"] < 1e-10
            rows[key].append(row)
            if rank == 0:
                kind = "strong" if key == "rows" else "weak"
                print(
                    f"  {p} rank(s), {kind}: {case.name:<32} {_fmt(row['dmesh_s']):>10}", flush=True
                )
    if rank == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"ranks": p, "loadavg_before": load, "loadavg_after": os.getloadavg()[0]}
        out.write_text(json.dumps({**doc, **rows}, indent=1))
    mesh.close()
    comm.Free()
    return 0 if ok else 1


# -- the driver: one mpiexec job per rank count, then merge ------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--ranks",
        type=int,
        nargs="+",
        default=None,
        help="rank counts (default: powers of two up to the cores; 1 always runs)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="merged JSON")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per rank count")
    parser.add_argument(
        "--model",
        action="store_true",
        help="fit the latency-bandwidth model and predict 16, 256 and 4096 ranks",
    )
    parser.add_argument("--run-ranks", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_ranks is not None:  # inside one mpiexec job
        return run_ranks(args.run_ranks)

    ranks = sorted({1, *(args.ranks or default_ranks())})
    mpiexec = mpiexec_command()
    runs_dir = args.out.parent / "scaling-runs"
    args.out.unlink(missing_ok=True)  # a failed run leaves no stale numbers behind
    runs, failed = [], False
    print(f"strong scaling at ranks {ranks} ({os.cpu_count()} cores here), 1-D mesh, "
          "one BLAS thread per rank", flush=True)  # fmt: skip
    for p in ranks:
        run_out = runs_dir / f"n{p}.json"
        run_out.unlink(missing_ok=True)
        cmd = [*mpiexec, "-n", str(p), sys.executable, __file__, "--run-ranks", str(run_out)]
        try:
            code = subprocess.run(cmd, env=rank_env(p), cwd=ROOT, timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            print(f"bench_scaling: the {p}-rank run passed {args.timeout} s; stopped")
            code = 1
        if code != 0:
            print(f"bench_scaling: the {p}-rank run failed (exit {code})")
            failed = True
        if run_out.exists():
            runs.append(json.loads(run_out.read_text()))
    if not any(run["ranks"] == 1 for run in runs):
        print("bench_scaling: no 1-rank result, so no baseline; nothing merged")
        return 1
    doc = merge(runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print("baseline: one-process NumPy on the full array (1-rank run); "
          "speed-up = NumPy time / time; efficiency = speed-up / ranks")  # fmt: skip
    print(table(doc))
    load = ", ".join(f"{p} ranks {_load(b)} -> {_load(a)}" for p, (b, a) in doc["loadavg"].items())
    print(f"1-minute load average before -> after each run ({os.cpu_count()} cores): {load}")
    if args.model:
        failed |= not model_report(doc, max(2, *ranks), mpiexec, args)
        args.out.write_text(json.dumps(doc, indent=1))
    return int(failed)


def model_report(doc: dict[str, Any], p: int, mpiexec: list[str], args: argparse.Namespace) -> bool:
    """Measure the collectives at ``p`` ranks, fit the model, print and store predictions."""
    import scaling_model

    measured = args.out.parent / "scaling-collectives.json"
    measured.unlink(missing_ok=True)
    cmd = [*mpiexec, "-n", str(p), sys.executable, str(Path(scaling_model.__file__)), str(measured)]
    print(f"$ mpiexec -n {p} python scripts/scaling_model.py  (collectives for the model)")
    try:
        code = subprocess.run(cmd, env=rank_env(p), cwd=ROOT, timeout=args.timeout).returncode
    except subprocess.TimeoutExpired:
        code = 1
    if code != 0 or not measured.exists():
        print(f"bench_scaling: measuring the collectives at {p} ranks failed (exit {code})")
        return False
    doc["model"] = scaling_model.report(doc, json.loads(measured.read_text()))
    return True


if __name__ == "__main__":
    sys.exit(main())
