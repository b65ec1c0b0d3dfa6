"""Replay: run a recorded plan straight on the blocks.

A ``Plan`` is the nodes of a trace turned into one generated Python
function over blocks (``v3 = f3(v0, v1)``, ``v4 = r4(f4, [v3], k4)``): no
parsing, no propagation, no cache lookup and no DArray between ops. Operands
whose recorded decision moves them are redistributed
(``DArray.with_layout``) where the node needs them; the outputs are wrapped
once, with the recorded specs.

The first run after tracing is *checked* (``Plan.run_checked``): it walks
the nodes one by one and compares each block's dtype with the traced one,
the ranks vote on the outcome, and a difference raises
``dmesh.ops.compiler.errors.ReplayError`` on every rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from dmesh.collectives.agreement import raise_if_any_failed
from dmesh.collectives.errors import ShardingError
from dmesh.core.layout import Layout
from dmesh.core.plan import estimate_cost, plan_redistribution
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.compiler.errors import ReplayError
from dmesh.ops.compiler.node_kinds import performer, reuses, shifted
from dmesh.ops.compiler.packed_gather import PackedGather
from dmesh.ops.compiler.packed_reduce import PackedReduce
from dmesh.ops.compiler.packing import Gather, Reduction, packable, packs_with, reduce_many, wait
from dmesh.ops.compiler.registers import released
from dmesh.ops.compiler.trace import Trace, same_block
from dmesh.redistribution import run_steps

__all__ = ["Plan"]


def _move(block: Any, spec: DArraySpec, target: Layout) -> Any:
    """``block`` (of an array of ``spec``) in ``target``'s layout (collective)."""
    return DArray(block, spec).with_layout(target)._local


def _has_partial(spec: DArraySpec) -> bool:
    return any(p.is_partial() for p in spec.placements)


def _as_block(result: Any) -> Any:
    """A 0-d result as an array, as the pipeline's wrap makes it (NumPy gives scalars)."""
    if type(result) is not np.ndarray and (
        isinstance(result, np.generic) or not hasattr(result, "shape")
    ):
        return np.asarray(result)
    return result


class Plan:
    """The replayable form of a trace: inputs, nodes, outputs and the generated function."""

    def __init__(self, trace: Trace, inputs: list[int], outputs: list[int]) -> None:
        # Every slot's spec (constants' slots hold none and are never moved nor wrapped).
        self.specs = cast(list[DArraySpec], list(trace.specs))
        self.constants = dict(trace.constants)
        self.nodes = list(trace.nodes)
        self.inputs = inputs  # the slots the blocks passed to ``run`` fill, in order
        self.outputs = outputs
        self.dropped: list[str] = []  # what the generated function leaves out, and why
        # Collectives eager calls of these ops would make that the plan does not (moves
        # there and back dropped, unused results' moves, reductions packed into one call).
        self.saved = 0
        self._made_in: dict[int, int] = {}  # a redistribution's result slot -> its epoch
        self._barrier = 0
        self._names = 0  # moved blocks named so far (m0, m1...)
        self.function = self._generate()

    def _generate(self) -> Callable[..., tuple[Any, ...]]:
        """One Python function from the argument blocks to the output blocks.

        A move is made once per (slot, layout), at the first node that needs it.
        Reductions (``Partial`` to ``Replicate`` or ``Shard``) are coalesced: when a
        node needs one, every other reduction of the plan of the same kind (mesh
        dim, op, dtype, axis) whose source is already computed is made in the same MPI call
        (float sums while the pack stays a short message, see ``SHORT_MESSAGE``).
        """
        space: dict[str, Any] = {
            "_run_steps": run_steps,
            "_as_block": _as_block,
            "_reduce": reduce_many,
            "_wait": wait,
        }
        for slot, value in self.constants.items():
            space[f"k{slot}"] = value  # (a global: the locals are renamed, _registers)
        lines = [f"def plan({', '.join(f'v{i}' for i in self.inputs)}):"]
        epochs = self._epochs()
        operands = self._undo_moves(epochs)
        live = self._live(operands)
        # Per epoch (the ops between two writes): the moves its ops need, which one call
        # may pack (a move is never made before a write and used after it).
        moves: list[list[tuple[int, int, Layout, Reduction | Gather | None]]] = [
            [] for _ in range(epochs[-1] + 1)
        ]
        for k in sorted(live):
            if not shifted(self.nodes[k]):  # (eager's call makes those moves itself)
                moves[epochs[k]] += [
                    (k, slot, target, packable(self.specs[slot], target))
                    for slot, target in operands[k]
                    if target is not None
                ]
        self._barrier = 0  # the line of the last write: nothing starts above it
        made: dict[tuple[int, Layout], str] = {}  # (slot, target) -> the moved block's name
        ready = set(self.inputs) | set(self.constants)
        defined = dict.fromkeys(ready, 1)  # slot -> the line after which it exists
        starts: dict[int, list[str]] = {}  # line -> non-blocking starts to insert there
        # A redistribution's move is made where its result is first used (a started
        # collective is then waited for there, not at the redistribute call).
        deferred: dict[int, tuple[int, Layout | None]] = {}

        def name_of(k: int, slot: int, target: Layout | None) -> str:
            if slot in deferred:
                source, moved = deferred[slot]
                if target is None:
                    return name_of(k, source, moved)
                del deferred[slot]  # to move on from it, its block first
                lines.append(f"    v{slot} = {name_of(k, source, moved)}")
                ready.add(slot)
                defined[slot] = len(lines)
            if target is None:
                return f"k{slot}" if slot in self.constants else f"v{slot}"
            if (slot, target) not in made:
                self._make(
                    slot, target, moves[epochs[k]], made, ready, space, lines, defined, starts
                )
            return made[(slot, target)]

        order = self._schedule(operands, epochs)
        donors = reuses(self.nodes, self.specs, self.outputs, order, operands, live)
        for k in order:
            node = self.nodes[k]
            if k not in live:
                self.dropped.append(f"[{k}] {node.label}: its result is not used")
                self.saved += sum(t is not None for t in node.moves)
                continue
            if node.func is same_block:
                deferred[node.out] = operands[k][0]
                continue
            if node.writes:
                # A write: the redistributions recorded before it are made now (from the
                # values before it), and no move made before it serves after it.
                for slot in list(deferred):
                    source, moved = deferred.pop(slot)
                    lines.append(f"    v{slot} = {name_of(k, source, moved)}")
                    ready.add(slot)
                    defined[slot] = len(lines)
                made.clear()
            if shifted(node):
                # Moves that are crops of the rank's own block or shifted slices: eager's
                # pieces (only the crossing cells sent), not a whole block redistributed.
                names = [name_of(k, slot, None) for slot in node.slots]
                space[f"e{k}"] = performer(
                    node, [self.specs[s] for s in node.slots], donors.get(k, -1)
                )
                call = f"e{k}({', '.join(names)})"
            else:
                names = [name_of(k, slot, target) for slot, target in operands[k]]
                space[f"f{k}"] = node.func
                run = node.step.run if node.step is not None else None
                if k in donors:  # into a temporary no later op reads, as eager elision does
                    call = f"f{k}({', '.join(names)}, out={names[donors[k]]})"
                elif run is None:
                    call = f"f{k}({', '.join(names)})"
                else:
                    space[f"r{k}"] = run
                    space[f"c{k}"] = node.step.call  # type: ignore[union-attr]
                    call = f"r{k}(f{k}, [{', '.join(names)}], c{k})"
            if node.spec.ndim == 0:
                call = f"_as_block({call})"
            lines.append(f"    v{node.out} = {call}")
            ready.add(node.out)
            defined[node.out] = len(lines)
            if node.writes:
                self._barrier = len(lines)
        results = [name_of(len(self.nodes), slot, None) for slot in self.outputs]
        lines.append(f"    return ({''.join(f'{r}, ' for r in results)})")
        for at in sorted(starts, reverse=True):
            lines[at:at] = starts[at]
        self.source = "\n".join(released(lines))
        exec(self.source, space)
        function: Callable[..., tuple[Any, ...]] = space["plan"]
        return function

    def _epochs(self) -> list[int]:
        """Per node, how many writes come before it in the trace (then one more entry: the
        outputs'); a write is the last node of its epoch."""
        epochs, epoch = [], 0
        for node in self.nodes:
            epochs.append(epoch)
            epoch += node.writes
        return [*epochs, epoch]

    def _undo_moves(self, epochs: list[int]) -> list[list[tuple[int, Layout | None]]]:
        """Each node's operands as (slot, move target or None), where an operand that a
        redistribution made is taken from an earlier array of the same values already in
        the layout the node needs (the move there and back is dropped; layouts without
        ``Partial`` only, whose blocks are exact copies of the values; no write between
        the redistribution and the use, which might have changed the earlier array)."""
        origin: dict[int, int] = {}  # a redistribution's result slot -> its source slot
        for k, node in enumerate(self.nodes):
            source = node.slots[0] if node.slots else -1
            if node.func is same_block and not (
                _has_partial(self.specs[source]) or _has_partial(node.spec)
            ):
                origin[node.out] = source
                self._made_in[node.out] = epochs[k]
        result = []
        for k, node in enumerate(self.nodes):
            if shifted(node):  # eager's own call, on the operands as recorded
                result.append(list(zip(node.slots, node.moves)))
                continue
            operands: list[tuple[int, Layout | None]] = []
            for slot, target in zip(node.slots, node.moves):
                want = target if target is not None else getattr(self.specs[slot], "layout", None)
                earlier = slot
                while earlier in origin and target is not None:
                    if self._made_in[earlier] != epochs[k]:
                        break
                    earlier = origin[earlier]
                    if self.specs[earlier].layout == want:
                        self.dropped.append(
                            f"[{k}] {node.label}: s{slot} moved back, s{earlier} used"
                        )
                        self.saved += 1
                        slot, target = earlier, None
                        break
                operands.append((slot, target))
            result.append(operands)
        return result

    def _schedule(
        self, operands: list[list[tuple[int, Layout | None]]], epochs: list[int]
    ) -> list[int]:
        """The order the nodes run in: epoch by epoch (the ops between two writes, then the
        write), and in each by how many moves deep each op is (then as traced).

        Ops are pure, so any order that respects the data gives the same values; this
        one computes everything that needs no communication first, so independent
        reductions are all ready, and packed, when the first of them is needed. A write
        changes a block in place: nothing is moved across it.
        """
        depth: dict[int, int] = {}
        order = []
        for k, (node, ops) in enumerate(zip(self.nodes, operands)):
            d = max((depth.get(s, 0) + (t is not None) for s, t in ops), default=0)
            depth[node.out] = d
            order.append((epochs[k], node.writes, d, k))
        return [k for *_, k in sorted(order)]

    def _live(self, operands: list[list[tuple[int, Layout | None]]]) -> set[int]:
        """The nodes whose results the outputs need (a node's result no one uses is dropped:
        ops are pure, and every rank drops the same ones)."""
        needed = set(self.outputs)
        live: set[int] = set()
        for k in reversed(range(len(self.nodes))):
            if self.nodes[k].out in needed or self.nodes[k].writes:  # (a write is an effect)
                live.add(k)
                needed.update(slot for slot, _ in operands[k])
        return live

    def describe(self) -> str:
        """The plan as text: each recorded op, then the generated replay (moves, packed
        reductions as one ``_reduce`` call, ops on blocks)."""
        ops = [f"  [{k}] {node.description}" for k, node in enumerate(self.nodes)]
        dropped = ["dropped:", *(f"  {d}" for d in self.dropped)] if self.dropped else []
        deferred = self._deferred()
        deferred = ["deferred:", *deferred] if deferred else []
        source = self.source.splitlines()[1:]
        return "\n".join(["ops:", *ops, *deferred, *dropped, "replay:", *source])

    def _deferred(self) -> list[str]:
        """Each ``Partial`` result kept unreduced until the op that needs its value."""
        made_by = {node.out: k for k, node in enumerate(self.nodes)}
        lines, seen = [], set()
        for k, node in enumerate(self.nodes):
            for slot, target in zip(node.slots, node.moves):
                if target is None or slot in seen or not _has_partial(self.specs[slot]):
                    continue
                seen.add(slot)
                origin = f"[{made_by[slot]}]" if slot in made_by else "the arguments"
                lines.append(
                    f"  s{slot}: partial from {origin}, reduced once for [{k}] {node.label}"
                )
        return lines

    def _make(
        self,
        slot: int,
        target: Layout,
        moves: list[tuple[int, int, Layout, Reduction | Gather | None]],
        made: dict[tuple[int, Layout], str],
        ready: set[int],
        space: dict[str, Any],
        lines: list[str],
        defined: dict[int, int],
        starts: dict[int, list[str]],
    ) -> None:
        """Emit the code that moves ``slot`` to ``target`` (with the reductions packed with
        it): a started collective's start goes after the line ``defined`` gives for its
        last operand (into ``starts``), its wait here."""
        name = f"m{self._names}"  # (a counter: made is cleared at each write)
        reduction = packable(self.specs[slot], target)
        if reduction is None:
            # The redistribution's steps, planned now (``DArray._moved`` would plan them
            # at every call); without steps (mesh dims of size 1) they copy the block.
            spec = self.specs[slot]
            space[f"s_{name}"] = plan_redistribution(spec.layout, target, True)
            space[f"mesh_{name}"] = spec.mesh
            cost = estimate_cost(spec.layout, target, spec.dtype.itemsize)
            lines.append(
                f"    {name} = _run_steps(v{slot}, s_{name}, mesh_{name}, mesh_{name})  "
                f"# s{slot} to {target.placements}, about {cost:.0f} B per rank"
            )
            made[(slot, target)] = name
            self._names += 1
            return
        pack: list[tuple[int, Layout]] = [(slot, target)]
        kinds = [reduction]
        for _, other, where, kind in moves:
            if (
                kind is None
                or (other, where) in made
                or (other, where) in pack
                or other not in ready
                or not packs_with(kinds, kind)
            ):
                continue
            pack.append((other, where))
            kinds.append(kind)
        self.saved += len(pack) - 1
        names = [f"m{self._names + i}" for i in range(len(pack))]
        self._names += len(pack)
        for key, moved in zip(pack, names):
            made[key] = moved
        comm = f"comm_{names[0]}"
        space[comm] = self.specs[slot].mesh.comm(reduction.mesh_dim)
        blocks = ", ".join(f"v{s}" for s, _ in pack)
        axis = reduction.axis
        # Started as soon as its operands exist and waited for here, when its result does
        # not depend on the algorithm MPI picks (data moved as is, max/min, integers): a
        # non-blocking float sum may add its terms in another order than the eager call.
        started = isinstance(reduction, Gather) or reduction.exact()
        flag = ", True" if started else ""
        wait = f"_wait(h_{names[0]})"
        if isinstance(reduction, Gather):
            local = [self.specs[s].local_shape() for s, _ in pack]
            shapes = [
                [sh[:axis] + (g.sizes[r],) + sh[axis + 1 :] for sh, g in zip(local, kinds)]  # type: ignore[union-attr]
                for r in range(len(reduction.sizes))
            ]
            packed = PackedGather(space[comm], axis, shapes, reduction.dtype)
            space[f"g_{names[0]}"] = packed
            call = f"g_{names[0]}.start([{blocks}])"
            wait = f"g_{names[0]}.finish(h_{names[0]})"
        elif len(pack) > 1:  # the coalesced call's layout, worked out now
            local_shapes = [self.specs[s].local_shape() for s, _ in pack]
            r = reduction
            space[f"p_{names[0]}"] = PackedReduce(space[comm], r.op, r.dtype, axis, local_shapes)
            call = f"p_{names[0]}.start([{blocks}], {started})"
            wait = f"p_{names[0]}.finish(h_{names[0]})"
            if not started:
                call = f"p_{names[0]}.finish({call})"
        else:  # one reduction: the plain collective, as run_steps makes it
            call = f"_reduce([{blocks}], {reduction.op!r}, {comm}, {axis}{flag})"
        what = "all_gather" if isinstance(reduction, Gather) else f"{reduction.op} reduction"
        note = (
            f"  # {what} of {', '.join(f's{s}' for s, _ in pack)}: "
            f"{sum(x.nbytes for x in kinds)} B from this rank in one call"
        )
        if not started:
            lines.append(f"    {', '.join(names)}, = {call}{note}")
            return
        at = max(self._barrier, *(defined[s] for s, _ in pack))
        starts.setdefault(at, []).append(f"    h_{names[0]} = {call}{note}, started")
        lines.append(f"    {', '.join(names)}, = {wait}  # first use: wait")

    def run(self, blocks: list[Any]) -> tuple[Any, ...]:
        """The output blocks for the argument ``blocks`` (collective where operands move)."""
        return self.function(*blocks)

    def run_checked(self, blocks: list[Any], comm: Any) -> tuple[Any, ...]:
        """``run`` node by node, checking each block's dtype; the ranks vote (collective)."""
        values: dict[int, Any] = dict(zip(self.inputs, blocks))
        values.update(self.constants)
        error: Exception | None = None
        for node in self.nodes:
            operands = [
                values[s] if t is None else _move(values[s], self.specs[s], t)
                for s, t in zip(node.slots, node.moves)
            ]
            step = node.step
            if step is None:  # a dmesh call's own work (map_overlap): its checks, voted here
                failure: Exception | None = None
                try:
                    result = _as_block(node.func(*operands))
                except (ShardingError, ValueError, TypeError) as exc:
                    failure = exc
                raise_if_any_failed(comm, failure, f"compiled {node.label}")
            else:
                result = _as_block(
                    node.func(*operands)
                    if step.run is None
                    else step.run(node.func, operands, step.call)
                )
            if error is None and result.dtype != node.spec.dtype:
                error = ReplayError(
                    f"compiled {node.label}: the block has dtype {result.dtype}, tracing "
                    f"predicted {node.spec.dtype}; use the function uncompiled"
                )
            values[node.out] = result
        raise_if_any_failed(comm, error, "compile", kinds=(ReplayError,))
        return tuple(values[s] for s in self.outputs)

    def wrap(self, blocks: tuple[Any, ...]) -> list[DArray]:
        """The output DArrays of ``blocks`` with the recorded specs."""
        return [DArray(b, self.specs[s]) for b, s in zip(blocks, self.outputs)]
