"""Temporary elision is on by default and refuses callers that are not a Python operator.

A DArray that C code keeps in a local shows the reference count of a
temporary. From Python that caller is simulated by calling the operator
method directly (``make().__add__(z)``, ``operator.add(make(), z)``): the
count is the same, but the calling frame is not executing the operator
instruction, so the block must not be reused. C code reached from a Python
operator (a ``__radd__`` written in C) is simulated with ``ctypes`` calling
``PyNumber_Add``: the frame is executing the operator, but C frames that are
not the interpreter's lie between (``dmesh._callers``). A real temporary in
``x * y + z`` still is reused.
"""

from __future__ import annotations

import ctypes
import functools
import operator
import sys
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import _callers, _elision, context
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from helpers import assert_all, assert_equal_all

WORLD = MPI.COMM_WORLD.Get_size()
BIG = _elision.ELIDE_BYTES // 8 * WORLD * 2  # float64 blocks above the elision size
CAN_ELIDE = _elision.temporary_refs > 0


def operands(mesh: dmesh.DeviceMesh) -> tuple[dmesh.DArray, dmesh.DArray, dmesh.DArray]:
    return tuple(dmesh.full((BIG,), v, mesh=mesh) for v in (2.0, 3.0, 1.0))  # type: ignore[return-value]


def test_on_by_default(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, donations: list[int]) -> None:
    # The test run does not set DMESH_ELIDE: temporaries are offered.
    assert_all(comm, context.elide_state[0], "elision is off without DMESH_ELIDE")
    x, y, z = operands(mesh)
    for _ in range(2):
        result = x * y + z
    expected = [0, 0] if CAN_ELIDE else []
    assert_all(comm, donations == expected, f"donors {donations}")
    assert_equal_all(comm, result.local, np.full(result.local.shape, 7.0))


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
        # The simulation is faithful: without the frame and C-stack checks
        # the count alone would have taken the block (the hole they close).
        monkeypatch.setattr(_elision, "_called_by_operator", lambda _: True)
        monkeypatch.setattr(_callers, "called_by_instruction", lambda name, reflected: True)
        before = len(donations)
        _ = held().__add__(z)
        assert_all(comm, len(donations) == before + 1, "the count did not look like a temporary")


_number_add = ctypes.pythonapi.PyNumber_Add
_number_add.argtypes = [ctypes.py_object, ctypes.py_object]
_number_add.restype = ctypes.py_object


class CReflected:
    """An operand whose ``__radd__`` is C code computing ``held + other`` (as Cython would)."""

    __array_ufunc__ = None  # NumPy and DArray defer to __radd__

    def __init__(self, held: dmesh.DArray) -> None:
        # Not a descriptor: the interpreter calls it with the other operand only.
        type(self).__radd__ = functools.partial(_number_add, held)  # type: ignore[attr-defined]


def test_c_code_reached_from_an_operator_keeps_the_block(
    comm: MPI.Intracomm,
    mesh: dmesh.DeviceMesh,
    donations: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not CAN_ELIDE:
        pytest.skip("this interpreter cannot tell temporaries apart")
    x, y, _ = operands(mesh)
    t = x * y
    _ = t + 1.0  # decided and cached, so a donation would be taken
    held = CReflected(t)
    # The other guards pass as they would for a DArray that C code holds in a
    # local: the count of a temporary, a Python frame executing BINARY_OP add.
    monkeypatch.setattr(_elision, "temporary_refs", 1 << 20)
    block = weakref.ref(t.local)  # no reference: the block stays t's alone
    result = 1.0 + held  # the frame runs `+`; C code then computes t + 1.0
    assert_all(comm, donations == [], f"donors {donations}")
    assert_all(comm, result.local is not block(), "the held operand's block was reused")
    assert_equal_all(comm, t.local, np.full(t.local.shape, 6.0))
    assert_equal_all(comm, result.local, np.full(result.local.shape, 7.0))
    # Without the C-stack check the block would have been taken.
    monkeypatch.setattr(_callers, "called_by_instruction", lambda name, reflected: True)
    _ = 1.0 + held
    assert_all(comm, donations == [0], f"donors without the stack check {donations}")


def test_zero_d_array_operands_decide_the_dtype_each_call(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    # A 0-d ndarray's dtype is not in the step's key: a float32 temporary may
    # hold t + float32(1) but not t + float64(1), whose result is float64.
    x = dmesh.full((BIG,), 2.0, dtype=np.float32, mesh=mesh)
    for other, dtype in [(np.array(1, np.float32), np.float32), (np.array(1.0), np.float64)]:
        result = (x * x) + other
        assert_all(comm, result.dtype == dtype and result.local.dtype == dtype, f"{dtype}")
        assert_equal_all(comm, result.local, np.full(result.local.shape, 5.0, dtype))


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
    for text, value in [("1", True), ("on", True), ("0", False), ("off", False), ("", True)]:
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


def test_stack_check_works_here() -> None:
    # Where NumPy's own check works (Linux, CPython before 3.14), ours must:
    # a silent refusal of every call would turn elision off unnoticed.
    if (
        sys.platform == "linux"
        and sys.implementation.name == "cpython"
        and sys.version_info < (3, 14)
    ):
        assert _callers.available()

    class Operand:
        def __add__(self, other: object) -> bool:
            return _callers.called_by_instruction("add", False)

        def __radd__(self, other: object) -> bool:
            return _callers.called_by_instruction("add", True)

    x = Operand()
    assert (x + 1.0) is _callers.available()
    assert (1.0 + x) is _callers.available()
    assert x.__add__(1.0) is False  # a call instruction, not `+`
    assert _number_add(x, 1.0) is False  # C code between


def test_sum_reuses_its_own_running_total(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, donations: list[int]
) -> None:
    # The builtin sum holds its running total alone and drops each item once
    # added: their blocks may hold the next sum (NumPy elides there too). Named
    # arrays, in a list or as the start, are never written.
    x, y, z = operands(mesh)
    named = [x, y, z]
    for _ in range(2):  # decided, then from the cache
        donations.clear()
        from_list = sum(named)
        from_generator = sum(v * 2.0 for v in named)
        with_start = sum([y, z], x)
    assert_equal_all(comm, from_list.local, np.full(from_list.local.shape, 6.0))
    assert_equal_all(comm, from_generator.local, np.full(from_generator.local.shape, 12.0))
    assert_equal_all(comm, with_start.local, np.full(with_start.local.shape, 6.0))
    for v, value in zip(named, (2.0, 3.0, 1.0)):
        assert_equal_all(comm, v.local, np.full(v.local.shape, value))
    # sum(named): 0 + x (x named), then the total twice; the generator: its first item
    # (0 + x * 2.0, reflected), then the total twice; with a start: x + y (named), the total.
    expected = [0, 0, 1, 0, 0, 0] if CAN_ELIDE else []
    assert_all(comm, donations == expected, f"donors {donations}")


def test_sum_path_is_known_here() -> None:
    if _callers.available():
        assert _callers._sum_paths, "no path from the builtin sum was recorded"

    class Operand:
        def __add__(self, other: object) -> bool:
            return _callers.called_by_sum("add", False)

    x = Operand()
    assert not _callers.called_by_sum("add", False)  # not inside sum
    assert x.__add__(1.0) is False  # a call, not sum
    assert (x + 1.0) is False  # the operator instruction is not sum
