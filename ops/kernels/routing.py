"""Queries answered by the owners of a sorted, sharded 1-D DArray (searchsorted, isin).

A sorted array sharded along its only axis is cut into blocks in global order,
so the block that can answer a query ``v`` is known from the first value of each
block alone: the last non-empty block whose first value is below ``v`` (or at
most ``v``). Every rank learns the blocks' first values (one all-gather of one
value per rank), sends each of its queries to the block that answers it (one
all-to-all of the counts, one of the queries), the owners answer from their own
block, and the answers come back the same way (one all-to-all). No rank holds
more than its own block of the sorted array and its own queries' answers.

Also: the small helpers the set and search kernels share (a NumPy array seen as
a replicated DArray, a 1-D result of uneven blocks wrapped as a DArray).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.errors import ArgumentError
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = ["as_replicated", "owner_comm", "route", "wrap_uneven"]

# answer(block, offset, queries) -> one answer per query (a 1-D array)
Answer = Callable[[np.ndarray, int, np.ndarray], np.ndarray]


def as_replicated(x: Any, mesh: Any) -> DArray:
    """``x`` (a DArray: its partial terms reduced; else anything ``np.asarray`` takes) as a DArray.

    A NumPy value is the same on every rank, so it becomes a replicated
    DArray with no message.
    """
    if isinstance(x, DArray):
        if x.mesh is not mesh and x.mesh != mesh:
            raise ArgumentError(f"operands on different meshes: {x.mesh!r} and {mesh!r}")
        return x.reduce_partials()
    value = np.asarray(x)
    layout = Layout.balanced(mesh.shape, (Replicate(),) * mesh.ndim, value.shape)
    return DArray(value, DArraySpec(mesh, layout, value.dtype))


def owner_comm(a: DArray) -> tuple[tuple[int, ...], Any]:
    """The mesh dims sharding ``a``'s dim 0 and their communicator (None when none does).

    Rank order in that communicator is block order along dim 0.
    """
    mesh_dims = sharding_mesh_dims(a.placements, 0)
    if not mesh_dims or not a.mesh.is_member:
        return mesh_dims, None
    return mesh_dims, a.mesh[mesh_dims].comm()


def wrap_uneven(local: np.ndarray, mesh: Any, mesh_dims: tuple[int, ...], comm: Any) -> DArray:
    """A 1-D DArray of this rank's ``local`` piece, sharded over ``mesh_dims`` in rank order.

    Collective over ``comm`` (one all-gather of one size per rank); with no
    sharding mesh dim (``comm`` None) the pieces are the whole array, the same
    on every rank. The other mesh dims must hold the same pieces (replicas).
    """
    placements = tuple(Shard(0) if m in mesh_dims else Replicate() for m in range(mesh.ndim))
    if comm is None:
        layout = Layout(mesh.shape, placements, (local.shape[0],), (None,))
        return DArray(local, DArraySpec(mesh, layout, local.dtype))
    sizes = coll.all_gather(
        np.array([local.shape[0]], dtype=np.int64), 0, comm, sizes=[1] * comm.Get_size()
    )
    bounds = tuple(int(b) for b in np.concatenate([[0], np.cumsum(sizes)]))
    layout = Layout(mesh.shape, placements, (bounds[-1],), (bounds,))
    return DArray(local, DArraySpec(mesh, layout, local.dtype))


def route(a: DArray, queries: np.ndarray, answer: Answer, side: str, answer_dtype: Any) -> Any:
    """``answer`` for each of this rank's ``queries`` (1-D), by the block of sorted ``a`` owning it.

    ``a`` is 1-D, sorted, with no partial terms. A query goes to the last
    non-empty block whose first value is below it (``side='left'``) or at most
    it (``side='right'``), or to the first non-empty block when there is none;
    ``answer(block, offset, received)`` runs there (``offset``: the block's
    global start). Collective over the ranks sharding ``a`` (none when ``a``
    is not sharded: ``answer`` runs on this rank's copy).
    """
    _, comm = owner_comm(a)
    block = np.asarray(a.local)
    if comm is None:
        return answer(block, 0, queries)
    p = comm.Get_size()
    cut = a.spec.layout.bounds[0]
    assert cut is not None
    sizes = np.diff(np.asarray(cut))
    full = np.flatnonzero(sizes > 0)  # every rank knows the layout: no message
    if full.size == 0:  # an empty array: every block answers alike
        return answer(block, 0, queries)
    firsts = coll.all_gather(block[:1], 0, comm, sizes=[1 if s else 0 for s in sizes.tolist()])
    # With mixed dtypes NumPy compares in the common dtype, as np.searchsorted does in a block.
    owner = np.searchsorted(firsts, queries, side=side) - 1  # type: ignore[call-overload]
    dest = full[np.maximum(owner, 0)]
    order = np.argsort(dest, kind="stable")
    counts = np.bincount(dest, minlength=p).astype(np.int64)
    incoming = coll.all_to_all(counts, 0, 0, comm, split_sizes=[1] * p, concat_sizes=[1] * p)
    received = coll.all_to_all(
        queries[order], 0, 0, comm, split_sizes=counts.tolist(), concat_sizes=incoming.tolist()
    )
    answers = np.asarray(answer(block, int(cut[comm.Get_rank()]), received), dtype=answer_dtype)
    back = coll.all_to_all(
        answers, 0, 0, comm, split_sizes=incoming.tolist(), concat_sizes=counts.tolist()
    )
    out = np.empty(queries.shape[0], dtype=answer_dtype)
    out[order] = back
    return out
