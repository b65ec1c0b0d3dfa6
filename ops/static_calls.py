"""Repeated calls with static positional arguments: ``np.sum(a, 0)``, ``np.mean(a, 1)``.

A second index into the step cache (:mod:`dmesh.ops.pipeline`), for calls
whose positional arguments are not all operands. The cache's own key takes
every positional argument as an operand (a DArray by its spec, a scalar by its
type), which fits ufuncs and calls whose every positional argument is a
DArray. A positional ``axis`` is no operand: its value decides the result, so
such a call was parsed again each time (``inspect``'s bind, some 10 us). Here
a call seen before is found by its argument key
(:func:`dmesh._call_keys.argument_key`: its DArrays' specs and the *values* of
its other arguments and keywords), which maps to the step its parse chose and
to where the parsed operands sit among the arguments.

A key is remembered only after the dispatcher parsed that very call (its
rule's ``parse`` is a function of the specs and those values alone) and only
when each parsed operand is one of the arguments, so a hit hands the step the
operands its parse would have picked.
"""

from __future__ import annotations

from typing import Any

from dmesh.ops.pipeline import Step

__all__ = ["lookup", "remember"]

# (callable, *argument keys, *keyword keys) -> (step, positions of the operands in args)
_calls: dict[tuple[Any, ...], tuple[Step, tuple[int, ...]]] = {}
_LIMIT = 1024


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
