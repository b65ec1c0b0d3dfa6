"""Sharding propagation: pick the cheapest acceptable layout for an op's operands and result.

A rule's rows (one mesh dim each) are expanded over every mesh dim; each
combination gives target placements for the operands and the result. Its
price is what moving the operands there costs: for each redistribution step,
the bytes it moves per rank plus a latency term. The cheapest wins (ties go
to the first row, everything replicated, then shards in dim order). Block
boundaries follow the operands: an operand that keeps its placements keeps
its blocks, and the others are aligned to it, so ``a[1:] - a[:-1]`` moves only
the elements that differ. Decisions are cached by (rule, call, operand specs).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.plan import estimate_cost
from dmesh.core.spec import DArraySpec
from dmesh.ops.registry import Call, Rule

__all__ = ["Decision", "decide", "rebased"]


@dataclass(frozen=True)
class Decision:
    """Target layouts of the DArray operands (None for scalars) and of the result.

    ``moves[i]`` says whether operand ``i`` must be redistributed; result
    specs are memoized per mesh and dtype, so a cached call builds none.
    """

    operands: tuple[Layout | None, ...]
    result: Layout
    cost: float
    moves: tuple[bool, ...] = ()
    _specs: dict[tuple[int, np.dtype], DArraySpec] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )
    # The last (mesh, dtype, spec) asked for: a repeated call asks for the
    # same again, and two identity checks cost less than hashing a dtype.
    _last: list[Any] = field(
        default_factory=lambda: [None, None, None], compare=False, hash=False, repr=False
    )

    @cached_property
    def any_move(self) -> bool:
        """Whether some operand must be redistributed (computed once: a hot path reads it)."""
        return any(self.moves)

    def result_spec(self, mesh: Any, dtype: np.dtype) -> DArraySpec:
        """The result's spec on ``mesh`` with ``dtype`` (built once)."""
        last = self._last
        if last[0] is mesh and last[1] is dtype:
            return last[2]  # type: ignore[no-any-return]
        key = (id(mesh), dtype)
        spec = self._specs.get(key)
        if spec is None or spec.mesh is not mesh:
            spec = DArraySpec(mesh, self.result, dtype)
            self._specs[key] = spec
        last[:] = (mesh, dtype, spec)
        return spec


@lru_cache(maxsize=16384)
def decide(rule: Rule, call: Call, specs: tuple[DArraySpec | None, ...]) -> Decision:
    """The cheapest layout choice for ``rule`` on operands with ``specs`` (pure, cached)."""
    mesh_shape = next(s for s in specs if s is not None).layout.mesh_shape
    out_shape = rule.out_shape(call)
    dim_map = rule.dim_map(call)
    rows = list(rule.rows(call))
    best: Decision | None = None
    for combo in itertools.product(rows, repeat=len(mesh_shape)):
        out_placements = tuple(row[0] for row in combo)
        targets = [tuple(row[i + 1] for row in combo) for i in range(len(specs))]
        decision = _price(mesh_shape, out_shape, out_placements, targets, dim_map, specs)
        if decision is not None and (best is None or decision.cost < best.cost):
            best = decision
    if best is None:  # pragma: no cover - every rule offers the replicated row
        raise AssertionError(f"{rule.name}: no strategy for {specs}")
    return best


def rebased(
    decision: Decision, specs: tuple[DArraySpec | None, ...], result: Layout
) -> Decision | None:
    """An elementwise ``decision`` with its result laid out as ``result`` instead (``out=``'s
    layout), or None where ``result`` differs in more than block boundaries.

    Each operand's target takes ``result``'s boundaries on the dims it shares
    with the result (trailing alignment, as NumPy broadcasts) where both are
    sharded over the same mesh dims; so ``u[1:] += u[:-1]`` computes into
    ``u[1:]``'s own blocks and moves only the cells of ``u[:-1]`` that cross.
    """
    old = decision.result
    if (result.mesh_shape, result.placements, result.shape) != (
        old.mesh_shape,
        old.placements,
        old.shape,
    ):
        return None
    operands: list[Layout | None] = []
    for spec, target in zip(specs, decision.operands):
        if spec is None or target is None:
            operands.append(target)
            continue
        lead = len(result.shape) - len(target.shape)
        bounds = list(target.bounds)
        for e, n in enumerate(target.shape):
            d = e + lead
            mesh_dims = sharding_mesh_dims(target.placements, e)
            if (
                mesh_dims
                and n == result.shape[d]
                and mesh_dims == sharding_mesh_dims(result.placements, d)
            ):
                bounds[e] = result.bounds[d]
        aligned = Layout(target.mesh_shape, target.placements, target.shape, tuple(bounds))
        operands.append(spec.layout if aligned == spec.layout else aligned)
    moves = tuple(
        spec is not None and target != spec.layout for spec, target in zip(specs, operands)
    )
    return Decision(tuple(operands), result, decision.cost, moves)


def _price(
    mesh_shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    out_placements: tuple[Placement, ...],
    targets: list[tuple[Placement, ...]],
    dim_map: tuple[tuple[int | None, ...], ...],
    specs: tuple[DArraySpec | None, ...],
) -> Decision | None:
    balanced = Layout.balanced(mesh_shape, out_placements, out_shape)
    out_bounds = [
        _kept_bounds(d, out_shape, targets, dim_map, specs, balanced.bounds[d])
        or balanced.bounds[d]
        if sharding_mesh_dims(out_placements, d)
        else None
        for d in range(len(out_shape))
    ]
    result = Layout(mesh_shape, out_placements, out_shape, tuple(out_bounds))
    hidden = _hidden_bounds(targets, dim_map, specs)
    operands: list[Layout | None] = []
    cost = 0.0
    for spec, placements, dims in zip(specs, targets, dim_map):
        if spec is None:
            if any(not p.is_replicate() for p in placements):
                return None
            operands.append(None)
            continue
        own = Layout.balanced(mesh_shape, placements, spec.shape)
        bounds: list[tuple[int, ...] | None] = []
        for e, d in enumerate(dims):
            mesh_dims = sharding_mesh_dims(placements, e)
            if not mesh_dims:
                bounds.append(None)
            elif d is not None and sharding_mesh_dims(out_placements, d) == mesh_dims:
                bounds.append(out_bounds[d])  # aligned with the result
            elif d is None and mesh_dims in hidden:
                bounds.append(hidden[mesh_dims])  # aligned with the other operands
            elif sharding_mesh_dims(spec.placements, e) == mesh_dims:
                bounds.append(spec.layout.bounds[e])  # kept where it is
            else:
                bounds.append(own.bounds[e])
        target = Layout(mesh_shape, placements, spec.shape, tuple(bounds))
        if target == own:  # one object per balanced layout: moves there compare by identity
            target = own
        operands.append(target)
        cost += _move_cost(spec, target)
    moves = tuple(
        spec is not None and target != spec.layout for spec, target in zip(specs, operands)
    )
    return Decision(tuple(operands), result, cost, moves)


def _hidden_bounds(
    targets: list[tuple[Placement, ...]],
    dim_map: tuple[tuple[int | None, ...], ...],
    specs: tuple[DArraySpec | None, ...],
) -> dict[tuple[int, ...], tuple[int, ...]]:
    """One set of boundaries per group of mesh dims sharding a dim that maps to no output dim.

    Such dims (an einsum's contracted index) must be cut alike in every
    operand, or blocks of different indices would be multiplied. In one
    combination of rows, each mesh dim shards at most one such index (a row
    shards one letter), so the mesh dims name it. The first operand already
    cut that way keeps its boundaries and the others follow; with none, the
    cut is balanced.
    """
    found: dict[tuple[int, ...], tuple[int, ...]] = {}
    lengths: dict[tuple[int, ...], int] = {}
    for spec, placements, dims in zip(specs, targets, dim_map):
        if spec is None:
            continue
        for e, d in enumerate(dims):
            mesh_dims = sharding_mesh_dims(placements, e)
            if d is not None or not mesh_dims:
                continue
            lengths.setdefault(mesh_dims, spec.shape[e])
            if mesh_dims not in found and sharding_mesh_dims(spec.placements, e) == mesh_dims:
                found[mesh_dims] = spec.layout.bounds[e]  # type: ignore[assignment]
    mesh_shape = next(s for s in specs if s is not None).layout.mesh_shape
    for mesh_dims, length in lengths.items():
        if mesh_dims not in found:
            found[mesh_dims] = _balanced_cut(mesh_shape, mesh_dims, length)
    return found


def _balanced_cut(
    mesh_shape: tuple[int, ...], mesh_dims: tuple[int, ...], n: int
) -> tuple[int, ...]:
    """Balanced boundaries of a length-``n`` dim sharded over ``mesh_dims`` (in that order)."""
    placements = tuple(Shard(0) if m in mesh_dims else Replicate() for m in range(len(mesh_shape)))
    order = Layout.balanced(mesh_shape, placements, (n,))
    return order.bounds[0]  # type: ignore[return-value]


SHIFT = 16  # cells: operands cut this close to the balanced cut are shifted slices


def _kept_bounds(
    d: int,
    out_shape: tuple[int, ...],
    targets: list[tuple[Placement, ...]],
    dim_map: tuple[tuple[int | None, ...], ...],
    specs: tuple[DArraySpec | None, ...],
    balanced: tuple[int, ...] | None = None,
) -> tuple[int, ...] | None:
    """Boundaries of output dim ``d`` from an operand already sharded that way, if any.

    The first such operand's, unless the operands disagree and every one is
    cut within :data:`SHIFT` cells of the balanced cut (shifted slices of one
    array: ``Z[2:] - Z[:-2]``, ``u[1:-1] + (h[2:] - h[:-2])``): then the
    balanced cut, which is the centre slice's (``Z[1:-1]``) where stencils
    write their result, so that later ops and the final write need no move.
    """
    found: list[tuple[int, ...]] = []
    for spec, placements, dims in zip(specs, targets, dim_map):
        if spec is None or spec.placements != placements or d not in dims:
            continue
        own = dims.index(d)
        if spec.shape[own] == out_shape[d] and spec.layout.bounds[own] is not None:
            found.append(spec.layout.bounds[own])  # type: ignore[arg-type]
    if not found:
        return None
    if balanced is not None and any(b != found[0] for b in found[1:]):
        near = all(
            len(b) == len(balanced) and max(abs(x - y) for x, y in zip(b, balanced)) <= SHIFT
            for b in found
        )
        if near:
            return balanced
    return found[0]


def _move_cost(spec: DArraySpec, target: Layout) -> float:
    current = spec.layout
    if current == target:
        return 0.0
    return estimate_cost(current, target, spec.dtype.itemsize)
