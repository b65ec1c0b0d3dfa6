"""Test harness shared by every test module.

Every test runs on all ranks of ``MPI.COMM_WORLD``. Verdicts are collective:
a test that fails on one rank fails on every rank (see
``pytest_runtest_call``), so the ranks stay in step and the report names the
failing ranks. Hypothesis draws the same examples on every rank
(derandomized, no example database).

Two kinds of test run once, in the 1-rank run only (deselected at larger world
sizes by ``pytest_collection_modifyitems``, so that ``scripts/run_tests.py``
counts them once):

- ``pure`` tests need no communication (layouts, plans, rule tables, placement
  values, introspection): every test under ``tests/pure/`` is one; a test
  elsewhere can carry ``@pytest.mark.pure``.
- ``job`` tests launch MPI jobs of their own (``helpers.launch_job``) or other
  processes: they choose their rank counts themselves, so running them again
  from each rank count of the suite repeats the same work.

Tests that need a mesh ask for the ``mesh`` fixture: one parameter per mesh
shape the world size allows (``MESH_SHAPES``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import traffic_checks
from hypothesis import HealthCheck, settings
from mpi4py import MPI

import dmesh
from dmesh import _hooks, context

BUILD = Path(__file__).resolve().parent.parent / "build"
PURE = Path(__file__).resolve().parent / "pure"
WORLD = MPI.COMM_WORLD.Get_size()
# The whole world as one mesh dimension, and at 4 ranks a 2-D (2, 2) mesh too.
MESH_SHAPES: list[tuple[int, ...]] = [(WORLD,)] + ([(2, 2)] if WORLD == 4 else [])
ONCE = ("pure", "job")  # markers of the tests that run in the 1-rank run only

settings.register_profile(
    "mpi",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("mpi")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests under tests/pure/ ``pure``; above one rank, deselect ``pure`` and ``job`` tests.

    The decision depends on the world size only, so every rank keeps the same
    tests in the same order.
    """
    for item in items:
        if PURE in item.path.parents:
            item.add_marker(pytest.mark.pure)
    if WORLD == 1:
        return
    once = [item for item in items if any(item.get_closest_marker(m) for m in ONCE)]
    if once:
        config.hook.pytest_deselected(items=once)
        dropped = {id(item) for item in once}
        items[:] = [item for item in items if id(item) not in dropped]


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


@pytest.fixture(params=MESH_SHAPES, ids=str)
def mesh(request: pytest.FixtureRequest, comm: MPI.Intracomm) -> Iterator[dmesh.DeviceMesh]:
    """A mesh over this test's communicator, once per shape in ``MESH_SHAPES``."""
    with dmesh.init_mesh(request.param, comm=comm) as m:
        yield m


@pytest.fixture
def donations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The donor index of every operator call that offered a temporary's block (dmesh._elision)."""
    seen: list[int] = []
    real = _hooks.dispatch_donated
    assert real is not None

    def counting(ufunc: np.ufunc, inputs: tuple[object, ...], donor: int) -> object:
        seen.append(donor)
        return real(ufunc, inputs, donor)

    monkeypatch.setattr(_hooks, "dispatch_donated", counting)
    return seen


@pytest.fixture
def elide() -> Iterator[None]:
    """Temporary elision on for one test, whatever DMESH_ELIDE says."""
    previous = context.set_temporary_elision(True)
    try:
        yield
    finally:
        context.set_temporary_elision(previous)


@pytest.fixture(params=traffic_checks.TRAFFIC_MESH_SHAPES, ids=str)
def traffic_mesh(request: pytest.FixtureRequest, comm: MPI.Intracomm) -> Iterator[dmesh.DeviceMesh]:
    """A mesh for the scaling-model tests: the 1-D one and each 2-D shape of the world size."""
    with dmesh.init_mesh(request.param, comm=comm) as m:
        yield m
