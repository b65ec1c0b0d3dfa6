"""An uncaught exception on one rank aborts the whole job instead of hanging the others.

Each test launches jobs of its own, so they run once, from the 1-rank run (the
``job`` marker, see conftest.py).
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from mpi4py import MPI

from helpers import assert_all, launch_job

pytestmark = pytest.mark.job

CRASH = textwrap.dedent(
    """
    from mpi4py import MPI
    import dmesh

    mesh = dmesh.init_mesh(-1, names="x")
    if MPI.COMM_WORLD.Get_rank() == 1:
        raise RuntimeError("deliberate failure on one rank")
    MPI.COMM_WORLD.Barrier()  # the other ranks wait here for rank 1, forever without the hook
    """
)

PROBE = textwrap.dedent(
    """
    import sys
    from mpi4py import MPI
    import dmesh

    installed = sys.excepthook is not sys.__excepthook__
    print(f"rank {MPI.COMM_WORLD.Get_rank()}: installed={installed}", flush=True)
    """
)


def _write(tmp_path_factory: pytest.TempPathFactory, name: str, text: str) -> str:
    script = Path(tmp_path_factory.mktemp("abort")) / name
    script.write_text(text)
    return str(script)


def test_exception_on_one_rank_aborts_the_job(
    comm: MPI.Intracomm, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Rank 1 of a 3-rank child raises while ranks 0 and 2 wait in a barrier.

    Liveness without a clock: a job the hook did not end would wait in the
    barrier until ``launch_job`` kills it (``TimeoutExpired``); a job it ended
    exits non-zero with the hook's line from rank 1, whatever the load.
    MPICH's own ``MPI_Abort`` line is not required: the process manager may
    end the job before forwarding it (about one run in ten on a loaded
    machine), and ending the job at all already proves the abort.
    """
    ok, message = True, ""
    if comm.Get_rank() == 0:
        script = _write(tmp_path_factory, "crash.py", CRASH)
        try:
            child = launch_job(script, 3, extra_env={"DMESH_ABORT_ON_ERROR": "1"})
        except subprocess.TimeoutExpired as exc:
            ok, message = False, f"child job still running after {exc.timeout} s: {exc.stderr!r}"
        else:
            ok = (
                child.returncode != 0
                and "[rank 1] dmesh: uncaught RuntimeError on rank 1 of 3" in child.stderr
                and "RuntimeError: deliberate failure on one rank" in child.stderr
            )
            message = f"exit {child.returncode}\nstdout: {child.stdout}\nstderr: {child.stderr}"
    assert_all(comm, ok, message)


@pytest.mark.parametrize(
    ("ranks", "setting", "expected"),
    [(2, "0", False), (2, "1", True), (1, "1", False)],
    ids=["opted-out", "two-ranks", "one-rank"],
)
def test_hook_is_installed_only_with_several_ranks_and_not_opted_out(
    comm: MPI.Intracomm,
    tmp_path_factory: pytest.TempPathFactory,
    ranks: int,
    setting: str,
    expected: bool,
) -> None:
    """``DMESH_ABORT_ON_ERROR=0`` or a single rank leaves ``sys.excepthook`` as it was."""
    ok, message = True, ""
    if comm.Get_rank() == 0:
        script = _write(tmp_path_factory, "probe.py", PROBE)
        child = launch_job(script, ranks, extra_env={"DMESH_ABORT_ON_ERROR": setting})
        reports = sorted(line for line in child.stdout.splitlines() if "installed=" in line)
        wanted = [f"rank {r}: installed={expected}" for r in range(ranks)]
        ok = child.returncode == 0 and reports == wanted
        message = f"exit {child.returncode}\nstdout: {child.stdout}\nstderr: {child.stderr}"
    assert_all(comm, ok, message)
