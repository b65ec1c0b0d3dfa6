"""Temporary elision is opt-in and refuses callers that are not a Python operator.

A DArray that C code keeps in a local shows the reference count of a
temporary. From Python that caller is simulated by calling the operator
method directly (``make().__add__(z)``, ``operator.add(make(), z)``): the
count is the same, but the calling frame is not executing the operator
instruction, so the block must not be reused. A real temporary in
``x * y + z`` still is, where elision is on.
"""

from __future__ import annotations

import operator
import sys
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import _elision, context
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from helpers import assert_all, assert_equal_all

WORLD = MPI.COMM_WORLD.Get_size()
BIG = _elision.ELIDE_BYTES // 8 * WORLD * 2  # float64 blocks above the elision size
CAN_ELIDE = _elision.temporary_refs > 0


def operands(mesh: dmesh.DeviceMesh) -> tuple[dmesh.DArray, dmesh.DArray, dmesh.DArray]:
    return tuple(dmesh.full((BIG,), v, mesh=mesh) for v in (2.0, 3.0, 1.0))  # type: ignore[return-value]


def test_off_by_default(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, donations: list[int]) -> None:
    # The test run does not set DMESH_ELIDE: no temporary is offered.
    assert_all(comm, not context.elide_state[0], "elision is on without DMESH_ELIDE")
    x, y, z = operands(mesh)
    for _ in range(2):
        result = x * y + z
    assert_all(comm, donations == [], f"donors {donations}")
    assert_equal_all(comm, result.local, np.full(result.local.shape, 7.0))


@pytest.mark.usefixtures("elide")
def test_real_temporary_is_reused(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, donations: list[int]
) -> None:
    if not CAN_ELIDE:
        pytest.skip("this interpreter cannot tell temporaries apart")
    x, y, z = operands(mesh)
    _ = x * y + z  # the first call decides; the second is served from the cache
    blocks: list[Any] = []

    def product() -> dmesh.DArray:
        t = x * y
        blocks.append(weakref.ref(t.local))  # no reference: t stays a temporary
        return t

    result = product() + z
    assert_all(comm, donations == [0, 0], f"donors {donations}")
    assert_all(comm, result.local is blocks[0](), "the temporary's block was not reused")
    assert_equal_all(comm, result.local, np.full(result.local.shape, 7.0))


# Callers that hold the operand like C code would: the same reference count as
# a temporary, but not a Python operator instruction.
C_LIKE: dict[str, Callable[[dmesh.DArray, dmesh.DArray], dmesh.DArray]] = {
    "method": lambda t, z: t.__add__(z),
    "reflected": lambda t, z: t.__radd__(z),
    "operator.add": operator.add,
    "builtin sum": lambda t, z: sum([z], start=t),
}


@pytest.mark.usefixtures("elide")
@pytest.mark.parametrize("name", list(C_LIKE))
def test_c_like_callers_keep_the_block(
    comm: MPI.Intracomm,
    mesh: dmesh.DeviceMesh,
    donations: list[int],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    x, y, z = operands(mesh)
    call = C_LIKE[name]
    _ = x * y + z  # decided and cached, so a donation would be taken
    kept: list[Any] = []

    def held() -> dmesh.DArray:
        t = x * y
        kept.append(weakref.ref(t.local))
        return t

    result = call(held(), z)
    assert_all(comm, result.local is not kept[0](), f"{name}: the operand's block was reused")
    assert_equal_all(comm, result.local, np.full(result.local.shape, 7.0))
    if CAN_ELIDE and name == "method":
        # The simulation is faithful: without the frame check the count alone
        # would have taken the block (the hole this guard closes).
        monkeypatch.setattr(_elision, "_called_by_operator", lambda _: True)
        before = len(donations)
        _ = held().__add__(z)
        assert_all(comm, len(donations) == before + 1, "the count did not look like a temporary")


def test_free_threaded_builds_never_elide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)
    assert not _elision.supported()
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: True, raising=False)
    real = _elision.sysconfig.get_config_var
    monkeypatch.setattr(
        _elision.sysconfig,
        "get_config_var",
        lambda name: 1 if name == "Py_GIL_DISABLED" else real(name),
    )
    assert not _elision.supported()
    assert _elision._threshold() == 0


def test_setting_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = context.set_temporary_elision(True)
    try:
        assert context.set_temporary_elision(False) is True
        assert _elision.active() is False
        with pytest.raises(ArgumentTypeError, match="True or False"):
            context.set_temporary_elision(1)  # type: ignore[arg-type]
    finally:
        context.set_temporary_elision(previous)
    for text, value in [("1", True), ("on", True), ("0", False), ("", False)]:
        monkeypatch.setenv("DMESH_ELIDE", text)
        assert context._read_elide() is value
    monkeypatch.setenv("DMESH_ELIDE", "maybe")
    with pytest.raises(ArgumentError, match="DMESH_ELIDE='maybe'"):
        context._read_elide()


def test_operator_instructions_are_known() -> None:
    # Every operator with an elision method maps to an instruction on this
    # Python, or elision would silently never happen.
    for name in ("add", "sub", "mul", "truediv", "pow"):
        assert _elision._operator_instructions(name), name
