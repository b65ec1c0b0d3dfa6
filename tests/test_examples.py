"""The runnable examples in scripts/ run as their docstrings say.

Each test launches jobs of its own, so they run once, from the 1-rank run (the
``job`` marker, see conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mpi4py import MPI

from helpers import assert_all, launch_job

pytestmark = pytest.mark.job
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("ranks", [1, 3])
@pytest.mark.parametrize(
    "script",
    [
        "example_collectives.py",
        "example_darray.py",
        "examples/heat2d.py",
        "examples/spectral_poisson.py",
        "examples/least_squares.py",
    ],
)
def test_example_runs(comm: MPI.Intracomm, script: str, ranks: int) -> None:
    """Rank 0 launches the example as a job of its own (1 rank, and 3: uneven blocks)."""
    _run_example(comm, str(ROOT / "scripts" / script), ranks)


@pytest.mark.parametrize(
    "script", ["examples/heat2d.py", "examples/spectral_poisson.py", "examples/least_squares.py"]
)
def test_example_runs_compiled(comm: MPI.Intracomm, script: str) -> None:
    """The examples with their work through dmesh.compile (``--compiled``), at 3 ranks: the
    same check against NumPy passes (compiled, or eagerly after a graph break)."""
    _run_example(comm, str(ROOT / "scripts" / script), 3, ("--compiled",))


def _run_example(comm: MPI.Intracomm, path: str, ranks: int, args: tuple[str, ...] = ()) -> None:
    ok, message = True, ""
    if comm.Get_rank() == 0:
        child = launch_job(path, ranks, args=args)
        ok = child.returncode == 0
        message = f"-n {ranks}: exit {child.returncode}\n{child.stdout}\n{child.stderr}\n"
    assert_all(comm, ok, message)


@pytest.mark.timeout(300)  # two runs of up to 120 s each, on a loaded machine
def test_demo_runs_as_plain_python_and_at_3_ranks(
    comm: MPI.Intracomm, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``python scripts/demo.py`` (one rank, no mpiexec) and an uneven (3, 1) mesh pass."""
    checkpoint = str(tmp_path_factory.mktemp("demo") / "checkpoint")
    demo = str(ROOT / "scripts" / "demo.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI", "HYDRA", "MPI"))}
    plain = subprocess.run(
        [sys.executable, demo, "--checkpoint", checkpoint, "--steps", "40"],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
    )  # fmt: skip
    ok = plain.returncode == 0 and "OK, matches NumPy" in plain.stdout
    message = f"plain: exit {plain.returncode}\n{plain.stdout}\n{plain.stderr}\n"
    script = tmp_path_factory.mktemp("demo3") / "run_demo.py"
    script.write_text(
        "import sys, runpy\n"
        f"sys.argv = [{demo!r}, '--checkpoint', {checkpoint!r}, '--steps', '40']\n"
        f"runpy.run_path({demo!r}, run_name='__main__')\n"
    )
    three = launch_job(str(script), 3, timeout=120)
    ok = ok and three.returncode == 0 and "(3, 1) mesh" in three.stdout
    message += f"-n 3: exit {three.returncode}\n{three.stdout}\n{three.stderr}"
    assert_all(comm, ok and "OK, matches NumPy" in three.stdout, message)
