"""Run the test suite under ``mpiexec -n N`` for several N and print one summary line.

Usage: ``python scripts/run_tests.py [--ranks 1 2 3 4] [pytest args...]``.

Rank 0 reports to the terminal; the other ranks write to
``build/test-logs/n{N}-rank{R}.log``, printed when their run fails. Every run is
also bounded by an outer timeout, so a hang that escapes pytest-timeout still
ends. The last line is ``tests: P passed, F failed, S skipped`` over all runs.
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
from mpi_env import rank_env

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "build" / "test-logs"


def rank_main(nranks: int, pytest_args: list[str]) -> int:
    """Body of each rank: run pytest, rank 0 on the terminal, others into a log file."""
    import pytest
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    args = list(pytest_args)
    if rank == 0:
        args += [f"--junitxml={LOGS / f'n{nranks}.xml'}"]
    else:
        log = open(LOGS / f"n{nranks}-rank{rank}.log", "w")  # noqa: SIM115 (lives until exit)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        args += ["-q"]
    return int(pytest.main(args))


def counts_from_junit(path: Path) -> tuple[int, int, int] | None:
    if not path.exists():
        return None
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return tests - failed - skipped, failed, skipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--timeout", type=int, default=900, help="seconds per rank count")
    parser.add_argument("--rank-main", type=int, default=None, help=argparse.SUPPRESS)
    opts, pytest_args = parser.parse_known_args()
    if opts.rank_main is not None:
        return rank_main(opts.rank_main, pytest_args)

    shutil.rmtree(LOGS, ignore_errors=True)
    LOGS.mkdir(parents=True)
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    totals = [0, 0, 0]
    bad_runs: list[str] = []
    for n in opts.ranks:
        print(f"\n===== mpiexec -n {n} =====", flush=True)
        cmd = [mpiexec, "-n", str(n), sys.executable, __file__, "--rank-main", str(n)]
        try:
            code = subprocess.run(
                [*cmd, *pytest_args], env=rank_env(n), timeout=opts.timeout, cwd=ROOT
            ).returncode
        except subprocess.TimeoutExpired:
            code = -1
            print(f"mpiexec -n {n}: no result after {opts.timeout} s (hang?)", flush=True)
        counts = counts_from_junit(LOGS / f"n{n}.xml")
        if counts is not None:
            totals = [t + c for t, c in zip(totals, counts)]
        if code != 0 or counts is None:
            bad_runs.append(f"-n {n} (exit {code})")
            for log in sorted(LOGS.glob(f"n{n}-rank*.log")):
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
