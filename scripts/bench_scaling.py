"""Benchmark: strong scaling, each case's time at several rank counts on a 1-D mesh.

The same global problem at every rank count (strong scaling):

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
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mpi_env import rank_env

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
    return {"ranks": sorted(by_ranks), "cpu_count": os.cpu_count(), "loadavg": load, "rows": rows}


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
    return "\n".join(lines)


def _load(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.3f} s"


# -- one run at p ranks (under mpiexec) --------------------------------------------


def heat_step(padded: np.ndarray, alpha: float = 0.1) -> np.ndarray:
    """Explicit 5-point heat step on the interior of a block padded by one cell."""
    out = np.empty_like(padded)  # the padding is trimmed; only the interior is written
    c = padded[1:-1, 1:-1]
    lap = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * c
    out[1:-1, 1:-1] = c + alpha * lap
    return out


@dataclass(frozen=True)
class Case:
    """One strong-scaling case: the same global problem at every rank count."""

    name: str
    make: Callable[[], list[np.ndarray]]  # the full inputs, the same on every rank
    placements: list[str]  # per input: "S(0)" or "R"
    compute: Callable[..., Any]  # NumPy code: runs on DArrays and, as baseline, on ndarrays
    calls: int  # per timed batch
    repeats: int  # batches


def _stencil(u: Any) -> Any:
    if isinstance(u, np.ndarray):
        return heat_step(np.pad(u, 1))[1:-1, 1:-1]
    import dmesh

    return dmesh.map_overlap(heat_step, u, 1, boundary=0.0)


def _normal(seed: int, *shape: int) -> list[np.ndarray]:
    return [np.random.default_rng(seed).standard_normal(shape)]


def _complex(seed: int, *shape: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) + 1j * rng.standard_normal(shape)]


CASES = [
    Case("matmul 2048^2 S(0) @ R", lambda: _normal(0, 2048, 2048) * 2, ["S(0)", "R"],
         lambda a, b: a @ b, 1, 9),
    Case("heat step 4096^2 map_overlap", lambda: _normal(2, 4096, 4096), ["S(0)"],
         _stencil, 1, 11),
    Case("fftn 128^3 c128", lambda: _complex(1, 128, 128, 128), ["S(0)"], np.fft.fftn, 1, 15),
    Case("sum 2e7 f64", lambda: [np.random.default_rng(3).random(2 * 10**7)], ["S(0)"],
         lambda a: float(np.sum(a)), 10, 15),
]  # fmt: skip


def run_ranks(out: Path) -> int:
    """Time every case at this job's rank count; rank 0 writes ``out`` (collective)."""
    from bench_timing import alternating
    from mpi4py import MPI

    import dmesh
    from dmesh import Replicate, Shard

    load = os.getloadavg()[0]  # other work on the machine: a hint of noise
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    placement = {"S(0)": Shard(0), "R": Replicate()}
    rows = []
    ok = True
    for case in CASES:
        fulls = case.make()
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
        ok &= error < 1e-10
        del got, expected
        fns: list[Callable[[], Any]] = [partial(case.compute, *ours)]
        if p == 1:
            fns.append(partial(case.compute, *fulls))
        times = alternating(comm, fns, case.calls, case.repeats)
        row: dict[str, Any] = {"case": case.name, "dmesh_s": times[0], "max_relative_error": error}
        if p == 1:
            row["numpy_s"] = times[1]
        rows.append(row)
        if rank == 0:
            print(f"  {p} rank(s): {case.name:<30} {_fmt(times[0]):>10}", flush=True)
        del ours, fulls, fns
    if rank == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"ranks": p, "loadavg_before": load, "loadavg_after": os.getloadavg()[0]}
        out.write_text(json.dumps({**doc, "rows": rows}, indent=1))
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
    parser.add_argument("--run-ranks", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_ranks is not None:  # inside one mpiexec job
        return run_ranks(args.run_ranks)

    ranks = sorted({1, *(args.ranks or default_ranks())})
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    runs_dir = args.out.parent / "scaling-runs"
    args.out.unlink(missing_ok=True)  # a failed run leaves no stale numbers behind
    runs, failed = [], False
    print(f"strong scaling at ranks {ranks} ({os.cpu_count()} cores here), 1-D mesh, "
          "one BLAS thread per rank", flush=True)  # fmt: skip
    for p in ranks:
        run_out = runs_dir / f"n{p}.json"
        run_out.unlink(missing_ok=True)
        cmd = [mpiexec, "-n", str(p), sys.executable, __file__, "--run-ranks", str(run_out)]
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
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
