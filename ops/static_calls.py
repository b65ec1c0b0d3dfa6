"""Repeated calls with static positional arguments: ``np.sum(a, 0)``, ``np.mean(a, 1)``.

The step cache keys a call by its operands (a DArray by its spec, a scalar
operand by its type), which fits ufuncs and calls whose every positional
argument is a DArray. A positional ``axis`` is no operand: its value decides
the result, so such a call was parsed again each time (``inspect``'s bind,
some 10 us). Here a call seen before is keyed by its DArrays' specs and the
*values* of its other positional arguments and keywords (ints, bools,
``None``, strings and tuples of ints, with their types, as
:func:`dmesh.ops.pipeline.cache_key` keys keywords), and maps to the step its
parse chose and to where the parsed operands sit among the arguments.

A key is remembered only after the dispatcher parsed that very call (its
rule's ``parse`` is a function of the specs and those values alone) and only
when each parsed operand is one of the arguments, so a hit hands the step the
operands its parse would have picked.
"""

from __future__ import annotations

from typing import Any

from dmesh.darray import DArray
from dmesh.ops.pipeline import Step

__all__ = ["lookup", "remember", "static_key"]

# (callable, *argument keys, *keyword keys) -> (step, positions of the operands in args)
_calls: dict[tuple[Any, ...], tuple[Step, tuple[int, ...]]] = {}
_LIMIT = 1024
_VALUES = (bool, int, str)


def static_key(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The key of ``func(*args, **kwargs)`` with its non-DArray arguments by value, or None
    when an argument or keyword is of another kind (a float, an array, a list)."""
    keywords: list[Any] = []
    for name, value in kwargs.items():  # first: out= (a DArray) fails here at once
        kind = type(value)
        if kind is tuple:
            if not all(type(v) is int for v in value):
                return None
        elif value is not None and kind not in _VALUES:
            return None
        keywords.append((name, value, kind))
    key: list[Any] = [func]
    for x in args:
        kind = type(x)
        if kind is DArray:
            key.append(x._spec)
        elif x is None or kind in _VALUES or (kind is tuple and all(type(v) is int for v in x)):
            key.append((x, kind))
        else:
            return None
    return (*key, *keywords)


def lookup(key: tuple[Any, ...]) -> tuple[Step, tuple[int, ...]] | None:
    """The step and operand positions remembered for ``key``, or None."""
    return _calls.get(key)


def remember(key: tuple[Any, ...], step: Step, parsed: Any, args: tuple[Any, ...]) -> None:
    """Keep ``step`` for ``key`` when every parsed operand is one of ``args`` (by identity;
    a parse that made new objects, a list's items, is not remembered)."""
    positions = []
    for x in parsed:
        found = next((i for i, y in enumerate(args) if y is x), None)
        if found is None:
            return
        positions.append(found)
    if len(_calls) >= _LIMIT:  # bounded: keys hold specs, and through them meshes
        _calls.clear()
    _calls[key] = (step, tuple(positions))
