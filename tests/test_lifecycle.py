"""Communicators dmesh creates are freed before MPI finalizes, with no error at exit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mpi4py import MPI

from helpers import assert_all

SCRIPT = textwrap.dedent(
    """
    import atexit
    from mpi4py import MPI

    def report():  # registered first, so it runs after dmesh's own exit handler
        import collectives._lifecycle as lifecycle
        print(f"rank {MPI.COMM_WORLD.Get_rank()}: {len(lifecycle._owned)} left", flush=True)

    atexit.register(report)

    import numpy as np
    import collectives as C
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
        mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
        # A clean environment: the child job must not join this job's process manager.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI", "HYDRA", "MPI"))}
        child = subprocess.run(
            [mpiexec, "-n", "2", sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        # The two ranks' lines may interleave in the shared pipe.
        reports = sorted(re.findall(r"rank \d+: \d+ left", child.stdout))
        ok = (
            child.returncode == 0
            and reports == ["rank 0: 0 left", "rank 1: 0 left"]
            and "error" not in child.stderr.lower()
        )
        message = f"exit {child.returncode}\nstdout: {child.stdout}\nstderr: {child.stderr}"
    assert_all(comm, ok, message)
