"""The runnable examples in scripts/ run as their docstrings say."""

from __future__ import annotations

from pathlib import Path

import pytest
from mpi4py import MPI

from helpers import assert_all, launch_job

ROOT = Path(__file__).resolve().parent.parent


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
def test_example_runs_at_1_and_3_ranks(comm: MPI.Intracomm, script: str) -> None:
    """Rank 0 launches the example as a job of its own and checks it succeeds."""
    ok, message = True, ""
    if comm.Get_rank() == 0:
        for ranks in (1, 3):
            child = launch_job(str(ROOT / "scripts" / script), ranks)
            if child.returncode != 0:
                ok = False
                message += f"-n {ranks}: exit {child.returncode}\n{child.stdout}\n{child.stderr}\n"
    assert_all(comm, ok, message)
