"""DArray's operators, handed straight to the dispatcher where NumPy could pick nothing else.

NumPy's ``NDArrayOperatorsMixin`` makes ``a < b`` the ufunc call
``np.less(a, b)``, whose override protocol then finds
``DArray.__array_ufunc__``: about a microsecond of checks, most of a cached
op on a 0-d array (``np.sqrt(rs) < tol`` in a solver loop). Where the other
operand is a DArray of the same type or a Python scalar, the protocol can
choose no other override, so these methods call the dispatcher's operator
hook directly (``dmesh._hooks.dispatch_operator``: ``ufunc(*inputs)``, what
``__array_ufunc__`` reaches for a plain call). Any other operand, or the op
layer not loaded, takes the mixin's method. ``+ - * / **`` may also reuse a
temporary operand's block and have their own methods (``dmesh._elision``);
the in-place forms (``a += b``) call the ufunc hook with ``out=(a,)``, as
NumPy's protocol would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from dmesh import _hooks
from dmesh._elision import fused_call
from dmesh.core.scalars import KEY_SCALARS, power_ufunc

__all__ = ["Operators"]

_Mixin = NDArrayOperatorsMixin


def _no_other_override(self: Any, other: Any) -> bool:
    """Whether NumPy's protocol could pick no override but ``self``'s for ``self op other``:
    ``other`` is of ``self``'s type or a Python or NumPy scalar."""
    return type(other) is type(self) or type(other) in KEY_SCALARS


def _binary(ufunc: np.ufunc, plain: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``self op other``: ``ufunc(self, other)``."""

    def method(self: Any, other: Any) -> Any:
        result = fused_call(ufunc, self, other)  # (a cached call: its fused closure)
        if result is not None:
            return result
        dispatch = _hooks.dispatch_operator
        if dispatch is not None and _no_other_override(self, other):
            return dispatch(ufunc, (self, other))
        return plain(self, other)

    method.__name__, method.__doc__ = plain.__name__, plain.__doc__
    return method


def _reflected(ufunc: np.ufunc, plain: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``other op self`` (Python tried ``other``'s method first): ``ufunc(other, self)``."""

    def method(self: Any, other: Any) -> Any:
        dispatch = _hooks.dispatch_operator
        if dispatch is not None and type(other) in KEY_SCALARS:
            return dispatch(ufunc, (other, self))
        return plain(self, other)

    method.__name__, method.__doc__ = plain.__name__, plain.__doc__
    return method


def _in_place(ufunc: np.ufunc, plain: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``self op= other``: ``ufunc(self, other, out=(self,))``, the ufunc hook's ``out=`` form
    (``x **= 2``: ``np.square(x, out=(x,))``, as NumPy's fast power)."""
    power = ufunc is np.power

    def method(self: Any, other: Any) -> Any:
        dispatch = _hooks.dispatch_ufunc
        if dispatch is not None and _no_other_override(self, other):
            fast = _hooks.in_place_view
            if fast is not None and self._view is not None and not power:
                done = fast(ufunc, self, other)  # row += 1 on a view a[4]: on its blocks
                if done is not None:
                    return done
            u = power_ufunc(self.dtype, other) if power else ufunc
            inputs = (self, other) if u is ufunc else (self,)
            return dispatch(u, "__call__", inputs, {"out": (self,)})
        return plain(self, other)

    method.__name__, method.__doc__ = plain.__name__, plain.__doc__
    return method


def _unary(ufunc: np.ufunc, plain: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``op self``: ``ufunc(self)``."""

    def method(self: Any) -> Any:
        dispatch = _hooks.dispatch_operator
        return plain(self) if dispatch is None else dispatch(ufunc, (self,))

    method.__name__, method.__doc__ = plain.__name__, plain.__doc__
    return method


class Operators(NDArrayOperatorsMixin):
    """NumPy's operator mixin with the direct calls above (a mixin of :class:`~dmesh.DArray`)."""

    __slots__ = ()

    __lt__ = _binary(np.less, _Mixin.__lt__)
    __le__ = _binary(np.less_equal, _Mixin.__le__)
    __eq__ = _binary(np.equal, _Mixin.__eq__)
    __ne__ = _binary(np.not_equal, _Mixin.__ne__)
    __gt__ = _binary(np.greater, _Mixin.__gt__)
    __ge__ = _binary(np.greater_equal, _Mixin.__ge__)
    __hash__ = None  # type: ignore[assignment]  # (as ndarray: equality is elementwise)
    __matmul__ = _binary(np.matmul, _Mixin.__matmul__)
    __rmatmul__ = _reflected(np.matmul, _Mixin.__rmatmul__)
    __floordiv__ = _binary(np.floor_divide, _Mixin.__floordiv__)
    __rfloordiv__ = _reflected(np.floor_divide, _Mixin.__rfloordiv__)
    __mod__ = _binary(np.remainder, _Mixin.__mod__)
    __rmod__ = _reflected(np.remainder, _Mixin.__rmod__)
    __rpow__ = _reflected(np.power, _Mixin.__rpow__)
    __lshift__ = _binary(np.left_shift, _Mixin.__lshift__)
    __rlshift__ = _reflected(np.left_shift, _Mixin.__rlshift__)
    __rshift__ = _binary(np.right_shift, _Mixin.__rshift__)
    __rrshift__ = _reflected(np.right_shift, _Mixin.__rrshift__)
    __and__ = _binary(np.bitwise_and, _Mixin.__and__)
    __rand__ = _reflected(np.bitwise_and, _Mixin.__rand__)
    __xor__ = _binary(np.bitwise_xor, _Mixin.__xor__)
    __rxor__ = _reflected(np.bitwise_xor, _Mixin.__rxor__)
    __or__ = _binary(np.bitwise_or, _Mixin.__or__)
    __ror__ = _reflected(np.bitwise_or, _Mixin.__ror__)
    __neg__ = _unary(np.negative, _Mixin.__neg__)
    __pos__ = _unary(np.positive, _Mixin.__pos__)
    __abs__ = _unary(np.absolute, _Mixin.__abs__)
    __invert__ = _unary(np.invert, _Mixin.__invert__)
    __iadd__ = _in_place(np.add, _Mixin.__iadd__)
    __isub__ = _in_place(np.subtract, _Mixin.__isub__)
    __imul__ = _in_place(np.multiply, _Mixin.__imul__)
    __itruediv__ = _in_place(np.true_divide, _Mixin.__itruediv__)
    __ifloordiv__ = _in_place(np.floor_divide, _Mixin.__ifloordiv__)
    __imod__ = _in_place(np.remainder, _Mixin.__imod__)
    __ipow__ = _in_place(np.power, _Mixin.__ipow__)
    __iand__ = _in_place(np.bitwise_and, _Mixin.__iand__)
    __ior__ = _in_place(np.bitwise_or, _Mixin.__ior__)
    __ixor__ = _in_place(np.bitwise_xor, _Mixin.__ixor__)
    __ilshift__ = _in_place(np.left_shift, _Mixin.__ilshift__)
    __irshift__ = _in_place(np.right_shift, _Mixin.__irshift__)
