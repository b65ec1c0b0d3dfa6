"""``explain(fn, *args)``: run a call and report what each op chose and what it moved."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dmesh.collectives import tracing
from dmesh.collectives.tracing import CollectiveRecord, OpScope
from dmesh.core.placement import shorts
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray, Redistribution
from dmesh.debug.comm_mode import format_bytes

__all__ = ["Explanation", "OpReport", "explain"]


@dataclass
class OpReport:
    """One op of an explained call: what went in, what it moved, what came out."""

    label: str  # "np.matmul", "DArray.full_array", ...
    inputs: list[DArraySpec | None] = field(default_factory=list)  # None: not a DArray
    result: DArraySpec | None = None
    redistributions: list[Redistribution] = field(default_factory=list)
    collectives: list[CollectiveRecord] = field(default_factory=list)

    @property
    def estimated_cost(self) -> float:
        """Sum of the redistributions' estimates, bytes per rank (latency included)."""
        return sum(r.cost for r in self.redistributions)

    def strategy(self) -> str:
        """Where each DArray operand was computed (moved or kept) and the result's placements."""
        moved = list(self.redistributions)
        parts = []
        for i, spec in enumerate(self.inputs):
            if spec is None:
                continue
            match = next((r for r in moved if r.source == spec), None)
            if match is None:
                parts.append(f"operand {i} kept {shorts(spec.placements)}")
            else:
                moved.remove(match)
                parts.append(
                    f"operand {i} {shorts(spec.placements)} -> {shorts(match.target.placements)}"
                )
        if self.result is not None:
            parts.append(f"result {shorts(self.result.placements)}")
        return "; ".join(parts)

    def lines(self, number: int) -> list[str]:
        """The report of this op, as text lines."""
        args = ", ".join("scalar" if s is None else _spec_text(s) for s in self.inputs)
        result = "" if self.result is None else f" -> {_spec_text(self.result)}"
        out = [f"[{number}] {self.label}({args}){result}"]
        if self.inputs or self.result is not None:
            out.append(f"    strategy: {self.strategy()}")
        for r in self.redistributions:
            steps = ", ".join(_step_text(s) for s in r.steps) or "no step"
            out.append(
                f"    redistribute {shorts(r.source.placements)} -> {shorts(r.target.placements)}"
                f" of {_spec_text(r.source)}: {steps}; estimate {format_bytes(r.cost)} per rank"
            )
        by_kind: dict[tuple[str, str], list[int]] = {}
        for c in self.collectives:
            row = by_kind.setdefault((c.collective, c.group), [0, 0, 0])
            row[0] += 1
            row[1] += c.sent_bytes
            row[2] += c.received_bytes
        for (name, group), (n, sent, received) in by_kind.items():
            out.append(
                f"    {name} on {group}: {n} call{'s' if n != 1 else ''}, "
                f"sent {format_bytes(sent)}, received {format_bytes(received)}"
            )
        if not self.collectives:
            out.append("    no communication")
        return out


@dataclass
class Explanation:
    """The result of :func:`explain`: the call's return value and one report per op."""

    result: Any
    ops: list[OpReport]
    plan: str | None = None  # a compiled function's plan for the call (dmesh.compile)

    def report(self) -> str:
        """The whole report as text (this rank's view; decisions are the same on every rank)."""
        lines = [] if self.plan is None else ["compiled plan:", self.plan, "what the call made:"]
        for i, op in enumerate(self.ops, 1):
            lines.extend(op.lines(i))
        total = sum(op.estimated_cost for op in self.ops)
        moved = sum(c.received_bytes for op in self.ops for c in op.collectives)
        count = sum(len(op.collectives) for op in self.ops)
        lines.append(
            f"{len(self.ops)} op{'s' if len(self.ops) != 1 else ''}, "
            f"{count} collective{'s' if count != 1 else ''}, "
            f"estimated redistribution cost {format_bytes(total)} per rank, "
            f"{format_bytes(moved)} received by this rank"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


class _Explainer:
    """The recorder behind :func:`explain`: ops from dispatch, loose events grouped by caller."""

    def __init__(self) -> None:
        self.ops: list[OpReport] = []
        self._loose: OpReport | None = None  # events outside a NumPy call, still open

    def collective(self, record: CollectiveRecord) -> None:
        if tracing.in_op_scope():
            return  # reported with its op
        loose = self._loose
        if loose is None or (loose.collectives and loose.label != record.op):
            loose = self._open_loose(record.op)
        loose.label = record.op
        loose.collectives.append(record)

    def event(self, kind: str, info: Any) -> None:
        if kind != "redistribute" or tracing.in_op_scope():
            return
        loose = self._loose if self._loose is not None and not self._loose.collectives else None
        if loose is None:
            loose = self._open_loose("redistribute")
        loose.redistributions.append(info)

    def op(self, scope: OpScope) -> None:
        self._loose = None
        report = OpReport(scope.label)
        report.inputs = [x.spec if isinstance(x, DArray) else None for x in scope.inputs]
        result = scope.result
        if isinstance(result, tuple):
            result = next((x for x in result if isinstance(x, DArray)), None)
        report.result = result.spec if isinstance(result, DArray) else None
        for kind, info in scope.events:
            if kind == "redistribute":
                report.redistributions.append(info)
            elif kind == "collective":
                report.collectives.append(info)
        self.ops.append(report)

    def _open_loose(self, label: str) -> OpReport:
        self._loose = OpReport(label)
        self.ops.append(self._loose)
        return self._loose


def explain(fn: Any, *args: Any, **kwargs: Any) -> Explanation:
    """Run ``fn(*args, **kwargs)`` and report, per op, the strategy, redistributions and cost.

    Collective when ``fn`` is (call it on every rank). Each NumPy call on
    DArrays inside ``fn`` is one op: the placements of its operands, where
    each was moved to compute it (or kept), the result's placements, each
    redistribution's steps and estimated cost (bytes per rank plus a latency
    term, the model dispatch uses to choose), and the collectives it made.
    Communication outside NumPy calls (``a.full_array()``, ``float(x)``,
    ``a.redistribute(...)``) is reported under the dmesh call that made it.

    Returns an :class:`Explanation`: ``.result`` is what ``fn`` returned;
    ``print(explanation)`` shows the report (byte counts are this rank's). For a
    function made by ``dmesh.compile``, ``.plan`` and the report also show the
    compiled plan of the call: its ops, the replay's moves and packed
    reductions, or why the call runs eagerly.

    Example::

        ex = dmesh.debug.explain(lambda: a @ b)
        if mesh.rank == 0:
            print(ex)
    """
    explainer = _Explainer()
    tracing.add_recorder(explainer)
    try:
        result = fn(*args, **kwargs)
    finally:
        tracing.remove_recorder(explainer)
    describe = getattr(fn, "describe_plan", None)  # a dmesh.compile'd function
    plan = describe(*args, **kwargs) if callable(describe) else None
    return Explanation(result, explainer.ops, plan)


def _spec_text(spec: DArraySpec) -> str:
    """``f64[8,6] (S(0), R)``: the spec without its mesh."""
    return repr(spec).split(" on ")[0]


def _step_text(step: tuple[Any, ...]) -> str:
    kind = step[0]
    if kind == "transfer":
        return "one all_to_all of the pieces that cross ranks (kept pieces copied locally)"
    if len(step) > 1 and isinstance(step[1], int):
        return f"{kind} over mesh dim {step[1]}"
    return str(kind)
