"""The op registry: one declaration per op or family of ops.

A rule maps NumPy callables to a *strategy function*: from the global shapes of
the DArray operands (and a description of the call) to the rows that are
acceptable on **one** mesh dimension, ``(output, *inputs)`` placements. The
framework (``ops.propagation``) expands rows over all mesh dims, prices each
combination and picks the cheapest (DTensor's single-mesh-dim strategies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from collectives.errors import ArgumentError
from dmesh.placement import Placement

__all__ = ["Call", "Row", "Rule", "register", "rule_for"]

Row = tuple[Placement, ...]  # (output, *inputs) on one mesh dimension


@dataclass(frozen=True)
class Call:
    """What a rule sees of a call: the operand shapes and its static arguments.

    ``shapes`` holds one entry per array operand, in order; Python scalars and
    0-d arrays have shape ``()`` and ``darray[i]`` False (they are replicated
    values, e.g. the 1 of ``a + 1``). ``static`` is a hashable summary of the
    keyword arguments that matter. Rules give a placement for every operand;
    a non-DArray operand's is always ``Replicate()``.
    """

    shapes: tuple[tuple[int, ...], ...]
    darray: tuple[bool, ...]
    static: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Rule:
    """A registered op family: its name and its strategy function."""

    name: str
    rows: Callable[[Call], Sequence[Row]]
    out_shape: Callable[[Call], tuple[int, ...]]


_rules: dict[Any, Rule] = {}


def register(
    *funcs: Any, name: str, out_shape: Callable[[Call], tuple[int, ...]]
) -> Callable[[Callable[[Call], Sequence[Row]]], Callable[[Call], Sequence[Row]]]:
    """Register ``rows`` as the strategy of every callable in ``funcs``; twice is an error."""

    def decorate(rows: Callable[[Call], Sequence[Row]]) -> Callable[[Call], Sequence[Row]]:
        rule = Rule(name, rows, out_shape)
        for func in funcs:
            if func in _rules:
                raise ArgumentError(
                    f"register: {getattr(func, '__name__', func)!r} already has the rule "
                    f"{_rules[func].name!r}; a callable gets one rule"
                )
            _rules[func] = rule
        return rows

    return decorate


def rule_for(func: Any) -> Rule | None:
    """The rule registered for ``func``, or None."""
    return _rules.get(func)


def registered() -> dict[Any, Rule]:
    """Every registered callable and its rule (for the consistency tests)."""
    return dict(_rules)
