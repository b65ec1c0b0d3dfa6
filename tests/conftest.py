"""Test harness shared by every test module.

Every test runs on all ranks of ``MPI.COMM_WORLD``. Verdicts are collective:
a test that fails on one rank fails on every rank (see
``pytest_runtest_call``), so the ranks stay in step and the report names the
failing ranks. Hypothesis draws the same examples on every rank
(derandomized, no example database).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from mpi4py import MPI

BUILD = Path(__file__).resolve().parent.parent / "build"

settings.register_profile(
    "mpi",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("mpi")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Agree on the verdict of the test body across all ranks before reporting it."""
    error: BaseException | None = None
    try:
        result = yield
    except (pytest.skip.Exception, pytest.xfail.Exception):
        raise
    except Exception as exc:
        error = exc
    world = MPI.COMM_WORLD
    verdicts = world.allgather(error is None)
    if error is not None:
        raise error
    failed = [rank for rank, ok in enumerate(verdicts) if not ok]
    if failed:
        raise AssertionError(f"this test failed on rank(s) {failed}; see their logs")
    return result


@pytest.fixture
def comm() -> Iterator[MPI.Intracomm]:
    """A private duplicate of COMM_WORLD for one test, freed afterwards."""
    dup = MPI.COMM_WORLD.Dup()
    try:
        yield dup
    finally:
        dup.Free()


@pytest.fixture
def tmp(comm: MPI.Intracomm, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A directory every rank sees: made by rank 0 under build/, removed after the test."""
    path = None
    if comm.Get_rank() == 0:
        BUILD.mkdir(exist_ok=True)
        prefix = f"{request.module.__name__.replace('_', '-')}-"
        path = tempfile.mkdtemp(prefix=prefix, dir=BUILD)
    path = comm.bcast(path, 0)
    yield Path(path)
    comm.Barrier()
    if comm.Get_rank() == 0:
        shutil.rmtree(path)
