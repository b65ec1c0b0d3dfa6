"""Scalars read together: the values of 0-d results reduced one MPI call per reduce op.

A segmented function (:mod:`~dmesh.ops.compiler.segments`) that reads several
scalars (``float(np.sum(a))``, ``b.max().item()``, ``full_array()`` of a
one-element result) breaks at each: Python needs the first value before it
even calls the op of the second, so each read alone would be one
``Allreduce`` of the partial terms, as eagerly. Reading needs knowledge from
an earlier call, so each call of a signature keeps a log (:class:`Log`) of
what its session did, in order:

- ``("seg", state, origins)``: a segment ran, from the recorded ``State``,
  each input coming from ``(ARG, k)`` (the ``k``-th DArray argument),
  ``(OUT, n, slot)`` (output ``slot`` of this call's segment ``n``) or
  ``(UNKNOWN,)`` (anything else: a closure's array, a break's result);
- ``("read", n, slot)``: the value of output ``slot`` of segment ``n`` was
  read, and it is one ``Allreduce`` of partial terms;
- ``("barrier",)``: anything else that may read or write a block (a write,
  an op run eagerly, ``a.local``): nothing is computed ahead across it.

A later call compares its events with the log as they come. While they are
equal, a read that must communicate looks ahead in the log, up to the next
barrier: the segments recorded to follow whose inputs are ready now (the
arguments, outputs of segments this call ran) are run now, with their plans,
and the reads of those, and of segments already run, join this read's
reduction: one call per (communicator, op, dtype), ``min`` joining ``max``
through an order-reversing map (``-x`` for floats, ``~x`` for integers and
bools; exact, so the bits are eager's). The results are kept for when the
call's events reach them, and used only if everything up to there was equal
(same ``State``, so the same ops and constants, on the same objects, with no
barrier between): Python taking another path (a branch on a value, a
constant that changed) discards them. A position where a call differed from
the one before is *unstable*: no later call looks ahead past it, so a
data-dependent branch costs one wasted look-ahead, not one per call.

Every decision depends on the log and the events, which depend on specs and
on the values read (the same on every rank): all ranks make the same MPI
calls in the same order. Packed float sums stay within ``SHORT_MESSAGE``
(MPICH's algorithm, hence the order of the terms, depends on the size).
A block written behind dmesh's back (through an ndarray kept from before the
call) between two reads is not seen: the value read ahead is the earlier one.
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from dmesh.collectives import tracing
from dmesh.collectives.reduce_ops import canonical_nan, reduce_plan
from dmesh.core.placement import Partial
from dmesh.ops.compiler.packed_reduce import PackedReduce
from dmesh.ops.compiler.packing import SHORT_MESSAGE
from dmesh.scalar_routes import GATHER, LOCAL, reduce_terms, route_of, routes

if TYPE_CHECKING:
    from dmesh.ops.compiler.lazy import LazyArray
    from dmesh.ops.compiler.steps import State

__all__ = ["ARG", "OUT", "UNKNOWN", "Log", "Reads", "reduction_route"]

ARG, OUT, UNKNOWN = "arg", "out", "?"
LOG_LIMIT = 1024  # events one call logs (a loop of breaks is not kept whole)
PACK_LIMIT = 256  # reads one look-ahead takes


class Log:
    """What a signature's last call did (its events), and where calls differed."""

    __slots__ = ("events", "joined", "unstable")

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.unstable: set[int] = set()
        self.joined = 0  # reads joined to an earlier one's reduction (calls saved), all calls


def reduction_route(spec: Any) -> Any:
    """The route of a one-element ``spec`` when its value is one reduction of partial terms
    (``(communicator, ReducePlan)``), else None (no communication, or the general path)."""
    if math.prod(spec.shape) != 1 or spec.mesh.closed:
        return None
    route = routes.get(spec)
    if route is None:
        route = route_of(spec)
    return None if route is LOCAL or route is GATHER else route


def _same(known: tuple[Any, ...], event: tuple[Any, ...]) -> bool:
    if known[0] != event[0]:
        return False
    if event[0] == "seg":
        return known[1] is event[1] and known[2] == event[2]
    return known == event


class Reads:
    """One call's events, and the segments and values it computed ahead."""

    def __init__(self, log: Log, leaves: list[Any]) -> None:
        self.log = log
        self.known = log.events  # the last call's events (replaced when this one ends)
        self.events: list[tuple[Any, ...]] = []
        self.matched = True  # this call's events so far are the known ones
        self.leaves = leaves
        self.origins: dict[int, tuple[Any, ...]] = {}
        for k, leaf in enumerate(leaves):
            self.origins.setdefault(id(leaf), (ARG, k))
        self.outputs: dict[int, tuple[weakref.ref[Any], tuple[Any, ...]]] = {}  # id -> origin
        self.segments: list[dict[int, weakref.ref[Any]]] = []  # n -> slot -> a lazy array
        self.ahead: dict[int, tuple[int, tuple[Any, ...]]] = {}  # n -> (position, outputs)
        self.values: dict[int, Any] = {}  # a read's position -> its value

    # -- events ----------------------------------------------------------------------
    def _event(self, event: tuple[Any, ...]) -> int | None:
        """Log ``event``: its position while this call matches the known one, else None."""
        pos = len(self.events)
        if pos >= LOG_LIMIT:
            self._diverge(None)
            return None
        if self.events and event[0] == "barrier" == self.events[-1][0]:
            return pos - 1  # one barrier stands for several
        self.events.append(event)
        if not self.matched:
            return None
        if pos < len(self.known) and _same(self.known[pos], event):
            return pos
        self._diverge(pos if pos < len(self.known) else None)
        return None

    def _diverge(self, pos: int | None) -> None:
        if pos is not None:
            self.log.unstable.add(pos)
        self.matched = False
        self.ahead.clear()
        self.values.clear()

    def barrier(self) -> None:
        """Something may read or write blocks: nothing is used ahead across it."""
        self._event(("barrier",))

    def origins_of(self, inputs: list[Any]) -> tuple[tuple[Any, ...], ...]:
        """Where each of a segment's input DArrays comes from (see the module docstring)."""
        found = []
        for x in inputs:
            origin = self.origins.get(id(x))
            if origin is None:
                held = self.outputs.get(id(x))
                origin = held[1] if held is not None and held[0]() is x else (UNKNOWN,)
            found.append(origin)
        return tuple(found)

    def segment(self, state: State, inputs: list[Any]) -> tuple[int, Any]:
        """Log a segment about to run: (its number, its output blocks when computed ahead,
        else None)."""
        n = len(self.segments)
        self.segments.append({})
        pos = self._event(("seg", state, self.origins_of(inputs)))
        ahead = self.ahead.pop(n, None)
        if pos is None or ahead is None or ahead[0] != pos:
            return n, None
        return n, ahead[1]

    def ran(self, n: int, slot: int, lazy: LazyArray) -> None:
        """Lazy array ``lazy`` holds output ``slot`` of segment ``n`` (its block is set)."""
        if len(self.outputs) >= 4 * LOG_LIMIT:
            return  # (ids of arrays long gone are not kept without bound)
        ref = weakref.ref(lazy)
        self.segments[n].setdefault(slot, ref)
        self.outputs[id(lazy)] = (ref, (OUT, n, slot))

    def read(self, lazy: LazyArray, route: Any) -> Any:
        """The reduced block of ``lazy`` (its segment ran), by ``route``: computed ahead, or
        reduced now with the reads the log says come next (collective)."""
        held = self.outputs.get(id(lazy))
        if held is None or held[0]() is not lazy:
            return reduce_terms(lazy._block, route)
        _, n, slot = held[1]
        pos = self._event(("read", n, slot))
        if pos is None:
            return reduce_terms(lazy._block, route)
        value = self.values.pop(pos, None)
        if value is not None:
            return value
        later = self._look_ahead(pos)
        self.log.joined += len(later)
        values = _reduce([(lazy._block, lazy._spec, route)] + [(b, s, r) for _, b, s, r in later])
        for (p, *_), v in zip(later, values[1:]):
            self.values[p] = v
        return values[0]

    def finish(self) -> None:
        """The call returned: its events are what the next call expects."""
        self.log.events = self.events
        self.ahead.clear()
        self.values.clear()

    # -- looking ahead -----------------------------------------------------------------
    def _look_ahead(self, pos: int) -> list[tuple[int, Any, Any, Any]]:
        """The known reads after ``pos`` (to the next barrier) whose values are ready now:
        ``(position, block, spec, route)``; the segments they need are run (collective)."""
        known, n = self.known, len(self.segments)
        planned: dict[int, tuple[int, State, tuple[Any, ...]]] = {}
        wanted: list[tuple[int, int, int, Any, Any]] = []
        for p in range(pos + 1, len(known)):
            event = known[p]
            if event[0] == "barrier" or p in self.log.unstable or len(wanted) >= PACK_LIMIT:
                break
            if event[0] == "seg":
                state, origins = event[1], event[2]
                if state.plan is not None and all(self._ready(o, planned) for o in origins):
                    planned[n] = (p, state, origins)
                n += 1
                continue
            _, m, slot = event
            if p in self.values:
                continue
            if m in planned:
                ahead_plan = planned[m][1].plan
                if ahead_plan is None or slot not in ahead_plan.outputs:  # (not handed back)
                    continue
                spec = planned[m][1].trace.specs[slot]
            elif m < len(self.segments) and slot in self.segments[m]:
                lazy = self.segments[m][slot]()
                if lazy is None or lazy._block is None:
                    continue
                spec = lazy._spec
            else:
                continue
            route = reduction_route(spec)
            if route is not None:
                wanted.append((p, m, slot, spec, route))
        outputs = self._run_ahead(planned, {m for _, m, *_ in wanted})
        later = []
        for p, m, slot, spec, route in wanted:
            if m in planned:
                plan = planned[m][1].plan
                block = outputs[m][plan.outputs.index(slot)]  # type: ignore[union-attr]
            else:
                block = self.segments[m][slot]()._block  # type: ignore[union-attr]
            later.append((p, block, spec, route))
        return later

    def _ready(self, origin: tuple[Any, ...], planned: dict[int, Any]) -> bool:
        if origin[0] == ARG:
            return True
        if origin[0] != OUT:
            return False
        _, m, slot = origin
        if m in planned:
            return slot in planned[m][1].plan.outputs
        if m < len(self.segments):
            ref = self.segments[m].get(slot)
            lazy = ref() if ref is not None else None
            return lazy is not None and lazy._block is not None
        return False

    def _run_ahead(
        self, planned: dict[int, tuple[int, State, tuple[Any, ...]]], needed: set[int]
    ) -> dict[int, tuple[Any, ...]]:
        """Run the planned segments the wanted reads need (and those these need), in order;
        each one's outputs are kept for when the call reaches it."""
        for m in sorted(planned, reverse=True):
            if m in needed:
                needed.update(o[1] for o in planned[m][2] if o[0] == OUT and o[1] in planned)
        outputs: dict[int, tuple[Any, ...]] = {}
        for m in sorted(needed & planned.keys()):
            p, state, origins = planned[m]
            blocks = [self._block(o, planned, outputs) for o in origins]
            outputs[m] = state.plan.run(blocks)  # type: ignore[union-attr]
            self.ahead[m] = (p, outputs[m])
        return outputs

    def _block(
        self, origin: tuple[Any, ...], planned: dict[int, Any], outputs: dict[int, Any]
    ) -> Any:
        if origin[0] == ARG:
            return self.leaves[origin[1]]._local
        _, m, slot = origin
        if m in outputs:
            return outputs[m][planned[m][1].plan.outputs.index(slot)]
        return self.segments[m][slot]()._local


def _reduce(reads: list[tuple[Any, Any, Any]]) -> list[Any]:
    """Each ``(block, spec, route)``'s reduced block, one MPI call per (mesh dims, op, dtype)
    (``min`` with ``max``), float sums in packs of at most ``SHORT_MESSAGE`` bytes; in
    order of first appearance, so every rank makes the same calls (collective)."""
    groups: dict[Any, list[int]] = {}
    for i, (_, spec, route) in enumerate(reads):
        plan = route[1]
        op = "max" if plan.op == "min" and spec.dtype.kind in "fiub" else plan.op
        partial = tuple(m for m, p in enumerate(spec.placements) if isinstance(p, Partial))
        groups.setdefault((spec.mesh, partial, op, spec.dtype.char), []).append(i)
    results: list[Any] = [None] * len(reads)
    for (_, _, op, _), members in groups.items():
        for pack in _packs(reads, members, op):
            _reduce_pack(reads, pack, op, results)
    return results


def _packs(reads: list[Any], members: list[int], op: str) -> list[list[int]]:
    dtype = reads[members[0]][1].dtype
    if op in ("max", "min") or dtype.kind in "biu":
        return [members]  # exact: any pack has the separate calls' bits
    per = max(1, SHORT_MESSAGE // dtype.itemsize)
    return [members[k : k + per] for k in range(0, len(members), per)]


def _reduce_pack(reads: list[Any], pack: list[int], op: str, results: list[Any]) -> None:
    """Reduce the reads ``pack`` (same mesh dims, op and dtype) in one call into ``results``."""
    reversed_ = [reads[i][2][1].op == "min" and op == "max" for i in pack]
    if len(pack) == 1 and not reversed_[0]:
        block, _, route = reads[pack[0]]
        results[pack[0]] = reduce_terms(block, route)
        return
    blocks = [_flip(reads[i][0]) if r else reads[i][0] for i, r in zip(pack, reversed_)]
    _, spec, route = reads[pack[0]]
    if all(type(b) is np.ndarray for b in blocks):
        values = _allreduce(route[0], reduce_plan(op, spec.dtype), blocks)
    else:  # device blocks: the coalesced collective's transports
        packed = _packed(route[0], op, spec.dtype, tuple(np.shape(b) for b in blocks))
        values = [v.copy() for v in packed.finish(packed.start(blocks, False))]
    for i, value, r in zip(pack, values, reversed_):
        if r:
            value = _flip(value)
            if value.dtype.kind in "fc":
                value = canonical_nan(value)
        results[i] = value


def _allreduce(comm: Any, plan: Any, blocks: list[np.ndarray]) -> list[np.ndarray]:
    """One-element NumPy ``blocks`` all-reduced in one ``Allreduce``: the buffer
    ``PackedReduce`` makes (the same bits), without its general packing."""
    send = np.empty(len(blocks), plan.wire)
    for k, b in enumerate(blocks):
        send[k] = b.reshape(())
    recv = np.empty_like(send)
    if tracing.hooked:  # CommMode and explain count it as the one call it is
        tracing.direct("all_reduce_coalesced", comm, send.nbytes, recv.nbytes)
    comm.Allreduce([send, plan.datatype], [recv, plan.datatype], plan.mpi_op)
    flat = plan.finish(recv, comm.Get_size())
    return [flat[k : k + 1].reshape(b.shape).copy() for k, b in enumerate(blocks)]


_PACKS: dict[Any, tuple[Any, PackedReduce]] = {}  # bounded: communicators stay alive


def _packed(comm: Any, op: str, dtype: np.dtype, shapes: tuple[Any, ...]) -> PackedReduce:
    """The :class:`PackedReduce` of a pack, made once (its layout is worked out there)."""
    key = (id(comm), op, dtype.char, shapes)
    held = _PACKS.get(key)
    if held is not None and held[0] is comm:
        return held[1]
    if len(_PACKS) >= PACK_LIMIT:
        _PACKS.clear()
    packed = PackedReduce(comm, op, dtype, -1, list(shapes))
    _PACKS[key] = (comm, packed)
    return packed


def _flip(x: Any) -> Any:
    """An order-reversing exact map, its own inverse: ``min(x) = flip(max(flip(x)))``
    (``-x`` for floats, NaN kept; ``~x`` for integers, two's complement, and bools).
    A new array (a 0-d one stays an array, as a block must)."""
    y = x.copy()
    (np.negative if x.dtype.kind == "f" else np.invert)(y, out=y)
    return y
