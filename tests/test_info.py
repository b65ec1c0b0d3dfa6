"""``python -m dmesh.info``: the facts it reports agree with MPI's own answers."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from mpi4py import MPI

from dmesh import info
from helpers import assert_all


def test_report_is_consistent(comm: MPI.Intracomm) -> None:
    facts = info.report(comm)
    size = comm.Get_size()
    ok = (
        facts["ranks"] == size
        and sum(facts["ranks_per_node"]) == size
        and facts["nodes"] == len(facts["ranks_per_node"])
        and math.prod(facts["suggested_mesh"]) == size
        and facts["thread_level"] in ("single", "funneled", "serialized", "multiple")
        and facts["library"]
        and facts["cuda_aware"] in (None, True, False)
    )
    # Every rank got the same report (it is built from collective answers).
    same = comm.allgather(repr(facts)) == [repr(facts)] * size
    assert_all(comm, bool(ok) and same, repr(facts))
    text = info._format(facts)
    assert_all(comm, "suggested mesh   dmesh.init_mesh(" in text and "MPI library" in text, text)


@pytest.mark.job
def test_module_runs_alone(comm: MPI.Intracomm) -> None:
    """``python -m dmesh.info`` as its own one-process job prints the report."""
    ok, message = True, ""
    if comm.Get_rank() == 0:
        # Without this job's process-manager variables: a singleton of its own.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI", "HYDRA", "MPI"))}
        child = subprocess.run(
            [sys.executable, "-m", "dmesh.info"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        ok = child.returncode == 0 and "suggested mesh" in child.stdout
        message = child.stdout + child.stderr
    assert_all(comm, ok, message)
