"""Temporary elision for DArray arithmetic: ``a * b + c`` reuses the block of ``a * b``.

NumPy writes ``t + c`` into ``t`` when ``t`` is a temporary of the expression
(only the interpreter's stack refers to it), which saves a large allocation
and its page faults. DArray operators hold the block behind a Python object,
so NumPy cannot see that; these operator methods look at the DArray's
reference count instead and, when both the DArray and its block are held by
nothing else, pass the block as the result's buffer.

How many references a temporary shows inside an operator method depends on
the interpreter, so it is measured once at import on a probe class with the
same method shape. Elision is on only where a temporary and a named operand
count differently, and only on CPython before 3.14 (whose borrowed stack
references make counts smaller and context-dependent).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh import _hooks

__all__ = ["ELIDE_BYTES", "binary_method", "reflected_method", "temporary_refs"]

_SCALARS = (int, float, complex, bool)

# NumPy elides temporaries from 256 KiB (NPY_MIN_ELIDE_BYTES); below that the
# allocation is cheaper than the checks.
ELIDE_BYTES = 1 << 18


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

    0 (elision off) where a temporary and a named local operand cannot be told
    apart, on other interpreters than CPython, and from CPython 3.14.
    """
    if platform.python_implementation() != "CPython" or sys.version_info >= (3, 14):
        return 0
    x, y = _Probe(), _Probe()
    named = (x + y).refs  # both operands named locals
    left = ((x + y) + y).refs[0]  # a temporary on the left
    right = (y + (x + y)).refs[1]  # and on the right
    most = max(left, right)
    return most if most < min(named) else 0


# A left operand seen with at most this many references is a temporary; 0
# turns elision off.
temporary_refs = _threshold()


def _donor_ok(x: Any) -> bool:
    """Whether the temporary DArray ``x``'s block may become the result buffer."""
    # 2: the DArray's slot and getrefcount's argument; anything more is
    # another holder (a second DArray on the same block, user code).
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


def binary_method(ufunc: np.ufunc, plain: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``__op__`` that reuses a temporary operand's block as the output, else ``plain``."""

    def method(self: Any, other: Any) -> Any:
        if sys.getrefcount(self) <= temporary_refs and _donor_ok(self):
            return _hooks.dispatch_donated(ufunc, (self, other), 0)  # type: ignore[misc]
        if (
            type(other) is type(self)
            and sys.getrefcount(other) <= temporary_refs
            and _donor_ok(other)
        ):
            return _hooks.dispatch_donated(ufunc, (self, other), 1)  # type: ignore[misc]
        if type(other) is type(self) or type(other) in _SCALARS:
            # Straight to the dispatcher: NumPy's override protocol would pick
            # DArray.__array_ufunc__ anyway, after a microsecond of checks.
            return _hooks.dispatch_ufunc(ufunc, "__call__", (self, other), {})  # type: ignore[misc]
        return plain(self, other)

    method.__name__ = plain.__name__
    method.__doc__ = plain.__doc__
    return method


def reflected_method(
    ufunc: np.ufunc, plain: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], Any]:
    """``__rop__`` (``other op self``) that reuses ``self``'s block when it is a temporary."""

    def method(self: Any, other: Any) -> Any:
        if sys.getrefcount(self) <= temporary_refs and _donor_ok(self):
            return _hooks.dispatch_donated(ufunc, (other, self), 1)  # type: ignore[misc]
        if type(other) in _SCALARS:
            return _hooks.dispatch_ufunc(ufunc, "__call__", (other, self), {})  # type: ignore[misc]
        return plain(self, other)

    method.__name__ = plain.__name__
    method.__doc__ = plain.__doc__
    return method
