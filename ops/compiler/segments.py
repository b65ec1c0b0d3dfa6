"""Segments: a compiled function whose trace breaks runs its traced parts compiled.

When tracing meets something it cannot record (a value read, a mask, a
kernel that reads blocks: a graph break), that signature runs in segments.
Each call runs the Python of ``fn`` again, but the ops on DArrays are not
run where they stand: each is recorded as the next step of the current
*segment* (``LazyArray`` results, specs only) and the segment runs as one
compiled ``Plan`` (:mod:`~dmesh.ops.compiler.replay`), its communication
planned as a whole, when something needs its values: the break itself.
The break runs eagerly on the computed blocks, and recording resumes after
it, in a new segment.

Recording is cached: the steps of all calls form a tree (``State``), keyed
by each op's callable, constants and operand slots, so a call that repeats
an earlier one's ops costs a dictionary lookup per op, and each segment's
plan is traced, agreed across the ranks (one collective, at its first run)
and generated once. A DArray that is not an argument (a closure's, a break's
result) enters a segment as one more input.

The blocks a segment reads are those at its run, so anything that writes a
block or hands it out (``out=``, ``a[k] = v``, ``a.fill``, ``a.local``) runs
the waiting ops first (``dmesh._hooks.before_block_access``).
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from dmesh import _hooks
from dmesh._call_keys import index_key
from dmesh.darray import DArray
from dmesh.ops.compiler.agreement import agree
from dmesh.ops.compiler.errors import GraphBreak
from dmesh.ops.compiler.lazy import LazyArray, settled
from dmesh.ops.compiler.replay import Plan
from dmesh.ops.compiler.scalars import Reads, reduction_route
from dmesh.ops.compiler.signature import Unkeyable, key_of, rebuild
from dmesh.ops.compiler.steps import BREAK, Slot, State, rebuild_template, template_of
from dmesh.ops.compiler.trace import StandIn, Tracer, describe

__all__ = ["LazyArray", "Segments", "State"]

# Steps one function's tree keeps (fresh callables as arguments, lambdas, make new keys).
STATE_LIMIT = 4096
# Functions that write into an argument: the waiting ops run first.
IN_PLACE = frozenset(
    f
    for f in (
        getattr(np, name, None)
        for name in ("copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis")
    )
    if f is not None
)
_HOOKS = ("dispatch_ufunc", "dispatch_function", "dispatch_donated", "dispatch_operator")


class _Foreign(Exception):  # noqa: N818 - internal signal
    """An operand on another mesh: the step runs eagerly."""


class _Paused:
    """The context of :meth:`Segments.paused`."""

    __slots__ = ("resume", "session")

    def __init__(self, session: Segments) -> None:
        self.session = session
        self.resume = False

    def __enter__(self) -> None:
        session = self.session
        if session.active:
            session._restore()
            session.active = False
            self.resume = True

    def __exit__(self, *exc: object) -> None:
        if self.resume:
            self.session._install()


class Segments:
    """The hooks of one segmented call: ops on lazy arrays are recorded, breaks run eagerly."""

    def __init__(
        self, root: State, comm: Any, mesh: Any, name: str, reads: Reads | None = None
    ) -> None:
        self.root = root
        self.reads = reads  # scalars read ahead (:mod:`~dmesh.ops.compiler.scalars`)
        self.state = root
        self.comm = comm
        self.mesh = mesh
        self.name = name
        self.slots: dict[int, int] = {}  # id(input DArray) -> its slot in the segment
        self.objects: dict[int, DArray] = {}  # slot -> input DArray (kept: ids stay unique)
        self.pending: dict[int, list[weakref.ref[LazyArray]]] = {}
        self.eager: dict[str, Any] = {}
        self.active = False
        self.runs = 0  # segments run by this call
        self.operands = 0  # DArrays among the current step's operands
        self._head: tuple[Any, ...] = ()  # the current step's key head (callable...)

    # -- the hooks -------------------------------------------------------------------
    def __enter__(self) -> Segments:
        for name in _HOOKS:
            self.eager[name] = getattr(_hooks, name)
        self.eager["setitem"] = _hooks.setitem
        self.eager["getitem"] = _hooks.getitem
        self.eager["recorder"] = _hooks.recorder
        self.eager["before_block_access"] = _hooks.before_block_access
        self._install()
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()
        self.active = False

    def _install(self) -> None:
        _hooks.dispatch_ufunc = self.ufunc
        _hooks.dispatch_function = self.function
        _hooks.dispatch_donated = self.donated
        _hooks.dispatch_operator = self.operator
        _hooks.setitem = self.setitem
        _hooks.getitem = self.getitem
        _hooks.recorder = self
        _hooks.before_block_access = self.flush
        self.active = True

    def _restore(self) -> None:
        eager = self.eager
        _hooks.dispatch_ufunc = eager["dispatch_ufunc"]
        _hooks.dispatch_function = eager["dispatch_function"]
        _hooks.dispatch_donated = eager["dispatch_donated"]
        _hooks.dispatch_operator = eager["dispatch_operator"]
        _hooks.setitem = eager["setitem"]
        _hooks.getitem = eager["getitem"]
        _hooks.recorder = eager["recorder"]
        _hooks.before_block_access = eager["before_block_access"]

    def paused(self) -> _Paused:
        """``with session.paused():`` eager dispatch inside (a break's own work), recording
        again after (a plain class: this is on every break's and every flush's path)."""
        return _Paused(self)

    def records(self, a: Any) -> bool:
        """``dmesh.map_overlap`` asks: it runs eagerly here (its block call is not keyed)."""
        return False

    def ufunc(self, ufunc: Any, method: str, inputs: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """``_hooks.dispatch_ufunc``: the ufunc call recorded (``out=``: run now)."""
        return self._step(("u", ufunc, method), (inputs, kw), "ufunc", "out" in kw)

    def function(self, func: Any, types: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """``_hooks.dispatch_function``: the call recorded (``out=``, in place: run now)."""
        writes = "out" in kw or func in IN_PLACE
        return self._step(("f", func), (args, kw), "function", writes, types)

    def donated(self, ufunc: Any, inputs: tuple[Any, ...], donor: int) -> Any:
        """``_hooks.dispatch_donated``: recorded as the plain ufunc call."""
        return self._step(("u", ufunc, "__call__"), (inputs, {}), "donated", False, donor)

    def operator(self, ufunc: Any, inputs: tuple[Any, ...]) -> Any:
        """``_hooks.dispatch_operator``: an operator's ufunc, recorded."""
        return self._step(("u", ufunc, "__call__"), (inputs, {}), "operator")

    def getitem(self, a: Any, key: Any) -> Any:
        """``_hooks.getitem``: plain basic indexing recorded; other keys run now."""
        return self._step(("getitem",), (a, key), "getitem")

    def redistribute(self, a: Any, mesh: Any, target: Any) -> Any:
        """``DArray._moved`` asks: a redistribution on this mesh is recorded (an array not
        seen yet enters as an input); otherwise the waiting ops run and it moves as usual
        (NotImplemented)."""
        if mesh is not self.mesh or a.mesh is not self.mesh:
            self.flush()
            return NotImplemented
        return self._step(("move", target), ((a,), {}), "move", False, target)

    def setitem(self, a: Any, key: Any, value: Any) -> None:
        """``_hooks.setitem``: a write, so the waiting ops run first, then it does."""
        self._eager("setitem", ((a, key, value), {}), None)

    def _run_eager(self, how: str, payload: Any, extra: Any) -> Any:
        """The hooked call ``how`` made as it would be without recording."""
        items, kw = payload
        eager = self.eager
        if how == "ufunc":
            ufunc, method = self._head[1], self._head[2]
            return eager["dispatch_ufunc"](ufunc, method, items, kw)
        if how == "function":
            return eager["dispatch_function"](self._head[1], extra, items, kw)
        if how == "donated":
            return eager["dispatch_donated"](self._head[1], items, extra)
        if how == "operator":
            return eager["dispatch_operator"](self._head[1], items)
        if how == "getitem":
            return eager["getitem"](*payload)
        if how == "setitem":
            # The segment ran: an array it computed is its block and spec now, as a plain
            # DArray, so the write takes the eager caches' paths (which take DArrays only).
            a, key, value = items
            return eager["setitem"](settled(a), key, settled(value))
        return NotImplemented  # "move": DArray._moved goes on and moves the array itself

    def _run_record(self, tracer: Tracer, how: str, payload: Any, extra: Any) -> Any:
        """The hooked call ``how`` recorded by ``tracer`` (operands are its stand-ins)."""
        items, kw = payload
        head = self._head
        if how == "ufunc":
            return tracer.ufunc(head[1], head[2], items, kw)
        if how == "function":
            return tracer.function(head[1], extra, items, kw)
        if how == "donated":
            return tracer.donated(head[1], items, extra)
        if how == "operator":
            return tracer.operator(head[1], items)
        if how == "getitem":
            return tracer.getitem(*payload)
        return tracer.move(items[0], extra)

    # -- recording -------------------------------------------------------------------
    def _step(
        self, head: tuple[Any, ...], payload: Any, how: str, writes: bool = False, extra: Any = None
    ) -> Any:
        """Record the hooked call ``how`` (``head``: what keys it; ``payload``: its operands
        and keywords) as the segment's next step, or run it now (a write, no DArray of this
        mesh, a graph break)."""
        self._head = head
        if writes:
            return self._eager(how, payload, extra)
        self.operands = 0
        try:
            try:
                key: Any = (head, self._key(payload))
            except Unkeyable:
                key = None
                rebuild(payload, self._operand)  # every operand has its slot
        except _Foreign:
            return self._eager(how, payload, extra)
        if not self.operands:
            return self._eager(how, payload, extra)
        state = self.state  # binding inputs moved it
        known = state.next.get(key) if key is not None else None
        if known is BREAK:
            return self._eager(how, payload, extra)
        if known is None:
            known = self._record(state, key, payload, how, extra)
            if known is None:
                return self._eager(how, payload, extra)
        self.state, template = known
        if type(template) is Slot:
            return self._result(template.slot)
        return rebuild_template(template, self._result)

    def _key(self, payload: tuple[Any, Any]) -> Any:
        """``key_of(payload)`` for the usual ``(operands, keywords)``, without its recursion
        for the operands that are DArrays or plain Python scalars."""
        items, kw = payload
        if type(items) is not tuple:
            if self._head[0] == "getitem" and isinstance(items, DArray):
                # a[1:-1, 2:], the commonest step of stencil code: the key's hashable
                # form as the indexing caches make it, not key_of's recursion.
                plain = index_key(kw)
                if plain is not None:
                    return (self._operand(items), ("K", plain))
            return key_of(payload, self._operand)
        parts: list[Any] = []
        for x in items:
            kind = type(x)
            if kind is LazyArray and x._session is self and x._block is None:
                self.operands += 1  # _operand's pending case, inline: the usual operand
                parts.append(x._slot)
            elif kind is int or kind is bool or kind is str or x is None:
                parts.append((kind, x))
            elif kind is float:
                parts.append((float, x, math.copysign(1.0, x)))
            elif isinstance(x, DArray):
                parts.append(self._operand(x))
            else:
                parts.append(key_of(x, self._operand))
        if not kw:
            return (tuple(parts), ())
        return (tuple(parts), key_of(kw, self._operand))

    def _pending(self, x: Any) -> bool:
        return isinstance(x, LazyArray) and x._session is self and x._block is None

    def _operand(self, x: DArray) -> Any:
        """The key of operand ``x``: its slot (an input not seen yet takes a new one)."""
        self.operands += 1
        if x.mesh is not self.mesh:
            raise _Foreign
        if self._pending(x):
            return x._slot  # type: ignore[attr-defined]  # a LazyArray
        slot = self.slots.get(id(x))
        if slot is None:
            slot = self._bind(x)
        return slot

    def _bind(self, x: DArray) -> int:
        state = self.state
        key = ("in", x.spec)
        known = state.next.get(key)
        if known is None:
            trace = state.working()
            trace.stand_in(x.spec)
            known = (State(trace, (*state.inputs, state.specs), state.outputs), None)
            self._remember(state, key, known)
        self.state = known[0]
        slot = self.state.inputs[-1]
        self.slots[id(x)] = slot
        self.objects[slot] = x
        return slot

    def _record(self, state: State, key: Any, payload: Any, how: str, extra: Any) -> Any:
        """Record one step from ``state`` on stand-ins: (next State, result template), or
        None when it cannot be recorded (a graph break, or an error the eager run raises)."""
        trace = state.working()
        stand_ins: dict[int, StandIn] = {}

        def stand_in(x: DArray) -> StandIn:
            slot = x._slot if self._pending(x) else self.slots[id(x)]  # type: ignore[attr-defined]
            if slot not in stand_ins:
                stand_ins[slot] = StandIn(trace.specs[slot], trace, slot)  # type: ignore[arg-type]
            return stand_ins[slot]

        try:
            head = self._head  # recording may step here again (calls on other arrays)
            try:
                with Tracer(trace) as tracer:
                    result = self._run_record(tracer, how, rebuild(payload, stand_in), extra)
            finally:
                self._head = head
            template = template_of(result, trace)
        except GraphBreak:
            state.undo(trace)
            self._remember(state, key, BREAK)
            return None
        except Exception:
            state.undo(trace)  # the eager run raises it (or succeeds) with the values
            return None
        handed: list[int] = []
        rebuild_template(template, handed.append)
        outputs = state.outputs + tuple(s for s in handed if s not in state.inputs)
        known = (State(trace, state.inputs, outputs), template)
        self._remember(state, key, known)
        return known

    def _remember(self, state: State, key: Any, known: Any) -> None:
        if key is not None and len(state.next) < STATE_LIMIT:
            state.next[key] = known

    def _result(self, slot: int) -> Any:
        if slot in self.objects:
            return self.objects[slot]
        lazy = LazyArray.__new__(LazyArray)  # the fields without DArray.__init__'s setter
        lazy._session, lazy._block, lazy._slot, lazy._view = self, None, slot, None
        trace = self.state.trace
        lazy._spec, lazy._trace = trace.specs[slot], trace  # type: ignore[assignment]
        refs = self.pending.get(slot)
        if refs is None:
            self.pending[slot] = [weakref.ref(lazy)]
        else:
            refs.append(weakref.ref(lazy))
        return lazy

    def _eager(self, how: str, payload: Any, extra: Any) -> Any:
        head = self._head
        self.flush()
        self._head = head
        self._restore()
        self.active = False
        try:
            return self._run_eager(how, payload, extra)
        finally:
            self._install()

    # -- running a segment -----------------------------------------------------------
    def flush(self) -> None:
        """Run the ops recorded since the last run as one plan (collective), fill the
        lazy arrays' blocks, and start a new segment. Something may read or write blocks
        (a barrier: no value is used ahead across it)."""
        if self.reads is not None:
            self.reads.barrier()
        self._run()

    def scalar(self, lazy: LazyArray) -> Any:
        """The value of one-element ``lazy`` of this session as its reduced block, when it
        is one reduction of partial terms (with the reads known to come next); else None
        (the eager path: no communication, or the general one). Collective."""
        if lazy._block is None:
            self._run()  # its segment: a read writes nothing (no barrier)
        route = reduction_route(lazy._spec)
        if route is None or self.reads is None:
            return None
        with self.paused():
            return self.reads.read(lazy, route)

    def _run(self) -> None:
        state, objects, pending = self.state, self.objects, self.pending
        # A new segment first: the plan's own work must not record into this one.
        self.state, self.objects, self.pending = self.root, {}, {}
        self.slots.clear()
        if not (state.nodes and pending):
            return
        reads, n, ahead = self.reads, 0, None
        if reads is not None:
            n, ahead = reads.segment(state, [objects[s] for s in state.inputs])
        # The results the Python code still refers to: the plan hands back those only.
        # (Every rank runs the same code, so the same ones are alive on every rank.)
        live = tuple(s for s in state.outputs if any(r() is not None for r in pending.get(s, ())))
        with self.paused():
            blocks = [objects[s]._local for s in state.inputs]
            plan = state.plan
            if ahead is not None and plan is not None and set(live) <= set(plan.outputs):
                values = ahead  # computed ahead, at an earlier read (same state, same inputs)
            elif plan is None:
                trace = state.prefix()
                inputs = [f"input s{s}: {describe(trace.specs[s])}" for s in state.inputs]  # type: ignore[arg-type]
                agree(self.comm, inputs + trace.descriptions(), self.name)
                plan = state.plan = Plan(trace, list(state.inputs), list(live))
                state.variants[live] = plan
                values = plan.run_checked(blocks, self.comm)
            else:
                plan = state.plan_for(live)
                values = plan.run(blocks)
        self.runs += 1
        for slot, value in zip(plan.outputs, values):
            for ref in pending.get(slot, ()):
                lazy = ref()
                if lazy is not None:
                    lazy._block = value
                    if reads is not None:
                        reads.ran(n, slot, lazy)

    def abandon(self) -> None:
        """The call raised: the ops still waiting never run, and their arrays say so."""
        for refs in self.pending.values():
            for ref in refs:
                lazy = ref()
                if lazy is not None:
                    lazy._session = None
        self.pending.clear()
