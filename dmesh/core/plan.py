"""Redistribution planning: which steps take a DArray from one layout to another.

Pure functions of two layouts, cached at module level; no communication.
:mod:`dmesh.redistribution` runs the plans. For one mesh dim ``m``, with
nothing else changing, on the same mesh:

================  =============================================================
``S(i) -> R``     ``all_gather`` along ``i`` over ``m`` (uneven sizes known)
``R -> S(i)``     a local slice, no communication
``S(i) -> S(j)``  ``all_to_all``: split ``j``, concatenate ``i``, over ``m``
``P -> R``        ``all_reduce`` over ``m``
``P -> S(i)``     ``reduce_scatter`` along ``i`` over ``m``
``R -> P(op)``    local: ``sum`` keeps the value at coordinate 0 and zeros
                  elsewhere, ``prod`` ones elsewhere, ``min``/``max``/``avg``
                  keep it everywhere
``P(a) -> P(b)``  ``all_reduce``, then ``R -> P(b)``
================  =============================================================

A mesh dim of size 1 holds one block and one term, so its placement changes
without a step. Several mesh dims are changed one by one, local slices first
(they shrink the data) and gathers last (they grow it), as long as each step
only involves tensor dims that one mesh dim shards. Everything else (nested
shardings, a change of block boundaries such as uneven -> balanced, another
mesh over the same ranks) is one *transfer* (:mod:`dmesh.core.transfers`):
every rank computes where each source block meets each target block, copies
the piece it keeps, and one ``Alltoallv`` moves exactly the rectangles that
cross ranks, each target element coming from one holder of it. No rank
ever holds more than its target block plus what it sends, so the full array
appears only where the target replicates it. A transfer to another mesh
(``same_mesh=False``) is made even between equal layouts, since a coordinate
may be another rank there; on one mesh, a transfer in which each target block
lies inside the rank's current block moves nothing and is a local ``crop``.

Partial values on several mesh dims are reduced from the last mesh dim to the
first: the inverse of making their terms from the first mesh dim to the last
(``R -> P`` above, as ``dmesh.distribute`` does), which matters when the ops
differ (a sum of products is not a product of sums). A partial mesh dim is
kept as it is where the target has the same op there, unless a partial mesh
dim before it that is reduced or made has another op.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.core.transfers import intersect

__all__ = ["Step", "crop_index", "estimate_cost", "local_crop", "plan_redistribution"]

Step = tuple[Any, ...]

LATENCY_BYTES = 10_000.0  # one message costs about as much as moving 10 kB
LOCAL_STEP = 1.0  # a local step (slice, crop, partial) costs next to nothing, but not nothing


@lru_cache(maxsize=1024)
def plan_redistribution(src: Layout, dst: Layout, same_mesh: bool) -> tuple[Step, ...]:
    """The steps that turn ``src`` into ``dst`` (see the module docstring)."""
    steps: list[Step] = []
    if same_mesh:
        src = _relabel_size_one(src, dst)
    cur = src
    kept = _kept_partials(src, dst) if same_mesh else frozenset()
    # 1. Reduce the partial values the target does not keep, last mesh dim first.
    for m in reversed(range(len(src.placements))):
        p = src.placements[m]
        if not isinstance(p, Partial) or m in kept:
            continue
        q = dst.placements[m] if same_mesh else Replicate()  # another mesh: other dims
        if (
            isinstance(q, Shard)
            and not sharding_mesh_dims(cur.placements, q.dim)
            and sharding_mesh_dims(dst.placements, q.dim) == (m,)
        ):
            cur = _set(cur, m, q, dst.bounds[q.dim])
            steps.append(("reduce_scatter", m, p.op, q.dim, dst.sizes(q.dim)))
        else:
            cur = _set(cur, m, Replicate(), None)
            steps.append(("all_reduce", m, p.op))
    # 2. Shard/Replicate moves towards the target with its new partials replicated.
    mid_placements = tuple(
        Replicate() if isinstance(q, Partial) and not (same_mesh and cur.placements[m] == q) else q
        for m, q in enumerate(dst.placements)
    )
    mid = Layout(dst.mesh_shape, mid_placements, dst.shape, dst.bounds)
    if cur != mid or not same_mesh:
        fast = _per_dim_steps(cur, mid) if same_mesh else None
        if fast is None and same_mesh and _inside(cur, mid):
            fast = [("crop", cur, mid)]
        steps.extend(fast if fast is not None else [("transfer", cur, mid)])
    # 3. New partial values, made locally.
    for m, q in enumerate(dst.placements):
        if isinstance(q, Partial) and mid.placements[m] != q:
            steps.append(("make_partial", m, q.op))
    return tuple(steps)


def estimate_cost(src: Layout, dst: Layout, itemsize: int, same_mesh: bool = True) -> float:
    """What moving one array from ``src`` to ``dst`` costs, in bytes per rank (pure).

    Each communicating step counts the bytes it moves per rank plus
    ``LATENCY_BYTES`` for its messages; local steps count ``LOCAL_STEP``. A
    mesh dim of size 1 whose placement changes takes no step, but is priced
    as the step it takes over a larger dim (no bytes at size 1): the
    dispatcher then picks the same strategies whatever the mesh dims' sizes.
    A collective step counts the rank's block as it is at that step (a
    slice before a gather shrinks what is gathered), taken as even; a
    transfer counts what the busiest rank receives, exactly; to another mesh
    (``same_mesh=False``: ``dst`` may have another mesh shape, and a
    coordinate may be another rank), its largest target block. Propagation
    compares strategies with it and ``dmesh.debug.explain`` reports it.
    """
    if src == dst and same_mesh:
        return 0.0
    total = itemsize * math.prod(src.shape)
    shards = _shards(src)
    cost = sum(
        LOCAL_STEP if isinstance(p, Replicate) else LATENCY_BYTES
        for k, p, q in zip(src.mesh_shape, src.placements, dst.placements)
        if k == 1 and p != q
    )
    for step in plan_redistribution(src, dst, same_mesh):
        kind = step[0]
        if kind in ("crop", "transfer"):
            if kind == "transfer" and not same_mesh:
                largest = max(_volume(step[2].block(c)) for c in _coords(step[2]))
                cost += LATENCY_BYTES + itemsize * largest
            elif kind == "transfer":  # exactly what the busiest rank receives
                cost += LATENCY_BYTES + itemsize * _most_received(step[1], step[2])
            else:
                cost += LOCAL_STEP
            shards = _shards(step[2])
            continue
        if kind == "make_partial":
            cost += LOCAL_STEP
            continue
        k = src.mesh_shape[step[1]]
        block = total / shards
        if kind == "slice":
            cost += LOCAL_STEP
            shards *= k
            continue
        if kind == "all_gather":
            shards //= k
        elif kind == "reduce_scatter":
            shards *= k
        moved = {
            "all_gather": block * (k - 1),
            "all_reduce": 2 * block * (k - 1) / k,
            "reduce_scatter": block * (k - 1) / k,
            "all_to_all": block * (k - 1) / k,
        }[kind]
        cost += LATENCY_BYTES + moved
    return cost


def _shards(layout: Layout) -> int:
    """Into how many blocks the layout cuts the array (mesh dims that shard)."""
    return math.prod(
        k for k, p in zip(layout.mesh_shape, layout.placements) if isinstance(p, Shard)
    )


def crop_index(before: Layout, after: Layout, coord: Any) -> tuple[slice, ...] | None:
    """The part of the block at ``coord`` in ``before`` that is its block in ``after``.

    None when the ``after`` block is not inside the ``before`` one (data must
    move); an empty ``after`` block is inside any block.
    """
    index = []
    for (a, b), (lo, hi) in zip(after.block(coord), before.block(coord)):
        if a < b and not lo <= a <= b <= hi:
            return None
        index.append(slice(a - lo, b - lo) if a < b else slice(0, 0))
    return tuple(index)


def local_crop(before: Layout, after: Layout, coord: Any) -> tuple[slice, ...] | None:
    """The index of the block at ``coord`` in ``before`` that is its block in ``after``,
    where the move needs no message on any rank; else None.

    No message: neither layout has a ``Partial`` mesh dim of more than one
    rank (a reduction, or terms made from a value; on a dim of one rank the
    one term is the value) and every rank's ``after`` block lies inside its
    ``before`` block (``R -> S``, or a block cut smaller). A pure function of
    the layouts for the None answer, so every rank gives the same one.
    """
    sizes = before.mesh_shape
    for placements in (before.placements, after.placements):
        if any(p.is_partial() and n > 1 for p, n in zip(placements, sizes)):
            return None
    if not _inside(before, after):
        return None
    return crop_index(before, after, coord)


@lru_cache(maxsize=1024)
def _most_received(src: Layout, dst: Layout) -> int:
    """Elements the busiest rank receives in a transfer on one mesh (what it lacks)."""
    most = 0
    for coord in _coords(dst):
        target = dst.block(coord)
        meet = intersect(target, src.block(coord))
        most = max(most, _volume(target) - (_volume(meet) if meet is not None else 0))
    return most


def _inside(before: Layout, after: Layout) -> bool:
    """Whether every rank's ``after`` block lies inside its ``before`` block (one mesh)."""
    return all(crop_index(before, after, coord) is not None for coord in _coords(after))


def _coords(layout: Layout) -> list[tuple[int, ...]]:
    return [tuple(int(i) for i in c) for c in np.ndindex(*layout.mesh_shape)]


def _volume(box: tuple[tuple[int, int], ...]) -> int:
    return math.prod(hi - lo for lo, hi in box)


def _relabel_size_one(src: Layout, dst: Layout) -> Layout:
    """``src`` with the target's placements on its mesh dims of size 1: the same blocks.

    A size-1 mesh dim cuts nothing (block numbers and boundaries stay) and
    holds one partial term, which is the value, so no data changes.
    """
    placements = tuple(
        q if size == 1 else p for size, p, q in zip(src.mesh_shape, src.placements, dst.placements)
    )
    if placements == src.placements:
        return src
    bounds = tuple(
        None if not sharding_mesh_dims(placements, d) else cut if cut is not None else (0, n)
        for d, (n, cut) in enumerate(zip(src.shape, src.bounds))
    )
    return Layout(src.mesh_shape, placements, src.shape, bounds)


def _kept_partials(src: Layout, dst: Layout) -> frozenset[int]:
    """The partial mesh dims whose terms stay (see the module docstring).

    Dim ``k`` stays if the target has the same op there and no partial mesh
    dim before it that is reduced or made has another op: that one's reduction
    would come after ``k``'s, out of order. Size-1 mesh dims hold the value as
    their one term, so they fit any order (``_relabel_size_one`` has already
    given them the target's placements).
    """
    ops: dict[int, str] = {}  # mesh dim partial in src or dst -> its op (src's first)
    for m in range(len(src.mesh_shape)):
        for p in (src.placements[m], dst.placements[m]):
            if isinstance(p, Partial):
                ops.setdefault(m, p.op)
    kept = {m for m in ops if src.placements[m] == dst.placements[m]}
    while True:
        moving = [
            (m, p.op)
            for m in ops
            if m not in kept and src.mesh_shape[m] > 1
            for p in (src.placements[m], dst.placements[m])
            if isinstance(p, Partial)
        ]
        out = {
            k
            for k in kept
            if src.mesh_shape[k] > 1 and any(m < k and op != ops[k] for m, op in moving)
        }
        if not out:
            return frozenset(kept)
        kept -= out


def _set(layout: Layout, m: int, placement: Placement, cut: tuple[int, ...] | None) -> Layout:
    """``layout`` with mesh dim ``m`` placed as ``placement`` and the cut of its dim set."""
    old = layout.placements[m]
    placements = layout.placements[:m] + (placement,) + layout.placements[m + 1 :]
    bounds = list(layout.bounds)
    if isinstance(old, Shard) and not sharding_mesh_dims(placements, old.dim):
        bounds[old.dim] = None
    if isinstance(placement, Shard):
        bounds[placement.dim] = cut
    return replace(layout, placements=placements, bounds=tuple(bounds))


def _per_dim_steps(cur: Layout, mid: Layout) -> list[Step] | None:
    """Collective steps over single mesh dims, or None when a transfer is needed."""
    changed = [m for m in range(len(cur.placements)) if cur.placements[m] != mid.placements[m]]
    rank_of_kind = {"slice": 0, "all_to_all": 1, "all_gather": 2}
    pending: list[tuple[int, int, Step]] = []
    for m in changed:
        a, b = cur.placements[m], mid.placements[m]
        if isinstance(a, Replicate) and isinstance(b, Shard):
            pending.append((rank_of_kind["slice"], m, ("slice", m, b.dim)))
        elif isinstance(a, Shard) and isinstance(b, Replicate):
            pending.append((rank_of_kind["all_gather"], m, ("all_gather", m, a.dim)))
        elif isinstance(a, Shard) and isinstance(b, Shard):
            pending.append((rank_of_kind["all_to_all"], m, ("all_to_all", m, a.dim, b.dim)))
        else:
            return None
    steps: list[Step] = []
    for _, m, step in sorted(pending):
        kind = step[0]
        if kind == "slice":
            d = step[2]
            if sharding_mesh_dims(cur.placements, d) or sharding_mesh_dims(mid.placements, d) != (
                m,
            ):
                return None
            cur = _set(cur, m, Shard(d), mid.bounds[d])
            steps.append(("slice", m, d, cur))
        elif kind == "all_gather":
            d = step[2]
            if sharding_mesh_dims(cur.placements, d) != (m,):
                return None
            steps.append(("all_gather", m, d, cur.sizes(d)))
            cur = _set(cur, m, Replicate(), None)
        else:
            i, j = step[2], step[3]
            if (
                sharding_mesh_dims(cur.placements, i) != (m,)
                or sharding_mesh_dims(cur.placements, j)
                or sharding_mesh_dims(mid.placements, j) != (m,)
            ):
                return None
            steps.append(("all_to_all", m, i, j, mid.sizes(j), cur.sizes(i)))
            cur = _set(cur, m, Shard(j), mid.bounds[j])
    return steps if cur == mid else None
