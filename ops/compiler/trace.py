"""Tracing: run the function once on spec-only stand-ins and record each op as a node.

A ``StandIn`` is a DArray with a spec and no block. While a trace is
active, DArray's hooks (``dmesh._hooks``: NumPy's protocols, the operators,
``a.sum()``-style methods) go to ``Tracer``, which records a call on
stand-ins instead of running it: the pipeline's ``dmesh.ops.pipeline.prepare``
decides the layouts (no message: a decision is pure), the result dtype comes
from NumPy on tiny placeholder arrays, and the result is a new stand-in.

Whatever cannot be recorded (a decomposition, a keyword form, reading a
value, indexing, a DArray that is not an argument...) raises
``dmesh.ops.compiler.errors.GraphBreak``; the first reason is kept.
Tracing sends no message, so ranks that trace different programs can still
compare their plans before anything waits.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from dmesh import _hooks
from dmesh._call_keys import index_key
from dmesh.core.layout import Layout
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.compiler.errors import GraphBreak
from dmesh.ops.compiler.nodes import Node, copy_block, describe, kind_of, same_block, stable, walk
from dmesh.ops.compiler.result_dtype import result_dtype
from dmesh.ops.compiler.selections import masked_rows
from dmesh.ops.compiler.writes import mask_writer, plan_mask_write, plan_write
from dmesh.ops.dispatch import function_label
from dmesh.ops.indexing.basic import block_indexing
from dmesh.ops.indexing.plans import selection
from dmesh.ops.integer_power import check_integer_power
from dmesh.ops.numpy_implementations import implementation_of, run_implementation
from dmesh.ops.pipeline import SCALARS, prepare
from dmesh.ops.registry import Rule, implementations, run_forms

__all__ = ["Node", "StandIn", "Trace", "copy_block", "describe", "same_block", "tracing"]


@dataclass
class Trace:
    """The slots (arguments, constants, results) and nodes of one trace."""

    specs: list[DArraySpec | None] = field(default_factory=list)  # None: a constant
    constants: dict[int, Any] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    broken: str | None = None  # the first graph break's reason
    # Slots read from a detached selection (an int on a sharded dim) -> its owners (mesh
    # dim -> coordinate): they hold the values, the other ranks identity terms.
    held: dict[int, dict[int, int]] = field(default_factory=dict)

    def stand_in(self, spec: DArraySpec) -> StandIn:
        """A new slot holding an array of ``spec``, as a stand-in."""
        self.specs.append(spec)
        return StandIn(spec, self, len(self.specs) - 1)

    def constant(self, value: Any) -> int:
        """A new slot holding the scalar ``value``."""
        self.specs.append(None)
        self.constants[len(self.specs) - 1] = value
        return len(self.specs) - 1

    def graph_break(self, reason: str) -> NoReturn:
        """Stop tracing: ``reason`` is what could not be recorded."""
        if self.broken is None:
            self.broken = reason
        raise GraphBreak(reason)

    def descriptions(self) -> list[str]:
        """What each node did, then the graph break if any: what ranks compare."""
        lines = [n.description for n in self.nodes]
        if self.broken is not None:
            lines.append(f"graph break: {self.broken}")
        return lines


class StandIn(DArray):
    """A DArray of a trace: a spec and a slot, no block. Reading any value breaks the graph."""

    __slots__ = ("_slot", "_trace")

    def __init__(self, spec: DArraySpec, trace: Trace, slot: int) -> None:
        super().__init__(None, spec)
        self._trace = trace
        self._slot = slot

    # A decomposition run on a stand-in may reach for the block itself (a kernel
    # that communicates): that is a graph break, never a None block.
    @property
    def _local(self) -> Any:
        self._break("the block (a kernel that reads it)")

    @_local.setter
    def _local(self, value: Any) -> None:
        pass  # DArray.__init__ stores the block: a stand-in has none

    def _break(self, what: str) -> NoReturn:
        self._trace.graph_break(f"{what} of a traced {self._spec!r} (needs its values)")

    def __repr__(self) -> str:
        return f"StandIn({self._spec!r})"

    @property
    def local(self) -> Any:
        """No block while tracing: a graph break."""
        self._break("the local block")

    def to_local(self) -> Any:
        self._break("to_local()")

    def full_array(self) -> Any:
        self._break("full_array()")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        self._break("np.asarray()")

    def item(self, *args: Any) -> Any:
        self._break("item()")

    def tolist(self) -> Any:
        self._break("tolist()")

    def __bool__(self) -> bool:
        self._break("bool()")

    def copy(self) -> DArray:
        recorder = _hooks.recorder
        if isinstance(recorder, Tracer) and recorder.records(self):
            return recorder.copy(self)  # (a.copy() starts most time steps: recorded)
        self._break("copy()")

    def __getitem__(self, key: Any) -> DArray:
        recorder = _hooks.recorder
        if isinstance(recorder, Tracer) and recorder.records(self):
            return recorder.getitem(self, key)
        self._break("indexing")

    def __setitem__(self, key: Any, value: Any) -> None:
        recorder = _hooks.recorder
        if isinstance(recorder, Tracer) and recorder.records(self):
            recorder.setitem(self, key, value)  # (plain keys: a write node)
            return
        self._break("assignment")


class Tracer:
    """The hooks while tracing: calls on stand-ins are recorded, other calls run as usual."""

    def __init__(self, trace: Trace, detached: bool = False) -> None:
        self.trace = trace
        self.saved: dict[str, Any] = {}
        # Whether an int on a sharded dim is read as a node: only where every write
        # through the result is refused (a whole trace: writes into partial terms
        # break), not in segments, whose Python may write through it eagerly.
        self.detached = detached

    def __enter__(self) -> Tracer:
        for name in (
            "dispatch_ufunc",
            "dispatch_function",
            "dispatch_donated",
            "dispatch_operator",
        ):
            self.saved[name] = getattr(_hooks, name)
        _hooks.dispatch_ufunc = self.ufunc
        _hooks.dispatch_function = self.function
        _hooks.dispatch_donated = self.donated
        _hooks.dispatch_operator = self.operator
        self.saved["recorder"] = _hooks.recorder
        _hooks.recorder = self
        return self

    def __exit__(self, *exc: object) -> None:
        for name, hook in self.saved.items():
            setattr(_hooks, name, hook)

    def records(self, a: Any) -> bool:
        """Whether ``a`` is a stand-in of this trace (a dmesh call on it is then recorded)."""
        return isinstance(a, StandIn) and a._trace is self.trace

    def block_call(
        self, func: Callable[..., Any], a: StandIn, what: str, result_dtype: Callable[[], Any]
    ) -> StandIn:
        """Record ``func(block, spec)`` (a collective of its own, ``dmesh.map_overlap``'s),
        whose result has ``a``'s layout and the dtype ``result_dtype()`` tells without a
        message; the plan's first run checks it on every rank."""
        trace = self.trace
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                dtype = np.dtype(result_dtype())
        except Exception as exc:
            trace.graph_break(f"{what}: its result dtype is unknown ({type(exc).__name__})")
        spec = DArraySpec(a.spec.mesh, a.spec.layout, dtype)
        return self._block_node(functools.partial(func, spec=a.spec), a, spec, stable(what))

    def block_map(
        self, func: Callable[..., Any], a: StandIn, spec: DArraySpec, what: str, *more: StandIn
    ) -> StandIn:
        """Record ``func(block of a, *blocks of more)``, a block of ``spec`` that a kernel
        planned from the specs alone (a local pass of ``np.fft``'s plan)."""
        if spec.mesh is not a.spec.mesh:
            self.trace.graph_break(f"{what}: a block of another mesh")
        return self._block_node(func, a, spec, stable(what), *more)

    def getitem(self, a: StandIn, key: Any) -> StandIn:
        """Record ``a[key]`` when it is plain basic indexing (a view of the block, no
        message), or a boolean mask of its rows (a selection only reduced: .selections);
        anything else (other masks, index arrays, mirrored blocks) breaks the graph."""
        selected = masked_rows(self, a, key) if isinstance(key, StandIn) else None
        if selected is not None:
            return selected  # type: ignore[return-value]
        planned = block_indexing(a.spec, key)
        if planned is None and self.detached:
            planned = block_indexing(a.spec, key, detached=True)
            if planned is not None:
                spec, index = planned
                held = self._block_node(index, a, spec, f"getitem[{stable(key)}]")
                self.trace.held[held._slot] = selection(a.spec, key, index_key(key)).owners
                return held
        if planned is None:
            self.trace.graph_break(f"indexing with {stable(key)} (moves data or reads values)")
        spec, index = planned
        return self._block_node(index, a, spec, f"getitem[{stable(key)}]")

    def setitem(self, a: StandIn, key: Any, value: Any) -> None:
        """Record ``a[key] = value`` as a write node (:mod:`.writes` plans it), or break:
        the value a constant, or a stand-in moved to the selection's layout first."""
        trace = self.trace
        if self.records(key):  # Z[birth | survive] = 1: a boolean mask of a's shape
            mask = self.move(key, plan_mask_write(a.spec, key.spec, value, trace.graph_break))
            self._write(a, mask_writer(), (mask._slot, trace.constant(value)),
                        f"s{a._slot}[s{mask._slot}] = {value!r}")  # fmt: skip
            return
        traced = self.records(value)
        held = trace.held.get(value._slot) if traced else None
        func, layout = plan_write(a.spec, key, value, traced, held, trace.graph_break)
        if isinstance(value, StandIn):
            if layout is not None and value.spec.layout != layout:
                value = self.move(value, layout)
            slot, part = value._slot, f"s{value._slot}"
        else:
            slot, part = trace.constant(value), f"{type(value).__name__}:{value!r}"
        self._write(a, func, (slot,), f"s{a._slot}[{stable(key)}] = {part}")

    def _write(self, a: StandIn, func: Any, operands: tuple[int, ...], what: str) -> None:
        """A write node: ``func(block of a, *operands)`` writes ``a``'s block in place."""
        slots = (a._slot, *operands)
        moves = (None,) * len(slots)
        node = Node(func, "setitem", None, slots, moves, a._slot, a.spec, f"{what} (in place)",
                    writes=True)  # fmt: skip
        self.trace.nodes.append(node)

    def copy(self, a: StandIn) -> StandIn:
        """Record ``a.copy()``: a new block of the same values and spec (no message)."""
        return self._block_node(copy_block, a, a.spec, "copy")

    def redistribute(self, a: DArray, mesh: Any, target: Layout) -> Any:
        """``DArray._moved`` asks: a redistribution of a stand-in on its mesh is recorded,
        to another mesh breaks the graph; other arrays move as usual (NotImplemented)."""
        if not self.records(a):
            return NotImplemented
        if mesh is not a.mesh:
            self.trace.graph_break("a redistribution to another mesh")
        return self.move(a, target)  # type: ignore[arg-type]

    def move(self, a: StandIn, target: Layout) -> StandIn:
        """Record ``a`` redistributed to ``target`` on its mesh (``redistribute``,
        ``with_layout``, ``rebalance``): a node whose operand moves."""
        if target == a.spec.layout:
            return a
        spec = DArraySpec(a.mesh, target, a.dtype)
        trace = self.trace
        result = trace.stand_in(spec)
        description = f"s{result._slot} = redistribute(s{a._slot}) -> {describe(spec)}"
        node = Node(
            same_block, "redistribute", None, (a._slot,), (target,), result._slot, spec, description
        )
        trace.nodes.append(node)
        return result

    def _block_node(
        self, func: Callable[..., Any], a: StandIn, spec: DArraySpec, what: str, *more: StandIn
    ) -> StandIn:
        """Record ``func(block of a, *blocks of more)``, a result of ``spec``, described as
        ``what``."""
        trace = self.trace
        result = trace.stand_in(spec)
        slots = (a._slot, *(x._slot for x in more))
        named = ", ".join(f"s{slot}" for slot in slots)
        description = f"s{result._slot} = {what}({named}) -> {describe(spec)}"
        node = Node(func, what, None, slots, (None,) * len(slots), result._slot, spec, description)
        trace.nodes.append(node)
        return result

    def _ours(self, found: list[Any], what: str) -> bool:
        """Whether the call involves stand-ins (all DArrays then must be this trace's)."""
        if not any(isinstance(x, StandIn) for x in found):
            return False
        for x in found:
            if not isinstance(x, StandIn) or x._trace is not self.trace:
                self.trace.graph_break(
                    f"{what}: an operand is a DArray that is not an argument of the compiled "
                    f"function ({x!r}, a closure's or a global's?)"
                )
        return True

    def ufunc(
        self, ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kw: dict[str, Any]
    ) -> Any:
        label = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        if not self._ours(walk(inputs) + walk(kw), label):
            return self.saved["dispatch_ufunc"](ufunc, method, inputs, kw)
        if method == "__call__":
            if kw:
                self.trace.graph_break(f"{label} with keywords {sorted(kw)}")
            return self._ufunc_call(ufunc, inputs)
        if kw.keys() & {"where", "out", "initial"}:
            self.trace.graph_break(f"{label} with keywords {sorted(kw)} (no recorded form)")
        # Special forms and decompositions are written in NumPy calls on DArrays:
        # run on stand-ins, their own calls are recorded (what they cannot, breaks).
        entry = implementations((ufunc, method))
        result = run_forms(entry, (ufunc, method), inputs, kw)
        if result is not NotImplemented:
            return result
        rule = entry.rule
        if rule is None or rule.parse is None:
            self.trace.graph_break(f"{label}: no sharding rule to record")
        return self._parsed(ufunc, rule, inputs, kw, label)

    def donated(self, ufunc: np.ufunc, inputs: tuple[Any, ...], donor: int) -> Any:
        if not self._ours(walk(inputs), f"np.{ufunc.__name__}"):
            return self.saved["dispatch_donated"](ufunc, inputs, donor)
        return self._ufunc_call(ufunc, inputs)

    def operator(self, ufunc: np.ufunc, inputs: tuple[Any, ...]) -> Any:
        if not self._ours(walk(inputs), f"np.{ufunc.__name__}"):
            return self.saved["dispatch_operator"](ufunc, inputs)
        return self._ufunc_call(ufunc, inputs)

    def function(self, func: Any, types: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        label = function_label(func)
        if not self._ours(walk(args) + walk(kw), label):
            return self.saved["dispatch_function"](func, types, args, kw)
        # In the one order of every door (ops.registry.Implementations); the forms,
        # decompositions and NumPy's own implementations are written in NumPy
        # calls on DArrays, so running them on stand-ins records their calls.
        entry = implementations(func)
        result = run_forms(entry, func, args, kw)
        if result is not NotImplemented:
            return result
        rule = entry.rule
        if rule is None and implementation_of(func) is not None:
            return run_implementation(func, args, kw)
        if rule is None or rule.parse is None:
            self.trace.graph_break(f"{label}: no sharding rule to record")
        return self._parsed(func, rule, args, kw, label)

    def _ufunc_call(self, ufunc: np.ufunc, inputs: tuple[Any, ...]) -> Any:
        label = f"np.{ufunc.__name__}"
        if ufunc is np.power and len(inputs) == 2:
            base, exponent = inputs
            if isinstance(exponent, DArray) and kind_of(base) in "biu" and kind_of(exponent) == "i":
                self.trace.graph_break("np.power of integers (its error check reads values)")
            # A constant exponent: decided now, from what every rank knows (no message),
            # as eagerly (z ** 3 of floats, n ** 2 of ints trace on).
            check_integer_power("__call__", inputs, {})
        entry = implementations(ufunc)
        result = run_forms(entry, ufunc, inputs, {})
        if result is not NotImplemented:  # two outputs: np.divmod, np.frexp
            return result
        rule = entry.rule
        if rule is None:
            self.trace.graph_break(f"{label}: no sharding rule to record")
        if rule.parse is not None:
            return self._parsed(ufunc, rule, inputs, {}, label)
        return self._record(ufunc, rule, list(inputs), (), label, inputs, {})

    def _parsed(
        self, func: Any, rule: Rule, args: tuple[Any, ...], kw: dict[str, Any], label: str
    ) -> Any:
        assert rule.parse is not None
        parsed, static = rule.parse(args, kw)
        return self._record(func, rule, parsed, static, label, args, kw)

    def _record(
        self,
        func: Any,
        rule: Rule,
        operands: list[Any],
        static: tuple[Any, ...],
        label: str,
        args: tuple[Any, ...],
        kw: dict[str, Any],
    ) -> StandIn:
        trace = self.trace
        for x in operands:
            if not isinstance(x, (StandIn, *SCALARS)) and not (
                isinstance(x, np.ndarray) and x.ndim == 0
            ):
                trace.graph_break(f"{label}: an operand is a {type(x).__name__}")
        if not any(isinstance(x, StandIn) for x in operands):
            trace.graph_break(f"{label}: no DArray among the operands the rule uses")
        operands, mesh, step = prepare(rule, operands, static, label)
        dtype = result_dtype(func, args, kw, label, trace.graph_break)
        spec = step.decision.result_spec(mesh, dtype)
        slots: list[int] = []
        parts: list[str] = []
        for x in operands:
            if isinstance(x, StandIn):
                slots.append(x._slot)
                parts.append(f"s{x._slot}")
            else:
                slots.append(trace.constant(x))
                parts.append(f"{type(x).__name__}:{x!r}")
        moves = tuple(
            target if move else None
            for target, move in zip(step.decision.operands, step.decision.moves)
        )
        moved = [f"s{s}->{t.placements}{t.bounds}" for s, t in zip(slots, moves) if t is not None]
        result = trace.stand_in(spec)
        description = (
            f"s{result._slot} = {label}({', '.join(parts)}) static={stable(static)} "
            f"moves={moved} -> {describe(spec)}"
        )
        trace.nodes.append(
            Node(func, label, step, tuple(slots), moves, result._slot, spec, description)
        )
        return result


def tracing(trace: Trace) -> Tracer:
    """``with tracing(trace):`` calls on ``trace``'s stand-ins are recorded (a whole trace:
    ints on sharded dims read as nodes, see ``Tracer.detached``)."""
    return Tracer(trace, detached=True)
