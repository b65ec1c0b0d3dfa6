"""The tree of a segmented function's recorded steps (``dmesh.ops.compiler.segments``).

Each ``State`` is a point in recording a segment: the trace up to there,
the steps seen after it (keyed by callable, constants and operand slots),
and the segment's plan once a segment ended there. A step's result is kept
as a template: its structure with a ``Slot`` for each recorded array.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dmesh.darray import DArray
from dmesh.ops.compiler.errors import GraphBreak
from dmesh.ops.compiler.replay import Plan
from dmesh.ops.compiler.signature import rebuild
from dmesh.ops.compiler.trace import StandIn, Trace

__all__ = ["BREAK", "Slot", "State", "rebuild_template", "template_of"]

BREAK = "break"  # a step that cannot be recorded: run eagerly
# Plans one segment keeps for different sets of results still referred to at its run.
VARIANT_LIMIT = 8


class Slot:
    """Where a recorded op's result went: its slot in the segment."""

    __slots__ = ("slot",)

    def __init__(self, slot: int) -> None:
        self.slot = slot


class State:
    """A point in recording a segment: the trace up to there, the steps that follow, and the
    segment's plan once it ran from here."""

    __slots__ = ("inputs", "next", "nodes", "outputs", "plan", "specs", "trace", "variants")

    def __init__(
        self, trace: Trace, inputs: tuple[int, ...], outputs: tuple[int, ...] = ()
    ) -> None:
        self.trace = trace  # shared along a line of states; this one is a prefix of it
        self.specs = len(trace.specs)
        self.nodes = len(trace.nodes)
        self.inputs = inputs  # the slots the segment's inputs fill
        # The results handed to the Python code (a step's inner results are not, and
        # the plan drops those no handed result needs).
        self.outputs = outputs
        self.next: dict[Any, Any] = {}  # step key -> (State, result template) or BREAK
        # The plan of the segment ending here, made at its first run for the results
        # still referred to then; ``variants``: one per other set of such results (the
        # temporaries of an expression die as it goes: a plan that handed them all back
        # would keep every one alive to the segment's end).
        self.plan: Plan | None = None
        self.variants: dict[tuple[int, ...], Plan] = {}

    def plan_for(self, live: tuple[int, ...]) -> Plan:
        """The segment's plan handing back the results ``live`` (the ops of ``plan``,
        agreed and checked at its first run: the same nodes)."""
        plan = self.variants.get(live)
        if plan is None:
            plan = Plan(self.prefix(), list(self.inputs), list(live))
            if len(self.variants) < VARIANT_LIMIT:
                self.variants[live] = plan
        return plan

    def plans(self) -> list[Plan]:
        """The segment plans made from this state on (depth first)."""
        found, todo = [], [self]
        while todo:
            state = todo.pop()
            if state.plan is not None:
                found.append(state.plan)
            todo += [known[0] for known in reversed(state.next.values()) if known is not BREAK]
        return found

    def working(self) -> Trace:
        """The trace to record from here: the shared one where this state is its end, else
        a copy of this state's prefix (another call went another way from here)."""
        t = self.trace
        if len(t.specs) == self.specs and len(t.nodes) == self.nodes:
            return t
        return self.prefix()

    def prefix(self) -> Trace:
        """A copy of the trace up to this state."""
        t = self.trace
        constants = {k: v for k, v in t.constants.items() if k < self.specs}
        return Trace(t.specs[: self.specs], constants, t.nodes[: self.nodes])

    def undo(self, trace: Trace) -> None:
        """Drop what a failed recording added to ``trace`` past this state."""
        del trace.specs[self.specs :], trace.nodes[self.nodes :]
        for k in [k for k in trace.constants if k >= self.specs]:
            del trace.constants[k]
        trace.broken = None


def template_of(result: Any, trace: Trace) -> Any:
    """``result`` with each stand-in of ``trace`` as a :class:`Slot`."""

    def slot(x: DArray) -> Slot:
        if isinstance(x, StandIn) and x._trace is trace:
            return Slot(x._slot)
        raise GraphBreak(f"a recorded step returned a DArray of another trace ({x!r})")

    return rebuild(result, slot)


def rebuild_template(template: Any, fill: Callable[[int], Any]) -> Any:
    """``template`` with each :class:`Slot` replaced by ``fill(slot)``."""
    if type(template) is Slot:
        return fill(template.slot)
    kind = type(template)
    if kind is tuple or kind is list:
        return kind(rebuild_template(x, fill) for x in template)
    if kind is dict:
        return {k: rebuild_template(v, fill) for k, v in template.items()}
    return template
