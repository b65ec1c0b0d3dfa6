"""Property tests of layouts and redistribution plans, run on NumPy data in one process.

Hypothesis draws meshes of 1 to 3 dims (sizes 1 to 4, at most 12 ranks), arrays of 0 to
3 dims (lengths 0 to 5), placements per mesh dim (``R``; ``S(d)``, nested when mesh dims
share a tensor dim; ``P(op)``, every op) and balanced or uneven boundaries (empty blocks
too). :class:`Simulation` holds one block per rank and runs a plan as ``run_steps``
does: collectives over the ranks that share the other mesh coordinates, with the
step's sizes (checked against the blocks), transfers by ``transfer_plan``. Source
terms are those ``dmesh.distribute`` makes. ``S_r``/``T_r``: rank ``r``'s rectangle in
the source/target.

1. **The plan reaches the target**: each rank's terms are those ``distribute`` makes
   for the target, and reduce (last partial mesh dim first, the planner's order) to
   its target block; on one mesh, and between meshes over the same ranks in any order.
2. **A round trip is the identity** for sources without ``Partial`` dims.
3. **Nothing moves that need not.** From the plan's sizes and rectangles, rank ``r``
   receives from others, outside reductions, at most ``|T_r - S_r|`` elements.
   Reductions are the legitimate extra: at most one per partial mesh dim. No step
   runs over a mesh dim of size 1 (one block, one term), and none at all for a target
   that differs only there. ``estimate_cost`` on even layouts (balanced, lengths
   divisible by the block counts; its per-rank model), less ``LATENCY_BYTES`` per
   communicating step and ``LOCAL_STEP`` per local one (size-1 changes priced as
   either), is at most ``itemsize * (max_r |T_r - S_r| + sum over reduced mesh dims
   of 2 (k - 1) / k * B)``, ``k`` the dim's size, ``B`` the source block (a ring
   all-reduce's bytes).

The regression tests at the end pin each planner bug these properties found.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import PARTIAL_OPS, Partial, Placement, Replicate, Shard
from dmesh.core.plan import (
    LATENCY_BYTES,
    LOCAL_STEP,
    Step,
    crop_index,
    estimate_cost,
    plan_redistribution,
)
from dmesh.core.transfers import transfer_crosses, transfer_plan
from dmesh.creation import _make_partial
from dmesh.redistribution import partial_term, run_steps
from references import reduce_reference

R, S0, S1 = Replicate(), Shard(0), Shard(1)
ITEMSIZE = 8
Coord = tuple[int, ...]
MESHES = [s for k in (1, 2, 3) for s in itertools.product(range(1, 13), repeat=k)]


# -- strategies ---------------------------------------------------------------------------
@st.composite
def meshes(draw: st.DrawFn) -> tuple[int, ...]:
    """A mesh shape of 1 to 3 dims, sizes 1 to 4, at most 12 ranks."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    while math.prod(shape) > 12:
        shape[shape.index(max(shape))] -= 1
    return tuple(shape)


@st.composite
def placements(
    draw: st.DrawFn, mesh: Coord, ndim: int, partial: bool = True, like: Any = ()
) -> Any:
    """Per mesh dim ``R``, ``S(d)`` or (if ``partial``) ``P(op)``, alike often; or, two times
    in three where ``like`` (a source's placements) is given, ``like``'s."""
    kinds = ["R"] + ["S"] * (ndim > 0) + ["P"] * partial
    out: list[Placement] = []
    for m in range(len(mesh)):
        kind = draw(st.sampled_from(kinds + ["like"] * 2 * len(kinds) * bool(like)))
        if kind == "S":
            out.append(Shard(draw(st.integers(0, ndim - 1))))
        elif kind == "P":
            out.append(Partial(draw(st.sampled_from(PARTIAL_OPS))))
        else:
            out.append(like[m] if kind == "like" else R)
    return tuple(out)


@st.composite
def layouts(
    draw: st.DrawFn, mesh: Coord, shape: Coord, partial: bool = True, like: Any = ()
) -> Layout:
    """A layout with balanced or uneven (even empty-block) boundaries."""
    chosen = draw(placements(mesh, len(shape), partial, like))
    if draw(st.booleans()):
        return Layout.balanced(mesh, chosen, shape)
    bounds: list[tuple[int, ...] | None] = []
    for d, n in enumerate(shape):
        mesh_dims = sharding_mesh_dims(chosen, d)
        blocks = math.prod(mesh[m] for m in mesh_dims)
        cuts = draw(st.lists(st.integers(0, n), min_size=blocks - 1, max_size=blocks - 1))
        bounds.append((0, *sorted(cuts), n) if mesh_dims else None)
    return Layout.with_bounds(mesh, chosen, shape, bounds)


@st.composite
def pairs(draw: st.DrawFn, partial_source: bool = True) -> tuple[Layout, Layout]:
    """A source and a target layout of one array (0 to 3 dims of 0 to 5) on one mesh."""
    mesh, ndim = draw(meshes()), draw(st.sampled_from([0, 1, 2, 2, 3, 3]))
    shape = tuple(draw(st.integers(0, 5)) for _ in range(ndim))
    src = draw(layouts(mesh, shape, partial_source))
    return src, draw(layouts(mesh, shape, like=src.placements))


@st.composite
def mesh_pairs(draw: st.DrawFn) -> tuple[Layout, Layout, Coord]:
    """Layouts on two meshes over the same ranks, and the target mesh's rank order."""
    src = draw(pairs())[0]
    n = math.prod(src.mesh_shape)
    other = draw(st.sampled_from([s for s in MESHES if math.prod(s) == n]))
    ranks = tuple(draw(st.permutations(range(n))))
    return src, draw(layouts(other, src.shape)), ranks


@st.composite
def even_pairs(draw: st.DrawFn) -> tuple[Layout, Layout]:
    """Balanced layouts whose sharded lengths divide evenly (0 to 2 blocks' worth)."""
    mesh, ndim = draw(meshes()), draw(st.integers(0, 3))
    src, dst = draw(placements(mesh, ndim)), draw(placements(mesh, ndim))

    def blocks(chosen: Any, d: int) -> int:
        return math.prod(mesh[m] for m in sharding_mesh_dims(chosen, d))

    shape = tuple(
        draw(st.integers(0, 2)) * math.lcm(blocks(src, d), blocks(dst, d)) for d in range(ndim)
    )
    return Layout.balanced(mesh, src, shape), Layout.balanced(mesh, dst, shape)


# -- the simulated mesh ---------------------------------------------------------------------
def coords(mesh: Coord) -> list[Coord]:
    """Every coordinate of ``mesh``, row-major (the order of its ranks)."""
    return [tuple(int(i) for i in c) for c in np.ndindex(*mesh)]


def lines(mesh: Coord, m: int) -> list[list[Coord]]:
    """The groups of coordinates that differ along mesh dim ``m`` only, each in ``m`` order."""
    groups: dict[Coord, list[Coord]] = {}
    for c in coords(mesh):
        groups.setdefault(c[:m] + c[m + 1 :], []).append(c)
    return list(groups.values())


def global_array(shape: Coord) -> np.ndarray:
    """Distinct non-zero integers, exact in float64 under every reduction used here."""
    return np.arange(1.0, math.prod(shape) + 1).reshape(shape)


def reduce_terms(layout: Layout, blocks: dict[Coord, np.ndarray]) -> dict[Coord, np.ndarray]:
    """The blocks' values: every partial mesh dim reduced, the last mesh dim first."""
    blocks = dict(blocks)
    for m in reversed(range(len(layout.mesh_shape))):
        p = layout.placements[m]
        if not isinstance(p, Partial):
            continue
        for group in lines(layout.mesh_shape, m):
            blocks.update(dict.fromkeys(group, reduce_reference(p.op, [blocks[c] for c in group])))
    return blocks


class Simulation:
    """One block per rank of a mesh, moved by plan steps as ``run_steps`` moves them."""

    def __init__(self, layout: Layout, x: np.ndarray) -> None:
        self.mesh, self.ranks = layout.mesh_shape, tuple(range(math.prod(layout.mesh_shape)))
        self.blocks: dict[int, np.ndarray] = {}  # rank -> block
        for c in coords(self.mesh):  # partial terms as dmesh.distribute makes them
            mesh: Any = SimpleNamespace(coordinate=c)  # all _make_partial reads of a mesh
            self.blocks[self.rank(c)] = _make_partial(x[layout.slices(c)], mesh, layout.placements)
        self.received = dict.fromkeys(self.ranks, 0)  # elements from other ranks, no reductions
        self.reduced: list[int] = []  # the mesh dims reduced, in order

    def rank(self, coord: Coord) -> int:
        """The rank at ``coord`` of the current mesh."""
        return self.ranks[int(np.ravel_multi_index(coord, self.mesh))]

    def run(self, steps: tuple[Step, ...], dst_mesh: Coord, dst_ranks: Sequence[int]) -> None:
        """Run ``steps``; the blocks are then read on the target mesh, transfer or not."""
        for kind, *args in steps:
            getattr(self, kind)(*args, dst_mesh=dst_mesh, dst_ranks=tuple(dst_ranks))
        self.mesh, self.ranks = dst_mesh, tuple(dst_ranks)

    def _lines(self, m: int) -> list[list[int]]:
        return [[self.rank(c) for c in group] for group in lines(self.mesh, m)]

    def all_reduce(self, m: int, op: str, **_: Any) -> None:
        """``all_reduce`` over mesh dim ``m``."""
        self.reduced.append(m)
        for group in self._lines(m):
            value = reduce_reference(op, [self.blocks[r] for r in group])
            self.blocks.update({r: value.copy() for r in group})

    def reduce_scatter(self, m: int, op: str, d: int, sizes: Coord, **_: Any) -> None:
        """``reduce_scatter`` over ``m``: rank ``i`` of a group gets piece ``i`` along ``d``."""
        self.reduced.append(m)
        for group in self._lines(m):
            assert len({self.blocks[r].shape for r in group}) == 1, "reduce_scatter: shapes"
            value = reduce_reference(op, [self.blocks[r] for r in group])
            assert value.shape[d] == sum(sizes), "reduce_scatter: sizes"
            self.blocks.update(zip(group, np.split(value, np.cumsum(sizes)[:-1], axis=d)))

    def all_gather(self, m: int, d: int, sizes: Coord, **_: Any) -> None:
        """``all_gather`` along ``d`` over ``m``, with the step's sizes."""
        for group in self._lines(m):
            parts = [self.blocks[r] for r in group]
            assert [p.shape[d] for p in parts] == list(sizes), "all_gather: sizes"
            whole = np.concatenate(parts, axis=d)
            for r, part in zip(group, parts):
                self.received[r] += whole.size - part.size
                self.blocks[r] = whole.copy()

    def all_to_all(self, m: int, i: int, j: int, split: Coord, concat: Coord, **_: Any) -> None:
        """``all_to_all`` over ``m``: split along ``j``, concatenate along ``i``."""
        for group in self._lines(m):
            pieces = {}
            for q, sizes_i in zip(group, concat):
                assert self.blocks[q].shape[j] == sum(split), "all_to_all: split sizes"
                cut = np.split(self.blocks[q], np.cumsum(split)[:-1], axis=j)
                for r, piece in zip(group, cut):
                    assert piece.shape[i] == sizes_i, "all_to_all: concat sizes"
                    pieces[q, r] = piece
            for r in group:
                self.received[r] += sum(pieces[q, r].size for q in group if q != r)
                self.blocks[r] = np.concatenate([pieces[q, r] for q in group], axis=i)

    def slice(self, m: int, d: int, after: Layout, **_: Any) -> None:
        """The local cut of ``d`` to the block of ``after`` (the block holds all of ``d``)."""
        for c in coords(self.mesh):
            index = [slice(None)] * len(after.shape)
            index[d] = slice(*after.block(c)[d])
            self.blocks[self.rank(c)] = self.blocks[self.rank(c)][tuple(index)].copy()

    def crop(self, before: Layout, after: Layout, **_: Any) -> None:
        """The local cut of each block to its block in ``after``."""
        for c in coords(self.mesh):
            index = crop_index(before, after, c)
            assert index is not None, "crop: the target block is not inside"
            self.blocks[self.rank(c)] = self.blocks[self.rank(c)][index].copy()

    def transfer(self, src: Layout, dst: Layout, dst_mesh: Coord, dst_ranks: Coord) -> None:
        """One ``Alltoallv`` of ``transfer_plan``'s rectangles; the mesh becomes the target's."""
        assert src.mesh_shape == self.mesh
        plans = {me: transfer_plan(src, dst, self.ranks, dst_ranks, me) for me in self.ranks}
        sent = {(me, to): self.blocks[me][i] for me, (out, _) in plans.items() for to, i in out}
        crossing = any(me != to for me, to in sent)  # else no rank makes the Alltoallv
        assert crossing == transfer_crosses(src, dst, self.ranks, dst_ranks), "transfer: crosses"
        self.mesh, self.ranks = dst_mesh, dst_ranks
        blocks = {}
        for c in coords(dst_mesh):
            me = self.rank(c)
            block = np.full(dst.local_shape(c), np.nan)
            for frm, index in plans[me][1]:
                piece = sent.pop((frm, me))
                assert piece.shape == block[index].shape, "transfer: rectangle shapes"
                assert np.isnan(block[index]).all(), "transfer: an element received twice"
                block[index] = piece
                self.received[me] += piece.size if frm != me else 0
            assert not np.isnan(block).any(), "transfer: an element never received"
            blocks[me] = block
        assert not sent, f"transfer: sent, never received: {sorted(sent)}"
        self.blocks = blocks

    def make_partial(self, m: int, op: str, **_: Any) -> None:
        """This rank's term of ``P(op)`` over ``m`` (``partial_term``, as run_steps)."""
        for c in coords(self.mesh):
            self.blocks[self.rank(c)] = partial_term(self.blocks[self.rank(c)], op, c[m] == 0)


def moved(src: Layout, dst: Layout, ranks: Coord | None = None) -> Simulation:
    """The simulation after the plan from ``src`` to ``dst``: on one mesh, or with ``ranks``
    (the target mesh's rank at each coordinate) on another (``same_mesh=False``)."""
    sim = Simulation(src, global_array(src.shape))
    plan = plan_redistribution(src, dst, ranks is None)
    sim.run(plan, dst.mesh_shape, ranks or tuple(range(math.prod(dst.mesh_shape))))
    return sim


def assert_holds(sim: Simulation, layout: Layout) -> None:
    """Every rank's block, its terms reduced, is ``layout``'s block of the global array; and
    the terms themselves are those ``dmesh.distribute`` makes (none moved to another term)."""
    x, blocks = global_array(layout.shape), {c: sim.blocks[sim.rank(c)] for c in coords(sim.mesh)}
    made = Simulation(layout, x).blocks  # row-major rank -> term
    for i, (c, value) in enumerate(reduce_terms(layout, blocks).items()):
        assert value.shape == layout.local_shape(c), (c, value.shape)
        np.testing.assert_array_equal(value, x[layout.slices(c)], err_msg=f"at {c}")
        np.testing.assert_array_equal(blocks[c], made[i], err_msg=f"term at {c}")


def missing(src: Layout, dst: Layout, c: Coord) -> int:
    """``|T_c minus S_c|``: the elements of the target block at ``c`` not in the source's."""
    target = dst.block(c)
    meet = [max(0, min(b, y) - max(a, x)) for (a, b), (x, y) in zip(target, src.block(c))]
    return math.prod(dst.local_shape(c)) - math.prod(meet)


# -- properties ----------------------------------------------------------------------------
@settings(max_examples=600)
@given(pairs())
def test_plan_reaches_the_target(pair: tuple[Layout, Layout]) -> None:
    """Property 1 on one mesh."""
    src, dst = pair
    assert_holds(moved(src, dst), dst)


@settings(max_examples=150)
@given(mesh_pairs())
def test_plan_reaches_the_target_on_another_mesh(case: tuple[Layout, Layout, Coord]) -> None:
    """Property 1 between two meshes over the same ranks, the target's in any rank order."""
    src, dst, ranks = case
    assert_holds(moved(src, dst, ranks), dst)


@settings(max_examples=200)
@given(pairs(partial_source=False))
def test_round_trip_is_the_identity(pair: tuple[Layout, Layout]) -> None:
    """Property 2."""
    src, dst = pair
    sim = moved(src, dst)
    sim.run(plan_redistribution(dst, src, True), src.mesh_shape, sim.ranks)
    assert_holds(sim, src)


@settings(max_examples=250)
@given(pairs())
def test_nothing_moves_that_need_not(pair: tuple[Layout, Layout]) -> None:
    """Property 3, per rank, from the plan's own sizes and rectangles."""
    src, dst = pair
    mesh, steps = src.mesh_shape, plan_redistribution(src, dst, True)
    sim = moved(src, dst)
    for c in coords(mesh):
        assert sim.received[sim.rank(c)] <= missing(src, dst, c), (c, steps)
    partial = {m for m, p in enumerate(src.placements) if isinstance(p, Partial)}
    assert len(set(sim.reduced)) == len(sim.reduced), steps
    assert set(sim.reduced) <= partial, steps
    assert all(mesh[step[1]] > 1 for step in steps if isinstance(step[1], int)), steps
    same_blocks = all(src.block(c) == dst.block(c) for c in coords(mesh))
    if same_blocks and all(
        p == q for k, p, q in zip(mesh, src.placements, dst.placements) if k > 1
    ):
        assert steps == (), steps


@settings(max_examples=250)
@given(even_pairs())
def test_estimate_is_within_the_bound(pair: tuple[Layout, Layout]) -> None:
    """Property 3 for ``estimate_cost``, on the even layouts its per-rank model describes."""
    src, dst = pair
    mesh, steps = src.mesh_shape, plan_redistribution(src, dst, True)
    block = math.prod(src.shape) / math.prod(
        k for k, p in zip(mesh, src.placements) if isinstance(p, Shard)
    )
    reduced = [step[1] for step in steps if step[0] in ("all_reduce", "reduce_scatter")]
    allowance = sum(2 * (mesh[m] - 1) / mesh[m] * block for m in reduced)
    local = sum(step[0] in ("slice", "crop", "make_partial") for step in steps)
    overhead = LATENCY_BYTES * (len(steps) - local) + LOCAL_STEP * local
    for k, p, q in zip(mesh, src.placements, dst.placements):  # size 1: priced, no step
        overhead += (LOCAL_STEP if p == R else LATENCY_BYTES) if k == 1 and p != q else 0
    moved_bytes = estimate_cost(src, dst, ITEMSIZE) - overhead
    most = max(missing(src, dst, c) for c in coords(mesh))
    assert moved_bytes <= ITEMSIZE * (most + allowance) + 1e-9, (steps, moved_bytes, most)


# -- regressions: each planner bug the properties found ---------------------------------------
def test_mixed_partial_ops_are_reduced_last_mesh_dim_first() -> None:
    """(P(sum), P(prod)) on a (2, 2) mesh (terms as distribute makes them) reduced to 2x the
    array: the sum was reduced first. A kept partial dim with another op made before it is
    reduced and made again; one with the op made after it is kept."""
    sum_, prod = Partial("sum"), Partial("prod")
    plans = []
    cases = [((sum_, prod), (R, R)), ((R, sum_), (prod, sum_)), ((sum_, R), (sum_, prod))]
    for src, dst in [*cases, ((R, R), (sum_, prod))]:
        a, b = Layout.balanced((2, 2), src, (3,)), Layout.balanced((2, 2), dst, (3,))
        assert_holds(moved(a, b), b)
        plans.append([step[:2] for step in plan_redistribution(a, b, True)])
    assert plans[0] == [("all_reduce", 1), ("all_reduce", 0)]
    assert plans[1][0] == ("all_reduce", 1)  # the kept sum is reduced: a prod is made before it
    assert plans[2] == [("make_partial", 1)]  # the prod is made after the kept sum


def test_a_transfer_keeps_partial_terms_on_their_coordinate() -> None:
    """(P(sum), S(0)) uneven -> balanced: the transfer sent rank (0, j)'s term to (1, j'),
    which doubled the sum. Terms now move only between ranks of one partial coordinate."""
    src = Layout.with_bounds((2, 2), (Partial("sum"), S0), (8,), [(0, 1, 8)])
    dst = Layout.balanced((2, 2), (Partial("sum"), S0), (8,))
    assert [step[0] for step in plan_redistribution(src, dst, True)] == ["transfer"]
    assert_holds(moved(src, dst), dst)
    for me in range(4):
        sends, receives = transfer_plan(src, dst, (0, 1, 2, 3), (0, 1, 2, 3), me)
        assert all(rank // 2 == me // 2 for rank, _ in sends + receives)


def test_another_mesh() -> None:
    """Partials across meshes of 2 and 1 dims raised IndexError; equal layouts on a mesh
    in another rank order made no step, though coordinate 0 was another rank there."""
    square = Layout.balanced((2, 2), (R, Partial("sum")), (6,))
    line = Layout.balanced((4,), (S0,), (6,))
    for src, dst in ((square, line), (line, square)):
        assert_holds(moved(src, dst, (0, 1, 2, 3)), dst)
    assert [step[0] for step in plan_redistribution(line, line, False)] == ["transfer"]
    assert_holds(moved(line, line, (3, 2, 1, 0)), line)


def test_size_one_mesh_dims_move_nothing() -> None:
    """P -> R and S -> R over a mesh dim of size 1 planned an all_reduce or all_gather. No
    step now; the estimate still prices the change as over a larger dim (zero bytes)."""
    cases = [
        ((1,), (Partial("max"),), (R,), LATENCY_BYTES),
        ((1,), (S0,), (R,), LATENCY_BYTES),
        ((1,), (Partial("sum"),), (Partial("prod"),), LATENCY_BYTES),
        ((1, 3), (R, S0), (S0, S0), LOCAL_STEP),  # the size-1 dim nests without cutting
        ((3, 1), (Partial("sum"), S0), (Partial("sum"), Partial("avg")), LATENCY_BYTES),
    ]
    for mesh, src, dst, cost in cases:
        a, b = Layout.balanced(mesh, src, (5,)), Layout.balanced(mesh, dst, (5,))
        assert plan_redistribution(a, b, True) == (), (src, dst)
        assert estimate_cost(a, b, ITEMSIZE) == cost
        assert_holds(moved(a, b), b)
    block = np.arange(3.0)  # and the block is copied, as by the collectives it replaces
    assert not np.shares_memory(run_steps(block, (), None, None), block)


def test_a_transfer_that_moves_nothing_is_a_local_crop() -> None:
    """(S(0), R) -> (S(0), S(0)) was an Alltoallv in which every rank sent only to itself."""
    src, dst = (Layout.balanced((2, 2), p, (8, 3)) for p in ((S0, R), (S0, S0)))
    assert [step[0] for step in plan_redistribution(src, dst, True)] == ["crop"]
    assert estimate_cost(src, dst, ITEMSIZE) == LOCAL_STEP
    assert_holds(moved(src, dst), dst)


def test_estimates_count_the_blocks_that_move() -> None:
    """A transfer was priced as a whole source block and a gather after a slice as the
    unsliced block: each counted twice what the busiest rank receives here."""
    nested, grid = (Layout.balanced((2, 2), p, (8, 8)) for p in ((S0, S0), (S0, S1)))
    assert [step[0] for step in plan_redistribution(nested, grid, True)] == ["transfer"]
    assert estimate_cost(nested, grid, ITEMSIZE) == LATENCY_BYTES + 8 * ITEMSIZE
    src, dst = (Layout.balanced((2, 2), p, (8, 8)) for p in ((S1, R), (R, S0)))
    assert [step[0] for step in plan_redistribution(src, dst, True)] == ["slice", "all_gather"]
    assert estimate_cost(src, dst, ITEMSIZE) == LOCAL_STEP + LATENCY_BYTES + 16 * ITEMSIZE
