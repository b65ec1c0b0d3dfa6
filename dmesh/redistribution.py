"""Redistribution: move a DArray's data from one layout to another. Plan, then execute.

The plans come from :mod:`dmesh.core.plan` (pure, cached; its docstring
holds the transition table); this module runs them: one small executor per
step kind, and one *transfer* (local copies of the pieces a rank keeps and a
single ``Alltoallv`` of the rectangles where source and target blocks meet
across ranks) for everything the per-dim steps cannot do.
"""

from __future__ import annotations

import math
from typing import Any

from mpi4py import MPI

import dmesh.collectives as coll
from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError
from dmesh.core.layout import Layout
from dmesh.core.plan import Step, crop_index
from dmesh.core.transfers import transfer_crosses, transfer_plan

__all__ = ["partial_term", "run_steps", "transfer"]


# -- execution ---------------------------------------------------------------------
def run_steps(local: Any, steps: tuple[Step, ...], mesh: Any, dst_mesh: Any) -> Any:
    """Run ``steps`` on this rank's block ``local`` (on ``mesh``; the target on ``dst_mesh``).

    Collectives get the mesh dim's communicator itself, which takes the
    collectives' fast path for small messages. A plan without steps (the
    layouts differ on mesh dims of size 1 only) gives a copy of the block, as
    the collectives it replaces did: the result never shares memory with the
    source because a mesh dim has size 1. Nor does it when every step keeps
    the block (``R -> P(max)``: each term is the value itself).
    """
    source = local
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
        elif kind == "crop":
            _, before, after = step
            local = local[crop_index(before, after, mesh.coordinate)].copy()
        elif kind == "transfer":
            _, before, after = step
            local = _transfer(local, before, after, mesh, dst_mesh)
        elif kind == "make_partial":
            _, m, op = step
            local = partial_term(local, op, dst_mesh.coordinate[m] == 0)
        else:  # pragma: no cover - plans only hold the kinds above
            raise AssertionError(f"unknown redistribution step {step!r}")
    return local.copy() if local is source else local


def partial_term(value: Any, op: str, first: bool) -> Any:
    """This rank's term of ``Partial(op)`` for a replicated ``value`` (the R -> P rule).

    The terms must reduce to ``value``: for a sum the first rank along the mesh
    dim keeps it and the others hold zeros (``-0.0`` for floats, the additive
    identity that keeps a ``-0.0`` value: ``-0.0 + 0.0`` would be ``+0.0``),
    for a product ones; ``min`` and ``max`` of equal terms are the value
    itself, so all keep it, and so does ``avg``, whose average of equal terms
    is the value up to the rounding of a sum divided by the group size.
    """
    if first or op not in ("sum", "prod"):
        return value
    xp = array_module(value)
    if op == "prod":
        return xp.ones_like(value)
    if value.dtype.kind in "fc":
        return xp.full_like(value, complex(-0.0, -0.0) if value.dtype.kind == "c" else -0.0)
    return xp.zeros_like(value)


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
    """Move the rectangles of :func:`~dmesh.core.transfers.transfer_plan` over ``comm``.

    Collective over ``comm``. ``local`` is this rank's block in ``src`` (ranks
    of ``comm`` at each coordinate: ``src_ranks``); the result is its block in
    ``dst``, of shape ``out_shape``. The piece a rank keeps is copied straight
    from ``local``; the pieces that cross ranks travel in one ``Alltoallv``
    (zero counts to itself), skipped on every rank when none crosses, which
    every rank knows from the layouts (``transfer_crosses``).
    """
    me = comm.Get_rank()
    sends, receives = transfer_plan(src, dst, src_ranks, dst_ranks, me)
    xp = array_module(local)
    kept = [index for rank, index in sends if rank == me]
    into = [index for rank, index in receives if rank == me]
    incoming = [(rank, index) for rank, index in receives if rank != me]
    flat = xp.empty(0, local.dtype)  # what arrives; nothing when no piece crosses ranks
    if transfer_crosses(src, dst, src_ranks, dst_ranks):
        flat = _exchange(local, [(r, i) for r, i in sends if r != me], incoming, comm)
        if not into and len(incoming) == 1 and flat.size == math.prod(out_shape):
            return flat.reshape(out_shape)  # one piece is the whole block: no copy
    out = xp.empty(out_shape, local.dtype)
    if into:
        out[into[0]] = local[kept[0]]
    offset = 0
    for _, index in incoming:  # in rank order, as all_to_all concatenates
        shape = tuple(s.stop - s.start for s in index)
        count = math.prod(shape)
        out[index] = flat[offset : offset + count].reshape(shape)
        offset += count
    return out


def _exchange(
    local: Any,
    sends: list[tuple[int, tuple[slice, ...]]],
    receives: list[tuple[int, tuple[slice, ...]]],
    comm: MPI.Intracomm,
) -> Any:
    """One ``Alltoallv`` of the pieces of ``local`` in ``sends``: what ``receives`` names, flat.

    The pieces are packed into one buffer with one copy each (none for a
    lone contiguous piece).
    """
    nranks = comm.Get_size()
    xp = array_module(local)
    send_counts = [0] * nranks
    shapes = []
    for rank, index in sends:
        shapes.append(tuple(s.stop - s.start for s in index))
        send_counts[rank] = math.prod(shapes[-1])
    if len(sends) == 1:
        send = xp.ascontiguousarray(local[sends[0][1]]).reshape(-1)
    else:
        send = xp.empty(sum(send_counts), local.dtype)
        offset = 0
        for (rank, index), shape in zip(sends, shapes):
            count = send_counts[rank]
            send[offset : offset + count].reshape(shape)[...] = local[index]
            offset += count
    recv_counts = [0] * nranks
    for rank, index in receives:
        recv_counts[rank] = math.prod(s.stop - s.start for s in index)
    return coll.all_to_all(send, 0, 0, comm, split_sizes=send_counts, concat_sizes=recv_counts)
