"""Communicators dmesh creates are freed before MPI finalizes, with no error at exit."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from mpi4py import MPI

from helpers import assert_all, launch_job

pytestmark = pytest.mark.job  # launches a 2-rank job: runs from the 1-rank run only

SCRIPT = textwrap.dedent(
    """
    import atexit
    from mpi4py import MPI

    def report():  # registered first, so it runs after dmesh's own exit handler
        import dmesh.collectives.lifecycle as lifecycle
        print(f"rank {MPI.COMM_WORLD.Get_rank()}: {len(lifecycle._owned)} left", flush=True)

    atexit.register(report)

    import numpy as np
    import dmesh.collectives as C
    import dmesh

    mesh = dmesh.init_mesh((2, 1), names=("x", "y"))
    sub = mesh[("x", "y")]
    flat = mesh.flatten()
    total = C.all_reduce(np.ones(2), "sum", [1, 0])  # a cached rank-list communicator
    assert total[0] == 2.0
    # No close(): what is left open must be freed at exit.
    """
)


def test_open_communicators_are_freed_at_exit(
    comm: MPI.Intracomm, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Rank 0 launches a 2-rank job that leaves meshes open and checks how it ends."""
    ok, message = True, ""
    if comm.Get_rank() == 0:
        directory = tmp_path_factory.mktemp("lifecycle")
        script = Path(directory) / "leave_open.py"
        script.write_text(SCRIPT)
        child = launch_job(str(script), 2)
        reports = re.findall(r"rank \d+: \d+ left", child.stdout)  # in rank order
        ok = (
            child.returncode == 0
            and reports == ["rank 0: 0 left", "rank 1: 0 left"]
            and "error" not in child.stderr.lower()
        )
        message = f"exit {child.returncode}\nstdout: {child.stdout}\nstderr: {child.stderr}"
    assert_all(comm, ok, message)
