"""Temporary elision for DArray arithmetic: ``a * b + c`` may reuse the block of ``a * b``.

NumPy writes ``t + c`` into ``t`` when ``t`` is a temporary of the expression
(only the interpreter's stack refers to it), which saves a large allocation
and its page faults. DArray operators hold the block behind a Python object,
so NumPy cannot see that; these operator methods can look at the DArray's
reference count instead and pass the block as the result's buffer.

**On by default**; ``DMESH_ELIDE=0`` or
``dmesh.context.set_temporary_elision(False)`` turns it off. A reference count
cannot tell a temporary from a DArray that C code holds in a local (Cython or
mypyc code that computes ``t + c`` and reads ``t`` afterwards): both show the
same count, and reusing the block would overwrite ``t``. So a block is reused
only when, besides the count:

* the nearest Python frame is executing the operator instruction itself
  (``BINARY_OP`` with this operator's argument; ``BINARY_ADD`` and friends
  before 3.11), read through ``sys._getframe`` and its ``f_lasti``. This
  rejects ``t.__add__(c)``, ``operator.add(t, c)``, ``sum(...)``, and C code
  called from Python by a call instruction;
* the C frames between this method and that Python frame are the
  interpreter's own path from the instruction to a Python operator method
  (``dmesh._callers``, NumPy's own check: it walks the C stack with
  ``backtrace``). This rejects C code that a Python operator reached first (a
  Cython type's ``__radd__``, run by ``x + cython_obj``, computing ``t + c``
  on a DArray it holds): its frames lie between.

It stays off, whatever the setting, where counts or stacks cannot be trusted:
on interpreters other than CPython, from CPython 3.14 (borrowed stack
references make counts smaller and context-dependent), on free-threaded
builds (``Py_GIL_DISABLED``: another thread may take a reference between the
check and the write), and where ``dmesh._callers`` cannot read the C stack
(no ``backtrace``/``dladdr``, as on Windows). Measured on ``y = a*b + c``
against NumPy on the local blocks (2-core machine, same process, 1 rank):
2 MiB blocks off 1.36x, on 1.12x; 16 MiB off 1.37x, on 1.02x. The C-stack
check costs some 3-4 us, so blocks under 1 MiB (where the allocator reuses
freed memory without page faults) are not offered.
"""

from __future__ import annotations

import dis
import platform
import sys
import sysconfig
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh import _call_keys, _callers, _hooks, context
from dmesh._call_keys import binary_key, operand_key
from dmesh.core.scalars import KEY_SCALARS, power_ufunc

__all__ = [
    "ELIDE_BYTES", "active", "binary_method", "fused_call", "reflected_method", "supported",
    "temporary_refs",
]  # fmt: skip


# NumPy elides temporaries from 256 KiB (NPY_MIN_ELIDE_BYTES), where its C
# check costs well under a microsecond. Ours (the C stack read through ctypes,
# dmesh._callers) costs 3-4 us: measured on a*b + c, it pays from 1 MiB.
ELIDE_BYTES = 1 << 20


def _free_threaded() -> bool:
    """Whether this is a free-threaded build (no GIL), where counts can change under us."""
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return True
    gil_enabled = getattr(sys, "_is_gil_enabled", None)
    return gil_enabled is not None and not gil_enabled()


def supported() -> bool:
    """Whether this interpreter can elide at all (CPython before 3.14, with a GIL)."""
    return (
        platform.python_implementation() == "CPython"
        and sys.version_info < (3, 14)
        and not _free_threaded()
        and _callers.available()
    )


class _Probe:
    __slots__ = ("refs",)

    def __init__(self) -> None:
        self.refs = (0, 0)

    def __add__(self, other: Any) -> _Probe:
        result = _Probe()
        result.refs = (sys.getrefcount(self), sys.getrefcount(other))
        return result


def _threshold() -> int:
    """The most references a temporary operand shows inside an operator method, or 0.

    0 (elision impossible) where a temporary and a named local operand cannot
    be told apart, and where :func:`supported` is false.
    """
    if not supported():
        return 0
    x, y = _Probe(), _Probe()
    named = (x + y).refs  # both operands named locals
    left = ((x + y) + y).refs[0]  # a temporary on the left
    right = (y + (x + y)).refs[1]  # and on the right
    most = max(left, right)
    return most if most < min(named) else 0


# A left operand seen with at most this many references is a temporary; 0
# means this interpreter cannot elide.
temporary_refs = _threshold()


def active() -> bool:
    """Whether DArray arithmetic elides now: the setting is on and the interpreter can."""
    return context.elide_state[0] and temporary_refs > 0


def _operator_instructions(name: str) -> frozenset[tuple[int, int]]:
    """(opcode, argument) pairs of the bytecode instruction that runs operator ``name``.

    ``name`` is ``add``, ``sub``, ``mul``, ``truediv`` or ``pow``; the
    reflected method runs under the same instruction. An argument of -1
    stands for any (before 3.11 the opcode alone names the operator).
    """
    symbol = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "pow": "**"}[name]
    nb_ops = getattr(dis, "_nb_ops", None)
    if "BINARY_OP" in dis.opmap and nb_ops is not None:  # 3.11 and later
        arg = next(i for i, (_, sign) in enumerate(nb_ops) if sign == symbol)
        return frozenset({(dis.opmap["BINARY_OP"], arg)})
    old = {"add": "BINARY_ADD", "sub": "BINARY_SUBTRACT", "mul": "BINARY_MULTIPLY",
           "truediv": "BINARY_TRUE_DIVIDE", "pow": "BINARY_POWER"}[name]  # fmt: skip
    return frozenset({(dis.opmap[old], -1)}) if old in dis.opmap else frozenset()


def _called_by_operator(instructions: frozenset[tuple[int, int]]) -> bool:
    """Whether the Python frame two levels up is executing one of ``instructions``.

    Two levels: the operator method's caller, seen from a helper it calls.
    ``f_lasti`` is the byte offset of the instruction being executed, whose
    argument is the next byte.
    """
    frame = sys._getframe(2)
    code = frame.f_code.co_code
    at = frame.f_lasti
    if not 0 <= at < len(code) - 1:
        return False
    op, arg = code[at], code[at + 1]
    return (op, arg) in instructions or (op, -1) in instructions


def _donor_ok(x: Any) -> bool:
    """Whether the temporary DArray ``x``'s block may become the result buffer."""
    if type(x) is not _call_keys.darray_type or x._local.nbytes < ELIDE_BYTES:
        # A subclass may compute or refuse its block (dmesh.compile's stand-ins:
        # reading theirs breaks the graph); a small block is not worth the check.
        return False
    # The DArray's slot and getrefcount's argument; anything more is another
    # holder (a second DArray on the same block, user code).
    if sys.getrefcount(x._local) != _BLOCK_REFS:
        return False
    block = x._local
    return (
        type(block) is np.ndarray
        and block.nbytes >= ELIDE_BYTES
        and block.base is None  # not a view of another array
        and block.flags.writeable
    )


class _Holder:
    __slots__ = ("_local",)

    def __init__(self, block: Any) -> None:
        self._local = block


def _block_refs() -> int:
    """References ``_donor_ok`` sees for a block that only its DArray holds."""
    holder = _Holder(np.empty(0))
    return sys.getrefcount(holder._local)


_BLOCK_REFS = _block_refs()


def fused_call(ufunc: np.ufunc, x: Any, y: Any) -> Any:
    """``ufunc(x, y)`` by the fused closure of a cached plain call that moves nothing
    (``Step.fast``), or None where there is none or it must not serve now.

    This is the dispatcher's own hot path (``dmesh.ops.dispatch.call_ufunc``),
    one Python call shorter, for DArray's operators: keyed the same way (a
    DArray by its spec, a scalar by its type; a stand-in or any other type
    finds no step), and unused while ``dmesh.compile`` records (it records
    through the hooks) or a debug tool watches (``_hooks.operator_steps`` is
    None then). Not for ``np.power``, whose integer check the dispatcher makes.
    """
    steps = _hooks.operator_steps
    if steps is None or _hooks.recorder is not None:
        return None
    step = steps.get(binary_key(ufunc, x, y))
    if step is None or step.fast is None:
        return None
    return step.fast(ufunc, x, y)


def binary_method(ufunc: np.ufunc, plain: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``__op__`` that may reuse a temporary operand's block as the output, else ``plain``."""
    name = plain.__name__.strip("_")
    instructions = _operator_instructions(name)
    direct = ufunc is not np.power  # (the dispatcher checks integer powers first)
    power = not direct
    # (bound once: each module attribute read costs a few tens of ns on the hottest path)
    elide, getrefcount = context.elide_state, sys.getrefcount

    def method(self: Any, other: Any) -> Any:
        # x ** 2 is np.square(x) to NumPy (bit for bit different from np.power for complex x)
        u = power_ufunc(self.dtype, other) if power else ufunc
        unary = u is not ufunc
        if elide[0] and temporary_refs:
            if (
                getrefcount(self) <= temporary_refs
                and _donor_ok(self)
                and (  # (inline: the checks count frames from here)
                    _callers.called_by_instruction(name, False)
                    if _called_by_operator(instructions)
                    else _callers.called_by_sum(name, False)
                )
            ):
                inputs = (self,) if unary else (self, other)
                return _hooks.dispatch_donated(u, inputs, 0)  # type: ignore[misc]
            if (
                not unary
                and type(other) is type(self)
                and getrefcount(other) <= temporary_refs
                and _donor_ok(other)
                and (  # (inline: the checks count frames from here)
                    _callers.called_by_instruction(name, False)
                    if _called_by_operator(instructions)
                    else _callers.called_by_sum(name, False)
                )
            ):
                return _hooks.dispatch_donated(ufunc, (self, other), 1)  # type: ignore[misc]
        if unary:
            return _hooks.dispatch_operator(u, (self,))  # type: ignore[misc]
        steps = _hooks.operator_steps
        if direct and steps is not None and _hooks.recorder is None:
            # fused_call inline (the hottest call of array programs: a * b, a * 2.0)
            # (binary_key inline: a DArray's key is its spec, a scalar's its type)
            darray, kind = _call_keys.darray_type, type(other)
            if type(self) is darray:
                step = steps.get((
                    ufunc,
                    self._spec,
                    other._spec
                    if kind is darray
                    else kind
                    if kind in KEY_SCALARS
                    else operand_key(other),
                ))  # fmt: skip
                if step is not None and step.fast is not None:
                    return step.fast(ufunc, self, other)
        if type(other) is type(self) or type(other) in KEY_SCALARS or type(other) is np.ndarray:
            # Straight to the dispatcher: NumPy's override protocol would pick
            # DArray.__array_ufunc__ anyway (an ndarray defers to it), after a
            # microsecond of checks.
            return _hooks.dispatch_operator(ufunc, (self, other))  # type: ignore[misc]
        return plain(self, other)

    method.__name__ = plain.__name__
    method.__doc__ = plain.__doc__
    return method


def reflected_method(
    ufunc: np.ufunc, plain: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], Any]:
    """``__rop__`` (``other op self``) that may reuse ``self``'s block when it is a temporary."""
    name = plain.__name__.strip("_")[1:]
    instructions = _operator_instructions(name)
    direct = ufunc is not np.power

    def method(self: Any, other: Any) -> Any:
        if (
            context.elide_state[0]
            and temporary_refs
            and sys.getrefcount(self) <= temporary_refs
            and _donor_ok(self)
            and (  # (inline: the checks count frames from here)
                _callers.called_by_instruction(name, True)
                if _called_by_operator(instructions)
                else _callers.called_by_sum(name, True)
            )
        ):
            return _hooks.dispatch_donated(ufunc, (other, self), 1)  # type: ignore[misc]
        steps = _hooks.operator_steps
        if direct and steps is not None and _hooks.recorder is None:
            # fused_call inline
            darray, kind = _call_keys.darray_type, type(other)
            if type(self) is darray:
                step = steps.get((
                    ufunc,
                    other._spec
                    if kind is darray
                    else kind
                    if kind in KEY_SCALARS
                    else operand_key(other),
                    self._spec,
                ))  # fmt: skip
                if step is not None and step.fast is not None:
                    return step.fast(ufunc, other, self)
        if type(other) in KEY_SCALARS or type(other) is np.ndarray:
            return _hooks.dispatch_operator(ufunc, (other, self))  # type: ignore[misc]
        return plain(self, other)

    method.__name__ = plain.__name__
    method.__doc__ = plain.__doc__
    return method
