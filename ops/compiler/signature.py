"""The signature of a compiled call: DArray specs and constants, and the DArrays in the arguments.

Two calls with equal signatures trace the same plan: every DArray argument
enters by its spec (mesh identity, layout with block bounds, dtype), every
other argument by value (NumPy arrays by shape, dtype and bytes). DArrays
inside tuples, lists and dicts count as arguments too.
"""

from __future__ import annotations

import dis
import math
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh.darray import DArray

__all__ = ["FreeValues", "Unkeyable", "key_of", "rebuild", "signature"]


class Unkeyable(Exception):  # noqa: N818 - internal signal
    """An argument that is neither a DArray, a container of them, nor a hashable constant."""


def signature(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], list[DArray]]:
    """The cache key of ``(args, kwargs)`` and the DArrays found in them, in order.

    Raises :class:`Unkeyable` for an argument that cannot key a cache.
    """
    leaves: list[DArray] = []

    def leaf(x: DArray) -> Any:
        leaves.append(x)
        return ("D", x.spec)

    parts: list[Any] = []
    for x in args:  # key_of(args, leaf), without its recursion for the usual arguments
        kind = type(x)
        if kind is DArray:
            leaves.append(x)
            parts.append(("D", x.spec))
        elif kind is int or kind is bool or kind is str or x is None:
            parts.append((kind, x))
        else:
            parts.append(key_of(x, leaf))
    key = (tuple(parts), key_of(kwargs, leaf) if kwargs else ())
    return key, leaves


def key_of(obj: Any, leaf: Callable[[DArray], Any]) -> Any:
    """A hashable key of ``obj``: each DArray ``x`` keyed as ``leaf(x)``, containers by
    their items, NumPy arrays by shape, dtype and bytes, other values by type and value
    (floats by their bits: ``0.0 == -0.0`` and ``nan != nan``, yet results differ)."""
    if isinstance(obj, DArray):
        return leaf(obj)
    kind = type(obj)
    if kind is tuple or kind is list:
        return (kind, tuple(key_of(x, leaf) for x in obj))
    if kind is dict:
        return (dict, tuple((k, key_of(v, leaf)) for k, v in obj.items()))
    if kind is slice:  # unhashable before Python 3.12
        return (slice, key_of((obj.start, obj.stop, obj.step), leaf))
    if kind is float:  # equal floats have equal bits, but for the sign of zero
        return (float, obj, math.copysign(1.0, obj))
    if kind is complex:
        return (complex, obj, math.copysign(1.0, obj.real), math.copysign(1.0, obj.imag))
    if isinstance(obj, (np.ndarray, np.generic)):
        if obj.dtype.hasobject:
            raise Unkeyable(f"an object array of shape {obj.shape}")
        return ("A", kind, obj.shape, obj.dtype.str, obj.tobytes())
    try:
        hash(obj)
    except TypeError:
        raise Unkeyable(f"a {kind.__name__}, which is not hashable") from None
    return (kind, obj)  # the type keeps 1, 1.0 and True apart


def rebuild(obj: Any, leaf: Callable[[DArray], Any]) -> Any:
    """``obj`` with each DArray ``x`` (inside tuples, lists, dicts) replaced by ``leaf(x)``."""
    if isinstance(obj, DArray):
        return leaf(obj)
    kind = type(obj)
    if kind is tuple:
        return tuple(rebuild(x, leaf) for x in obj)
    if kind is list:
        return [rebuild(x, leaf) for x in obj]
    if kind is dict:
        return {k: rebuild(v, leaf) for k, v in obj.items()}
    return obj


# Values a function reads from outside its arguments that a trace bakes into the plan
# as constants: checked at every call (an ndarray only up to this many elements).
FREE_ARRAY_LIMIT = 4096
_FREE_TYPES = (int, float, complex, bool, str, bytes, type(None), np.generic, tuple, np.ndarray)


class FreeValues:
    """The constants ``fn`` reads from outside its arguments, as part of the cache key.

    A trace bakes every value an op uses into the plan, including those ``fn``
    reads from its closure cells, from module globals by name, and from
    ``self``'s attributes by name (a method); this key holds their current
    values, so a changed one retraces instead of replaying a stale plan.
    Values read further away (inside other functions ``fn`` calls, items of
    containers, arrays above ``FREE_ARRAY_LIMIT`` elements) are not checked.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        func = getattr(fn, "__func__", fn)  # a bound method's function
        code = getattr(func, "__code__", None)
        self.names: tuple[str, ...] = code.co_names if code is not None else ()
        self.globals: dict[str, Any] = getattr(func, "__globals__", {})
        # The names the code loads as globals, but those bound to modules, functions and
        # classes now (``np``, helpers); names not bound yet may become constants later.
        loaded = {
            i.argval
            for i in (dis.get_instructions(code) if code is not None else ())
            if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")
        }
        self.global_names = tuple(
            n
            for n in self.names
            if n in loaded and (n not in self.globals or not _static(self.globals[n]))
        )
        free = code.co_freevars if code is not None else ()
        self.cells = tuple(zip(free, getattr(func, "__closure__", None) or ()))

    def key(self, instance: Any) -> Any:
        """The current values (``instance``: the method's ``self``, or None)."""
        if instance is None and not self.cells and not self.global_names:
            return ()  # nothing read from outside (the usual function)
        found: list[Any] = []
        for name, cell in self.cells:
            try:
                found.append((name, _free(cell.cell_contents)))
            except ValueError:  # an empty cell
                continue
        # self's attributes: its own, then its class's (no getattr: a property would run).
        scopes = [] if instance is None else [getattr(instance, "__dict__", {})]
        scopes += [] if instance is None else [vars(k) for k in type(instance).__mro__]
        globals_ = self.globals
        found += [(n, _free(globals_[n])) for n in self.global_names if n in globals_]
        for name in self.names if scopes else ():
            scope = next((d for d in scopes if name in d), None)
            if scope is not None:
                found.append(("self." + name, _free(scope[name])))
        return tuple(x for x in found if x[1] is not None)


def _static(value: Any) -> bool:
    """A module, function or class: what a global name of code is bound to for good."""
    return isinstance(
        value, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)
    )


def _free(value: Any) -> Any:
    """A free value's key: its value when a trace may have baked it (a constant), else
    None (modules, functions, objects: not checked)."""
    if isinstance(value, _FREE_TYPES) and not (
        isinstance(value, np.ndarray) and value.size > FREE_ARRAY_LIMIT
    ):
        try:
            return key_of(value, lambda x: ("D", x.spec))
        except Unkeyable:
            return None
    return None
