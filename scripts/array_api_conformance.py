"""Run the Array API conformance suite (data-apis/array-api-tests) SPMD on ``dmesh.array_api``.

Usage::

    python scripts/array_api_conformance.py SUITE [--ranks 2 4] [--max-examples 100]
        [--out build/conformance] [--keep-deadline] [pytest args...]

``SUITE`` is a checkout of https://github.com/data-apis/array-api-tests (with
its ``array-api`` submodule); it is not part of this repository. Each
``mpiexec -n N`` run starts pytest on every rank with the same arguments:

- ``--hypothesis-derandomize``, so that every rank draws the same examples
  and makes the same collective calls in the same order;
- ``--hypothesis-disable-deadline`` unless ``--keep-deadline``: Hypothesis's
  deadline is each rank's own wall clock, so on an oversubscribed machine
  (more ranks than cores, where a collective costs about half a
  millisecond) one rank can time an example out while the others pass it,
  and the ranks then diverge;
- ``ARRAY_API_TESTS_MODULE=dmesh.array_api`` and
  ``ARRAY_API_TESTS_VERSION=2024.12``.

Every rank writes ``OUT/nN/rR.xml`` (junit) and ``rR.log``. The summary
gives, per N, the pass rate over the tests not skipped, the counts per test
file, and every test whose outcome differs between ranks (there should be
none: a rank that disagrees is a wrong answer somewhere).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mpi_env import rank_env

ROOT = Path(__file__).resolve().parent.parent
OUTCOMES = ("passed", "failure", "error", "skipped")


def rank_main(suite: Path, out: Path, pytest_args: list[str]) -> int:
    """Body of each rank: pytest in the suite's folder, its report and log under ``out``."""
    import pytest
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    log = open(out / f"r{rank}.log", "w")  # noqa: SIM115 (lives until exit)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    os.chdir(suite)
    return int(pytest.main([*pytest_args, f"--junitxml={out / f'r{rank}.xml'}"]))


def outcomes(report: Path) -> dict[str, str]:
    """Test id -> outcome (passed, failure, error or skipped) from one rank's junit report."""
    result = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in OUTCOMES]
        result[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    return result


def summarize(out: Path, nranks: int) -> bool:
    """Print the run's figures; True when every rank reported and no two disagree."""
    reports = [out / f"r{r}.xml" for r in range(nranks)]
    missing = [str(p) for p in reports if not p.exists()]
    if missing:
        print(f"n={nranks}: no report from {', '.join(missing)} (see the logs beside them)")
        return False
    per_rank = [outcomes(p) for p in reports]
    counts = collections.Counter(per_rank[0].values())
    run = counts["passed"] + counts["failure"] + counts["error"]
    rate = 100.0 * counts["passed"] / max(run, 1)
    print(f"n={nranks}: {counts['passed']}/{run} passed ({rate:.1f}% of the tests not skipped), "
          f"{counts['failure'] + counts['error']} failed, {counts['skipped']} skipped")  # fmt: skip
    by_file: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for test, kind in per_rank[0].items():
        parts = test.split("::")[0].split(".")
        by_file[next((q for q in parts if q.startswith("test_")), parts[-1])][kind] += 1
    for name, c in sorted(by_file.items()):
        print(f"    {name}: " + ", ".join(f"{c[k]} {k}" for k in OUTCOMES if c[k]))
    tests = sorted(set().union(*per_rank))
    disagree = [t for t in tests if len({p.get(t, "missing") for p in per_rank}) > 1]
    print(f"  tests whose outcome differs between ranks: {len(disagree)}")
    for test in disagree:
        print(f"    {test}: " + ", ".join(p.get(test, "missing") for p in per_rank))
    return not disagree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", type=Path, help="a checkout of data-apis/array-api-tests")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--max-examples", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "conformance")
    keep = "keep Hypothesis's per-example deadline (see the module docstring)"
    parser.add_argument("--keep-deadline", action="store_true", help=keep)
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per mpiexec run")
    parser.add_argument("--rank-main", type=Path, help=argparse.SUPPRESS)
    args, pytest_args = parser.parse_known_args()
    suite = args.suite.resolve()
    if args.rank_main is not None:
        return rank_main(suite, args.rank_main, pytest_args)
    if not (suite / "array_api_tests").is_dir():
        parser.error(f"{suite} holds no array_api_tests folder: give a checkout of array-api-tests")
    pytest_args = [
        "array_api_tests", "-q", "-p", "no:cacheprovider", "--hypothesis-derandomize",
        f"--hypothesis-max-examples={args.max_examples}",
        *([] if args.keep_deadline else ["--hypothesis-disable-deadline"]), *pytest_args,
    ]  # fmt: skip
    mpiexec = Path(sys.executable).parent / "mpiexec"
    ok = True
    for n in args.ranks:
        out = (args.out / f"n{n}").resolve()
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("r*.*"):
            old.unlink()
        env = rank_env(n, latency_bound=True)
        env.setdefault("ARRAY_API_TESTS_MODULE", "dmesh.array_api")
        env.setdefault("ARRAY_API_TESTS_VERSION", "2024.12")
        command = [str(mpiexec if mpiexec.exists() else "mpiexec"), "-n", str(n), sys.executable,
                   __file__, str(suite), "--rank-main", str(out), *pytest_args]  # fmt: skip
        try:
            subprocess.run(command, env=env, timeout=args.timeout, check=False)
        except subprocess.TimeoutExpired:
            print(f"n={n}: still running after {args.timeout} s (a hang?); stopped")
        ok = summarize(out, n) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
