"""Redistribution: move a DArray's data from one layout to another. Plan, then execute.

A plan is a tuple of steps, computed by pure functions of the two layouts
(cached) and run by one small executor per step kind. For one mesh dim ``m``,
with nothing else changing, on the same mesh:

==============  ===============================================================
``S(i) -> R``   ``all_gather`` along ``i`` over ``m`` (uneven sizes known)
``R -> S(i)``   a local slice, no communication
``S(i) -> S(j)`` ``all_to_all``: split ``j``, concatenate ``i``, over ``m``
``P -> R``      ``all_reduce`` over ``m``
``P -> S(i)``   ``reduce_scatter`` along ``i`` over ``m``
``R -> P(op)``  local: ``sum`` keeps the value at coordinate 0 and zeros
                elsewhere, ``prod`` ones elsewhere, ``min``/``max``/``avg``
                keep it everywhere
``P(a) -> P(b)`` ``all_reduce``, then ``R -> P(b)``
==============  ===============================================================

Several mesh dims are changed one by one, local slices first (they shrink the
data) and gathers last (they grow it), as long as each step only involves
tensor dims that one mesh dim shards. Everything else (nested shardings, a
change of block boundaries such as uneven -> balanced, another mesh over the
same ranks) is one *transfer*: every rank computes where each source block
meets each target block and one ``Alltoallv`` moves exactly those rectangles,
each target element coming from one holder of it. No rank ever holds more than
its target block plus what it sends, so the full array appears only where
the target replicates it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np
from mpi4py import MPI

import collectives as coll
from collectives._device import array_module
from collectives.errors import ArgumentError
from dmesh.layout import Layout, sharding_mesh_dims
from dmesh.placement import Partial, Placement, Replicate, Shard

__all__ = [
    "Step",
    "estimate_cost",
    "partial_term",
    "plan_redistribution",
    "run_steps",
    "transfer",
]

Step = tuple[Any, ...]

LATENCY_BYTES = 10_000.0  # one message costs about as much as moving 10 kB
LOCAL_STEP = 1.0  # a local step (slice, partial) costs next to nothing, but not nothing


# -- planning (pure) -------------------------------------------------------------
@lru_cache(maxsize=1024)
def plan_redistribution(src: Layout, dst: Layout, same_mesh: bool) -> tuple[Step, ...]:
    """The steps that turn ``src`` into ``dst`` (see the module docstring)."""
    steps: list[Step] = []
    cur = src
    # 1. Reduce the partial values the target does not keep.
    for m, p in enumerate(src.placements):
        if not isinstance(p, Partial) or (same_mesh and dst.placements[m] == p):
            continue
        q = dst.placements[m]
        if (
            same_mesh
            and isinstance(q, Shard)
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
        Replicate() if isinstance(q, Partial) and cur.placements[m] != q else q
        for m, q in enumerate(dst.placements)
    )
    mid = Layout(dst.mesh_shape, mid_placements, dst.shape, dst.bounds)
    if cur != mid:
        fast = _per_dim_steps(cur, mid) if same_mesh else None
        steps.extend(fast if fast is not None else [("transfer", cur, mid)])
    # 3. New partial values, made locally.
    for m, q in enumerate(dst.placements):
        if isinstance(q, Partial) and mid.placements[m] != q:
            steps.append(("make_partial", m, q.op))
    return tuple(steps)


def estimate_cost(src: Layout, dst: Layout, itemsize: int) -> float:
    """What moving one array from ``src`` to ``dst`` costs, in bytes per rank (pure).

    Each communicating step counts the bytes it moves per rank plus
    ``LATENCY_BYTES`` for its messages; local steps count ``LOCAL_STEP``.
    Propagation compares strategies with it and ``dmesh.debug.explain``
    reports it.
    """
    if src == dst:
        return 0.0
    shards = math.prod(
        src.mesh_shape[m] for m, p in enumerate(src.placements) if isinstance(p, Shard)
    )
    block = itemsize * math.prod(src.shape) / max(shards, 1)
    cost = 0.0
    for step in plan_redistribution(src, dst, True):
        kind = step[0]
        if kind in ("slice", "make_partial"):
            cost += LOCAL_STEP
            continue
        k = src.mesh_shape[step[1]] if kind != "transfer" else 1
        moved = {
            "all_gather": block * (k - 1),
            "all_reduce": 2 * block * (k - 1) / k,
            "reduce_scatter": block * (k - 1) / k,
            "all_to_all": block * (k - 1) / k,
            "transfer": block,
        }[kind]
        cost += LATENCY_BYTES + moved
    return cost


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


@lru_cache(maxsize=1024)
def transfer_plan(
    src: Layout,
    dst: Layout,
    src_ranks: tuple[int, ...],
    dst_ranks: tuple[int, ...],
    me: int,
) -> tuple[tuple[tuple[int, tuple[slice, ...]], ...], tuple[tuple[int, tuple[slice, ...]], ...]]:
    """What rank ``me`` sends to and receives from whom in a transfer from ``src`` to ``dst``.

    ``src_ranks``/``dst_ranks`` give the communicator rank at each mesh
    coordinate (row-major) of the source and target meshes. Returns
    ``(sends, receives)``: ``(rank, slices)`` pairs in rank order, the slices
    relative to this rank's source block (sends) or target block (receives).
    Each target element comes from one holder: the receiver itself when it
    holds it, otherwise holder number ``receiver % holders``, which spreads a
    replicated source's load over its replicas.
    """
    src_coords = list(np.ndindex(*src.mesh_shape))
    dst_coords = list(np.ndindex(*dst.mesh_shape))
    holders: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for coord, rank in zip(src_coords, src_ranks):
        holders.setdefault(src.block(coord), []).append(rank)

    def sender(block_holders: list[int], receiver: int) -> int:
        if receiver in block_holders:
            return receiver
        return block_holders[receiver % len(block_holders)]

    sends: list[tuple[int, tuple[slice, ...]]] = []
    if me in src_ranks:
        mine = src.block(src_coords[src_ranks.index(me)])
        for coord, rank in zip(dst_coords, dst_ranks):
            meet = _intersect(mine, dst.block(coord))
            if meet is not None and sender(holders[mine], rank) == me:
                sends.append((rank, _relative(meet, mine)))
    receives: list[tuple[int, tuple[slice, ...]]] = []
    if me in dst_ranks:
        target = dst.block(dst_coords[dst_ranks.index(me)])
        for block, block_holders in holders.items():
            meet = _intersect(block, target)
            if meet is not None:
                receives.append((sender(block_holders, me), _relative(meet, target)))
    return tuple(sorted(sends, key=lambda s: s[0])), tuple(sorted(receives, key=lambda r: r[0]))


def _intersect(
    a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...] | None:
    meet = tuple((max(x0, y0), min(x1, y1)) for (x0, x1), (y0, y1) in zip(a, b))
    return None if any(lo >= hi for lo, hi in meet) else meet


def _relative(
    meet: tuple[tuple[int, int], ...], block: tuple[tuple[int, int], ...]
) -> tuple[slice, ...]:
    return tuple(slice(lo - b0, hi - b0) for (lo, hi), (b0, _) in zip(meet, block))


# -- execution ---------------------------------------------------------------------
def run_steps(local: Any, steps: tuple[Step, ...], mesh: Any, dst_mesh: Any) -> Any:
    """Run ``steps`` on this rank's block ``local`` (on ``mesh``; the target on ``dst_mesh``).

    Collectives get the mesh dim's communicator itself, which takes the
    collectives' fast path for small messages.
    """
    for step in steps:
        kind = step[0]
        if kind == "all_reduce":
            _, m, op = step
            # An average of integers is a float: the array keeps its dtype.
            local = coll.all_reduce(local, op, mesh.comm(m)).astype(local.dtype, copy=False)
        elif kind == "reduce_scatter":
            _, m, op, d, sizes = step
            local = coll.reduce_scatter(local, op, d, mesh.comm(m), sizes=sizes)
        elif kind == "all_gather":
            _, m, d, sizes = step
            local = coll.all_gather(local, d, mesh.comm(m), sizes=sizes)
        elif kind == "slice":
            _, m, d, after = step
            start, stop = after.block(mesh.coordinate)[d]
            index = [slice(None)] * local.ndim
            index[d] = slice(start, stop)
            local = local[tuple(index)].copy()
        elif kind == "all_to_all":
            _, m, i, j, split_sizes, concat_sizes = step
            local = coll.all_to_all(
                local,
                j,
                i,
                mesh.comm(m),
                split_sizes=split_sizes,
                concat_sizes=concat_sizes,
                sizes_agree=True,  # from the layouts: the same on every rank of the group
            )
        elif kind == "transfer":
            _, before, after = step
            local = _transfer(local, before, after, mesh, dst_mesh)
        elif kind == "make_partial":
            _, m, op = step
            local = partial_term(local, op, dst_mesh.coordinate[m] == 0)
        else:  # pragma: no cover - plans only hold the kinds above
            raise AssertionError(f"unknown redistribution step {step!r}")
    return local


def partial_term(value: Any, op: str, first: bool) -> Any:
    """This rank's term of ``Partial(op)`` for a replicated ``value`` (the R -> P rule).

    The terms must reduce to ``value``: for a sum the first rank along the mesh
    dim keeps it and the others hold zeros, for a product ones; ``min``,
    ``max`` and ``avg`` of equal terms are the value itself, so all keep it.
    """
    if first or op not in ("sum", "prod"):
        return value
    xp = array_module(value)
    return xp.zeros_like(value) if op == "sum" else xp.ones_like(value)


def mesh_ranks(mesh: Any, comm: MPI.Intracomm) -> tuple[int, ...]:
    """Rank in ``comm`` of the process at each coordinate of ``mesh`` (row-major)."""
    mesh_group = mesh.comm().Get_group()
    comm_group = comm.Get_group()
    try:
        ranks = MPI.Group.Translate_ranks(mesh_group, list(range(mesh.size())), comm_group)
    finally:
        mesh_group.Free()
        comm_group.Free()
    if any(r == MPI.UNDEFINED for r in ranks):
        raise ArgumentError(
            f"redistribute: the target mesh {mesh!r} has ranks outside the source mesh; "
            "both meshes must cover the same ranks"
        )
    return tuple(int(r) for r in ranks)


def _transfer(local: Any, src: Layout, dst: Layout, mesh: Any, dst_mesh: Any) -> Any:
    comm = mesh.comm()
    src_ranks = tuple(range(comm.Get_size()))
    dst_ranks = src_ranks if dst_mesh is mesh else mesh_ranks(dst_mesh, comm)
    out_shape = dst.local_shape(dst_mesh.coordinate)
    return transfer(local, src, src_ranks, dst, dst_ranks, comm, out_shape)


def transfer(
    local: Any,
    src: Layout,
    src_ranks: tuple[int, ...],
    dst: Layout,
    dst_ranks: tuple[int, ...],
    comm: MPI.Intracomm,
    out_shape: tuple[int, ...],
) -> Any:
    """Move the rectangles of :func:`transfer_plan` with one ``Alltoallv`` over ``comm``.

    Collective over ``comm``. ``local`` is this rank's block in ``src`` (ranks
    of ``comm`` at each coordinate: ``src_ranks``); the result is its block in
    ``dst``, of shape ``out_shape``.
    """
    sends, receives = transfer_plan(src, dst, src_ranks, dst_ranks, comm.Get_rank())
    nranks = comm.Get_size()
    xp = array_module(local)
    send_counts = [0] * nranks
    pieces = []
    for rank, index in sends:
        piece = local[index]
        send_counts[rank] = piece.size
        pieces.append(piece.ravel())
    send = xp.concatenate(pieces) if pieces else xp.empty(0, local.dtype)
    recv_counts = [0] * nranks
    for rank, index in receives:
        recv_counts[rank] = math.prod(s.stop - s.start for s in index)
    flat = coll.all_to_all(send, 0, 0, comm, split_sizes=send_counts, concat_sizes=recv_counts)
    out = xp.empty(out_shape, local.dtype)
    offset = 0
    for rank, index in receives:  # in rank order, as all_to_all concatenates
        count = recv_counts[rank]
        out[index] = flat[offset : offset + count].reshape(tuple(s.stop - s.start for s in index))
        offset += count
    return out
