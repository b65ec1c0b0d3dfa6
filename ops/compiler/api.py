"""``compile(fn)``: trace once per signature, agree the plan across ranks, replay it.

The first call with a signature (see :mod:`~dmesh.ops.compiler.signature`)
traces ``fn`` on spec-only stand-ins (:mod:`~dmesh.ops.compiler.trace`,
no message), the ranks of the arguments' mesh agree on the plan
(:mod:`~dmesh.ops.compiler.agreement`, one ``Allgather``), and the plan runs,
checked, on the blocks (:mod:`~dmesh.ops.compiler.replay`). Later calls with
the same signature replay the plan. A trace that meets something it cannot
record (a graph break) makes that signature run in segments
(:mod:`~dmesh.ops.compiler.segments`): ``fn``'s Python runs at each call,
the ops between breaks run as compiled plans and the breaks eagerly, on
every rank alike since a break depends on specs only; ``Compiled.breaks``
keeps the reasons.
"""

from __future__ import annotations

import functools
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

import numpy as np
from mpi4py import MPI

from dmesh import _hooks
from dmesh.darray import DArray
from dmesh.ops.compiler.agreement import agree
from dmesh.ops.compiler.errors import GraphBreak
from dmesh.ops.compiler.lazy import LazyArray
from dmesh.ops.compiler.replay import Plan
from dmesh.ops.compiler.scalars import Log, Reads
from dmesh.ops.compiler.segments import Segments
from dmesh.ops.compiler.signature import FreeValues, Unkeyable, rebuild, signature
from dmesh.ops.compiler.steps import State
from dmesh.ops.compiler.trace import StandIn, Trace, tracing

__all__ = ["Compiled", "compile"]

R = TypeVar("R")
CACHE_SIZE = 64  # plans kept per compiled function (specs hold meshes: bounded)
# ``segments="auto"`` weighs a segmented signature on its first calls: this many run in
# segments (the first records and plans, the next replay, scalars read ahead), then this
# many eagerly; the faster way (the slowest rank's best time) is kept.
SEGMENT_TRIAL = 3
EAGER_TRIAL = 2
SEGMENT_POLICIES = ("auto", "always")
_CONSTANTS = (int, float, complex, bool, str, bytes, type(None), np.generic, np.dtype)


class _Out:
    """Where an output DArray goes in the returned structure: the plan's output ``index``."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


@dataclass
class Entry:
    """What one signature runs: a plan (with its mesh communicator), or eagerly (a reason)."""

    plan: Plan | None
    template: Any = None  # the returned structure, outputs as _Out
    comm: Any = None
    eager: str | None = None  # why this signature runs eagerly (or in segments)
    segments: State | None = None  # where a broken trace's segments are recorded
    mesh: Any = None
    build: Any = None  # (output blocks, argument DArrays) -> the returned structure
    log: Log = field(default_factory=Log)  # a segmented call's events, for the next one
    runs: int = 0  # calls run in segments
    # segments="auto"'s trial: the best segmented and eager times so far, and the eager
    # calls made; None once decided (or not weighed: scalars were read together)
    trial: list[float] | None = field(default_factory=lambda: [math.inf, math.inf, 0.0])


class Compiled(Generic[R]):
    """A compiled function: call it as ``fn``; plans are cached per call signature."""

    def __init__(
        self, fn: Callable[..., R], cache_size: int = CACHE_SIZE, segments: str = "auto"
    ) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.cache_size = cache_size
        self.segments = _policy(segments)
        self.plans: OrderedDict[Any, Entry] = OrderedDict()
        self.traces = 0  # how many times fn was traced
        self.evictions = 0  # plans dropped from the full cache
        self.breaks: list[str] = []  # graph-break reasons, most recent last
        self.segment_runs = 0  # segments run by calls whose trace broke
        self.free = FreeValues(fn)  # constants read from closures, globals, self: keyed

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        """``@dmesh.compile`` on a method: ``obj.method`` binds ``obj`` as ``self``."""
        if instance is None:
            return self
        return _Bound(self, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return self._call(args, kwargs, getattr(self.fn, "__self__", None))

    def _key(self, args: Any, kwargs: dict[str, Any], instance: Any, bound: bool) -> Any:
        """The cache key and the DArray arguments. A bound method's ``self`` (``args[0]``)
        enters by its type and the constants it holds that the code names (``free``)."""
        if bound:
            key, leaves = signature(args[1:], kwargs)
            key = (type(instance), key)
        else:
            key, leaves = signature(args, kwargs)
        return (key, self.free.key(instance)), leaves

    def _call(self, args: Any, kwargs: dict[str, Any], instance: Any, bound: bool = False) -> R:
        try:
            key, leaves = self._key(args, kwargs, instance, bound)
        except Unkeyable:
            return self.fn(*args, **kwargs)  # no cache key: the plain call
        if not leaves:
            return self.fn(*args, **kwargs)  # no DArray: nothing to compile
        if _hooks.recorder is not None and any(isinstance(x, StandIn) for x in leaves):
            # Called while another compiled function traces: inlined into its trace, so
            # the outer plan holds these ops too and tracing still sends no message.
            return self.fn(*args, **kwargs)
        entry = self.plans.get(key)
        if entry is None:
            return self._first(key, leaves, args, kwargs)
        self.plans.move_to_end(key)  # the least recently used plan is evicted first
        plan = entry.plan
        if plan is None:
            if entry.segments is not None:
                if entry.runs >= SEGMENT_TRIAL and entry.trial is not None:
                    return self._eager_trial(entry, args, kwargs)
                return self._segmented(entry, args, kwargs, leaves)
            return self.fn(*args, **kwargs)
        outputs = plan.run([x._local for x in leaves])
        return self._result(entry, plan, outputs, leaves)  # type: ignore[no-any-return]

    def describe_plan(self, *args: Any, **kwargs: Any) -> str:
        """What a call with these arguments runs (no communication): the compiled plan,
        why it runs eagerly, or that it was not traced yet (:func:`dmesh.debug.explain`)."""
        return self._describe(args, kwargs, getattr(self.fn, "__self__", None))

    def _describe(
        self, args: Any, kwargs: dict[str, Any], instance: Any, bound: bool = False
    ) -> str:
        try:
            key, _ = self._key(args, kwargs, instance, bound)
        except Unkeyable as exc:
            return f"runs eagerly: an argument cannot key the cache ({exc})"
        entry = self.plans.get(key)
        if entry is None:
            return "not traced for these arguments' signature yet"
        if entry.segments is not None:
            plans = entry.segments.plans()
            lines = [
                f"graph break ({entry.eager}): runs in segments, each compiled; "
                f"{len(plans)} segment plan(s) so far"
            ]
            for k, plan in enumerate(plans):
                lines += [f"segment {k}:", plan.describe()]
            return "\n".join(lines)
        if entry.plan is None:
            return f"runs eagerly: {entry.eager}"
        evicted = f"\n({self.evictions} plan(s) evicted from the full cache)"
        return entry.plan.describe() + (evicted if self.evictions else "")

    def _first(self, key: Any, leaves: list[DArray], args: Any, kwargs: dict[str, Any]) -> R:
        """Trace, agree, keep the entry, run it (checked)."""
        mesh = leaves[0].mesh
        if any(x.mesh is not mesh for x in leaves):
            return self._eager(key, Entry(None, eager="DArrays on several meshes"), args, kwargs)
        if not mesh.is_member:  # nothing to agree with: this rank holds no blocks
            return self._eager(
                key, Entry(None, eager="this rank is outside the mesh"), args, kwargs
            )
        self.traces += 1
        trace = Trace()
        stand_ins = iter([trace.stand_in(x.spec) for x in leaves])
        template = None
        with tracing(trace):
            try:
                out = self.fn(
                    *rebuild(args, lambda _: next(stand_ins)),
                    **rebuild(kwargs, lambda _: next(stand_ins)),
                )
                outputs: list[int] = []
                template = _template(out, trace, outputs)
            except GraphBreak:
                pass
            except Exception as exc:
                trace.broken = trace.broken or f"tracing raised {type(exc).__name__}"
        lines = trace.descriptions()
        if trace.broken is None:
            lines.append(f"outputs {outputs}")
        comm = mesh.comm()
        agree(comm, lines, getattr(self.fn, "__qualname__", repr(self.fn)))
        if trace.broken is not None:
            self.breaks.append(trace.broken)
            entry = Entry(None, None, comm, trace.broken, State(Trace(), ()), mesh)
            self._keep(key, entry)
            return self._segmented(entry, args, kwargs, leaves)
        plan = Plan(trace, list(range(len(leaves))), outputs)
        entry = Entry(plan, template, comm)
        self._keep(key, entry)
        blocks = plan.run_checked([x._local for x in leaves], comm)
        return self._result(entry, plan, blocks, leaves)  # type: ignore[no-any-return]

    def _segmented(
        self, entry: Entry, args: Any, kwargs: dict[str, Any], leaves: list[DArray]
    ) -> R:
        """Run ``fn`` with its ops recorded into segments, each run as one compiled plan
        (:mod:`~dmesh.ops.compiler.segments`), scalars read together where the last call
        read them (:mod:`~dmesh.ops.compiler.scalars`)."""
        assert entry.segments is not None
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        reads = Reads(entry.log, leaves)
        session = Segments(entry.segments, entry.comm, entry.mesh, name, reads)
        start = time.perf_counter()
        with session:
            try:
                out = self.fn(*args, **kwargs)
                session.flush()
                reads.finish()
            except BaseException:
                session.abandon()
                raise
            finally:
                session.reads = None  # reads of its arrays after the call: eager ones
        self.segment_runs += session.runs
        entry.runs += 1
        if entry.trial is not None:
            if self.segments != "auto" or entry.log.joined:
                entry.trial = None  # kept: always, or scalars were read together
            elif entry.runs > 1:  # (the first call records: not timed)
                entry.trial[0] = min(entry.trial[0], time.perf_counter() - start)
        return rebuild(out, _plain)  # type: ignore[no-any-return]

    def _eager_trial(self, entry: Entry, args: Any, kwargs: dict[str, Any]) -> R:
        """An eager call of a segmented signature, timed; after ``EAGER_TRIAL`` of them the
        ranks keep the faster way (one collective, on every rank at the same call)."""
        trial = entry.trial
        assert trial is not None
        start = time.perf_counter()
        out = self.fn(*args, **kwargs)
        trial[1] = min(trial[1], time.perf_counter() - start)
        trial[2] += 1
        if trial[2] >= EAGER_TRIAL:
            slowest = np.array(trial[:2])
            entry.comm.Allreduce(MPI.IN_PLACE, slowest, op=MPI.MAX)
            entry.trial = None
            if slowest[1] < slowest[0]:
                # Recording each op costs more than dispatching it: segments pay only where
                # their plans save collectives worth more than that.
                entry.eager = (
                    f"{entry.eager}; eager calls took {slowest[1] * 1e3:.3g} ms, segmented "
                    f"ones {slowest[0] * 1e3:.3g} ms, so it runs eagerly"
                )
                entry.segments = None
        return out

    def _eager(self, key: Any, entry: Entry, args: Any, kwargs: dict[str, Any]) -> R:
        self._keep(key, entry)
        return self.fn(*args, **kwargs)

    def _keep(self, key: Any, entry: Entry) -> None:
        if len(self.plans) >= self.cache_size:
            self.plans.popitem(last=False)
            self.evictions += 1
        self.plans[key] = entry

    @staticmethod
    def _result(entry: Entry, plan: Plan, blocks: tuple[Any, ...], leaves: list[DArray]) -> Any:
        """The returned structure: argument outputs as the arguments, the others wrapped."""
        if entry.build is None:
            entry.build = _builder(entry.template, plan)
        return entry.build(blocks, leaves)


class _Bound:
    """A compiled method bound to its instance (``obj.method`` of ``@dmesh.compile``)."""

    __slots__ = ("compiled", "instance")

    def __init__(self, compiled: Compiled[Any], instance: Any) -> None:
        self.compiled = compiled
        self.instance = instance

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.compiled._call((self.instance, *args), kwargs, self.instance, True)

    def describe_plan(self, *args: Any, **kwargs: Any) -> str:
        """As :meth:`Compiled.describe_plan`, for this instance."""
        return self.compiled._describe((self.instance, *args), kwargs, self.instance, True)

    def __getattr__(self, name: str) -> Any:  # traces, breaks, plans... of the function
        return getattr(self.compiled, name)


def _policy(segments: Any) -> str:
    """``segments`` when it is a policy, else the ValueError saying which are."""
    if segments not in SEGMENT_POLICIES:
        raise ValueError(
            f"dmesh.compile: segments={segments!r} is not a policy; use 'auto' (a segmented "
            "signature keeps segments only where they were faster than eager calls) or "
            "'always'"
        )
    return str(segments)


def _plain(x: DArray) -> DArray:
    """A returned lazy array as a plain DArray (its segment ran)."""
    return DArray(x._local, x.spec) if isinstance(x, LazyArray) else x


def _template(out: Any, trace: Trace, outputs: list[int]) -> Any:
    """``out`` with each traced DArray as an :class:`_Out` (its slot kept in ``outputs``)."""
    if isinstance(out, StandIn) and out._trace is trace:
        if out._slot not in outputs:
            outputs.append(out._slot)
        return _Out(outputs.index(out._slot))
    if isinstance(out, DArray):
        trace.graph_break(f"returns a DArray that is neither an argument nor computed ({out!r})")
    kind = type(out)
    if kind is tuple or kind is list:
        return kind(_template(x, trace, outputs) for x in out)
    if kind is dict:
        return {k: _template(v, trace, outputs) for k, v in out.items()}
    if isinstance(out, _CONSTANTS):
        return out
    trace.graph_break(f"returns a {kind.__name__} (not a DArray, container or Python scalar)")


def _builder(template: Any, plan: Plan) -> Any:
    """A generated function ``(output blocks, argument DArrays) -> the returned structure``:
    arguments returned as themselves, each other output wrapped once with its spec."""
    n = len(plan.inputs)
    space: dict[str, Any] = {"DArray": DArray}
    lines = ["def build(blocks, leaves):"]
    for i, slot in enumerate(plan.outputs):
        if slot < n:
            lines.append(f"    o{i} = leaves[{slot}]")
        else:
            space[f"S{i}"] = plan.specs[slot]
            lines.append(f"    o{i} = DArray(blocks[{i}], S{i})")

    def expression(t: Any) -> str:
        if type(t) is _Out:
            return f"o{t.index}"
        kind = type(t)
        if kind is tuple:
            return "(" + "".join(f"{expression(x)}, " for x in t) + ")"
        if kind is list:
            return "[" + ", ".join(expression(x) for x in t) + "]"
        if kind is dict:
            space[f"k{len(space)}"] = list(t)
            keys = f"k{len(space) - 1}"
            items = ", ".join(f"{keys}[{j}]: {expression(v)}" for j, v in enumerate(t.values()))
            return "{" + items + "}"
        space[f"c{len(space)}"] = t
        return f"c{len(space) - 1}"

    lines.append(f"    return {expression(template)}")
    exec("\n".join(lines), space)
    return space["build"]


@overload
def compile(fn: Callable[..., R], *, cache_size: int = ..., segments: str = ...) -> Compiled[R]: ...
@overload
def compile(
    *, cache_size: int = CACHE_SIZE, segments: str = "auto"
) -> Callable[[Callable[..., R]], Compiled[R]]: ...
def compile(fn: Any = None, *, cache_size: int = CACHE_SIZE, segments: str = "auto") -> Any:
    """Compile ``fn``: trace it once per signature, agree the plan across ranks, replay it.

    Use as ``dmesh.compile(fn)``, ``@dmesh.compile`` or
    ``@dmesh.compile(cache_size=8)``. The first call with a given signature
    (each DArray argument's spec; every other argument's value) traces ``fn``
    on stand-ins that carry specs and no data, so tracing sends no message;
    the ranks of the arguments' mesh then compare their plans in one
    collective (:class:`~dmesh.ops.compiler.errors.PlanMismatchError` on every
    rank if they differ). Later calls with that signature replay the plan on
    the blocks. What cannot be traced (reading a value, a mask, a kernel
    that reads blocks, a DArray that is not an argument) makes that
    signature run in segments: ``fn`` runs at each call, its ops between two
    such breaks as one compiled plan, the breaks eagerly, with the same
    results. Recording costs more per op than eager dispatch, so segments pay
    only where their plans save collectives worth more than that: with
    ``segments="auto"`` (the default) a segmented signature runs its first
    three calls in segments and the next two eagerly, and keeps the faster
    way (the slowest rank's best time, agreed in one collective;
    ``describe_plan`` says which), except that one whose scalars were read
    together keeps its segments; ``segments="always"`` keeps them. Side
    effects of ``fn`` (prints, appends) happen while tracing, not when a plan
    replays (in segments, at every call).

    Values ``fn`` reads from its closure, from module globals or from
    ``self``'s attributes (by the names its code uses) are constants of the
    plan, checked at every call: a changed one retraces. Values read further
    away (in other functions ``fn`` calls, items of containers, attributes
    of other objects) are not checked: pass those as arguments.

    Every rank must pass constants of equal value (the specs of DArrays agree
    by construction). A rank-dependent constant is caught by the plan
    agreement when it makes every rank trace; it is not when some ranks
    already hold a plan for their value and others trace (the ranks then
    run different collectives).
    """
    if fn is None:
        _policy(segments)  # (a bad one raises at the decorator, not at its use)
        return lambda f: Compiled(f, cache_size, segments)
    return Compiled(fn, cache_size, segments)
