"""Run the test suite once in one process, then under ``mpiexec -n N`` for several N.

Usage: ``python scripts/run_tests.py [tests...] [--ranks 1 2 3 4] [-m EXPR] [pytest args...]``.

- First, one plain process (no ``mpiexec``) runs the tests marked ``pure``
  (no communication: everything under ``tests/pure/``) and ``job`` (they
  launch MPI jobs of their own, at rank counts they choose). Running either
  again at each N would repeat the same work.
- Then each ``mpiexec -n N`` run takes the other tests. Rank 0 reports to the
  terminal; the other ranks write to ``{logs}/n{N}-rank{R}.log``, printed when
  their run fails.

Every run is bounded by an outer timeout, so a hang that escapes
pytest-timeout still ends. ``-m EXPR`` narrows every run further. The last
line is ``tests: P passed, F failed, S skipped`` over all runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mpi_env import mpiexec_command, rank_env

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "build" / "test-logs"
ONCE = "pure or job"  # the markers of tests/conftest.py that run in one process only


def rank_main(nranks: int, logs: Path, pytest_args: list[str]) -> int:
    """Body of each rank: run pytest, rank 0 on the terminal, others into a log file."""
    import pytest
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    args = list(pytest_args)
    if rank == 0:
        args += [f"--junitxml={logs / f'n{nranks}.xml'}"]
    else:
        log = open(logs / f"n{nranks}-rank{rank}.log", "w")  # noqa: SIM115 (lives until exit)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        args += ["-q"]
    return int(pytest.main(args))


def counts_from_junit(path: Path) -> tuple[int, int, int] | None:
    """(passed, failed, skipped) from a junit XML report, or None if there is none."""
    if not path.exists():
        return None
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return tests - failed - skipped, failed, skipped


def marker_expression(chosen: str | None, once: bool) -> str:
    """The ``-m`` expression of one run: the once-only tests or the others, within ``chosen``."""
    own = f"({ONCE})" if once else f"not ({ONCE})"
    return own if chosen is None else f"({chosen}) and {own}"


def run(
    name: str, cmd: list[str], env: dict[str, str], timeout: int, report: Path
) -> tuple[int, tuple[int, int, int] | None]:
    """Run one pytest command; return its exit code and the counts of its junit report."""
    print(f"\n===== {name} =====", flush=True)
    try:
        code = subprocess.run(cmd, env=env, timeout=timeout, cwd=ROOT).returncode
    except subprocess.TimeoutExpired:
        code = -1
        print(f"{name}: no result after {timeout} s (hang?)", flush=True)
    # pytest exits 5 when a run selects no test (a -m or path with none of its kind).
    counts = counts_from_junit(report) if code != 5 else (0, 0, 0)
    return (0 if code == 5 else code), counts


def main() -> int:
    """Run the once-only tests, then each rank count; print the summary line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--timeout", type=int, default=900, help="seconds per run")
    parser.add_argument("-m", dest="markers", default=None, help="pytest -m, applied to each run")
    parser.add_argument("--logs", type=Path, default=LOGS, help="reports and rank logs")
    parser.add_argument("--rank-main", type=int, default=None, help=argparse.SUPPRESS)
    opts, pytest_args = parser.parse_known_args()
    logs = opts.logs.resolve()
    if opts.rank_main is not None:  # this process is one rank; main() chose its -m
        chosen = ["-m", opts.markers] if opts.markers is not None else []
        return rank_main(opts.rank_main, logs, chosen + pytest_args)

    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    mpiexec = mpiexec_command()
    totals = [0, 0, 0]
    bad_runs: list[str] = []

    def account(label: str, code: int, counts: tuple[int, int, int] | None) -> None:
        nonlocal totals
        if counts is not None:
            totals = [t + c for t, c in zip(totals, counts)]
        if code != 0 or counts is None:
            bad_runs.append(f"{label} (exit {code})")

    once_report = logs / "once.xml"
    # No process manager variables: the process starts as an MPI singleton.
    env = {k: v for k, v in rank_env(1).items() if not k.startswith(("PMI", "HYDRA"))}
    cmd = [sys.executable, "-m", "pytest", "-m", marker_expression(opts.markers, True)]
    cmd += [*pytest_args, f"--junitxml={once_report}"]
    account(
        "once", *run("once: pure and job tests, one process", cmd, env, opts.timeout, once_report)
    )
    for n in opts.ranks:
        cmd = [*mpiexec, "-n", str(n), sys.executable, __file__, "--rank-main", str(n)]
        cmd += ["--logs", str(logs), "-m", marker_expression(opts.markers, False), *pytest_args]
        env = rank_env(n, latency_bound=True)  # small collectives: spin, do not sleep
        code, counts = run(f"mpiexec -n {n}", cmd, env, opts.timeout, logs / f"n{n}.xml")
        account(f"-n {n}", code, counts)
        if code != 0 or counts is None:
            for log in sorted(logs.glob(f"n{n}-rank*.log")):
                print(f"----- {log.name} (tail) -----")
                print("\n".join(log.read_text(errors="replace").splitlines()[-60:]))
    if bad_runs:
        print(f"\nfailed runs: {', '.join(bad_runs)}")
        if totals[1] == 0:
            totals[1] = len(bad_runs)
    print(f"tests: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if bad_runs else 0


if __name__ == "__main__":
    sys.exit(main())
