"""The nodes of a trace (``dmesh.ops.compiler.trace``) and how ranks compare them.

A ``Node`` is one recorded op on slots (arguments, constants, results); its
description is what the ranks compare before a plan runs, so it names specs and
keys without object addresses or mesh identities.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmesh.core.layout import Layout
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.pipeline import Step

__all__ = ["Node", "copy_block", "describe", "kind_of", "same_block", "stable", "walk"]


@dataclass(frozen=True)
class Node:
    """One recorded op: ``out = func(*operands)`` with the recorded step's layouts."""

    func: Any
    label: str
    step: Step | None  # None: ``func(block)`` of a dmesh call that keeps the layout
    slots: tuple[int, ...]  # where each operand comes from (arguments, constants, nodes)
    moves: tuple[Layout | None, ...]  # each operand's target layout where it moves, else None
    out: int  # the slot of the result
    spec: DArraySpec  # the result's spec
    description: str  # what the ranks compare (no mesh identity, no addresses)
    writes: bool = False  # writes its first operand's block in place (out: that slot)


def describe(spec: DArraySpec) -> str:
    """A spec as ranks compare it: placements, shape, dtype and block bounds (no mesh id)."""
    return f"{spec!r} bounds={spec.layout.bounds}"


def copy_block(block: Any) -> Any:
    """A copy node's function: a new block of the operand's values (``a.copy()``)."""
    return block.copy()


def same_block(block: Any) -> Any:
    """A redistribution node's function: its operand, already moved, is the result."""
    return block


def stable(value: Any) -> str:
    """``repr(value)`` without object addresses (they differ between ranks)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def walk(obj: Any) -> list[Any]:
    """The DArrays in ``obj`` (inside tuples, lists and dict values)."""
    if isinstance(obj, DArray):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [x for o in obj for x in walk(o)]
    if isinstance(obj, dict):
        return [x for o in obj.values() for x in walk(o)]
    return []


def kind_of(x: Any) -> str:
    """The dtype kind of an operand (a DArray's, a Python scalar's, an array's)."""
    if isinstance(x, DArray):
        return str(x.dtype.kind)
    if isinstance(x, bool):
        return "b"
    if isinstance(x, int):
        return "i"
    return str(np.asarray(x).dtype.kind)
