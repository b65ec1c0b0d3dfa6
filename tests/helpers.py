"""Collective assertions: every rank reaches the same verdict, so none waits alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI


def assert_all(comm: MPI.Comm, ok: bool, message: str = "") -> None:
    """Raise ``AssertionError`` on every rank if ``ok`` is false on any rank."""
    flags = comm.allgather(bool(ok))
    if not all(flags):
        bad = [r for r, f in enumerate(flags) if not f]
        raise AssertionError(f"failed on rank(s) {bad}: {message}")


def assert_equal_all(
    comm: MPI.Comm, actual: Any, expected: Any, *, rtol: float = 0.0, atol: float = 0.0
) -> None:
    """Compare arrays (exactly, or to ``rtol``/``atol``) and agree on the verdict."""
    message = ""
    try:
        actual_np = np.asarray(actual)
        expected_np = np.asarray(expected)
        if actual_np.shape != expected_np.shape or actual_np.dtype != expected_np.dtype:
            raise AssertionError(
                f"shape/dtype {actual_np.shape} {actual_np.dtype} != "
                f"{expected_np.shape} {expected_np.dtype}"
            )
        if rtol == 0.0 and atol == 0.0:
            np.testing.assert_array_equal(actual_np, expected_np)
        else:
            np.testing.assert_allclose(actual_np, expected_np, rtol=rtol, atol=atol)
        ok = True
    except Exception as exc:
        ok = False
        message = f"{type(exc).__name__}: {exc}"
    assert_all(comm, ok, message)


def assert_raises_all(
    comm: MPI.Comm,
    exc_type: type[BaseException],
    fn: Any,
    *args: Any,
    match: str | None = None,
    **kwargs: Any,
) -> BaseException | None:
    """Check that ``fn(*args, **kwargs)`` raises ``exc_type`` on every rank."""
    import re

    caught: BaseException | None = None
    try:
        fn(*args, **kwargs)
        ok, message = False, "no exception"
    except Exception as exc:
        caught = exc
        if not isinstance(exc, exc_type):
            ok, message = False, f"raised {type(exc).__name__}: {exc}"
        else:
            ok = match is None or re.search(match, str(exc)) is not None
            message = f"message {str(exc)!r} does not match {match!r}"
    assert_all(comm, ok, message)
    return caught


def launch_job(
    script: str, ranks: int, timeout: float = 60, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python script`` as a separate ``mpiexec -n ranks`` job; capture its output.

    Called by one rank of the test. The environment drops this job's process
    manager variables so that the child job starts a manager of its own;
    ``extra_env`` is added to it.
    """
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI", "HYDRA", "MPI"))}
    env.update(extra_env or {})
    return subprocess.run(
        [mpiexec, "-n", str(ranks), sys.executable, script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
