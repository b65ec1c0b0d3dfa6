"""Timing helpers shared by the benchmarks: alternating batches, slowest rank's time.

Each case and its baseline are timed in alternating batches (ours, theirs,
ours, ...) and the median batch is reported, so both see the same machine
state: on the shared 2-core development machine, timing one after the other
moved ratios by up to 30% between runs.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mpi4py import MPI

ROOT = Path(__file__).resolve().parent.parent


def batch_time(comm: MPI.Intracomm, fn: Callable[[], Any], calls: int) -> float:
    """Per-call seconds of ``calls`` calls of ``fn``, the slowest rank's (collective)."""
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = (time.perf_counter() - start) / calls
    return float(comm.allreduce(elapsed, op=MPI.MAX))


def alternating(
    comm: MPI.Intracomm, fns: Sequence[Callable[[], Any]], calls: int, repeats: int = 15
) -> list[float]:
    """Median per-call time of each of ``fns`` over ``repeats`` alternating batches."""
    for fn in fns:  # warm up: caches, communicators, page mappings
        batch_time(comm, fn, calls)
    series: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, times in zip(fns, series):
            times.append(batch_time(comm, fn, calls))
    return [statistics.median(times) for times in series]


def median_time(
    comm: MPI.Intracomm, fn: Callable[[], Any], repeats: int, *, warmup: bool = False
) -> float:
    """Median over ``repeats`` of the slowest rank's time for one call of ``fn`` (collective)."""
    if warmup:
        fn()
    samples = []
    for _ in range(repeats):
        comm.Barrier()
        start = time.perf_counter()
        fn()
        samples.append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))
    return float(statistics.median(samples))


def one_rank_time(
    comm: MPI.Intracomm, fn: Callable[[], Any], repeats: int = 1, *, warmup: bool = False
) -> float:
    """``fn`` timed on rank 0 alone while the others wait (a one-process baseline).

    The median over ``repeats``, known on every rank (collective).
    """
    median = 0.0
    if comm.Get_rank() == 0:
        if warmup:
            fn()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        median = statistics.median(samples)
    return float(comm.bcast(median, 0))


def write_results(name: str, result: dict[str, Any]) -> Path:
    """Write ``result`` as JSON to the first argument, else to ``build/bench/<name>.json``."""
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "bench" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    return path


def format_seconds(seconds: float) -> str:
    """A time for the bench tables: milliseconds below 10 s, else seconds."""
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.2f} s"
