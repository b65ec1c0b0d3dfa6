"""A compiled plan's packed reduction: known shapes, one MPI call, the layout precomputed.

The same buffer layout and MPI call as ``all_reduce_coalesced`` /
``reduce_scatter_coalesced`` (so the same bits), with what those work out at
every call (the reduction plan, piece sizes, counts, the slices that pack
and unpack the buffer) computed once, when the plan is generated. A
reduce-scatter cuts each array into balanced pieces along ``axis``; an
all-reduce is ``axis`` -1. Blocks that are not NumPy arrays (CuPy) take the
coalesced collectives, whose transports handle device memory.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh.collectives as coll
from dmesh.collectives import tracing
from dmesh.collectives.blocks import balanced_sizes, offsets_of
from dmesh.collectives.reduce_ops import reduce_plan
from dmesh.ops.compiler.packing import from_front, to_front

__all__ = ["PackedReduce"]


class PackedReduce:
    """Reduce arrays of ``shapes`` (this rank's blocks) with ``op`` over ``comm`` in one
    call: all-reduced (``axis`` -1) or reduce-scattered into balanced pieces along ``axis``."""

    def __init__(
        self, comm: MPI.Comm, op: str, dtype: np.dtype, axis: int, shapes: list[tuple[int, ...]]
    ) -> None:
        self.comm, self.op, self.axis = comm, op, axis
        self.dtype = np.dtype(dtype)
        self.plan = reduce_plan(op, self.dtype)
        nranks, rank = comm.Get_size(), comm.Get_rank()
        self.nranks = nranks
        if axis < 0:  # an all-reduce: the blocks one after another
            sizes = [math.prod(s) for s in shapes]
            starts = offsets_of(sizes)
            self.unpack = [(a, a + n, s) for a, n, s in zip(starts, sizes, shapes)]
            self.total = sum(sizes)
            return
        pieces = [balanced_sizes(s[axis], nranks) for s in shapes]
        rows = [math.prod(s[:axis] + s[axis + 1 :]) for s in shapes]
        # Rank p's segment of the send buffer holds piece p of every array in turn.
        self.cuts = [
            (i, offsets_of(piece)[p] * row, (offsets_of(piece)[p] + piece[p]) * row)
            for p in range(nranks)
            for i, (piece, row) in enumerate(zip(pieces, rows))
        ]
        self.counts = [
            sum(piece[p] * row for piece, row in zip(pieces, rows)) for p in range(nranks)
        ]
        self.unpack = []
        start = 0
        for s, piece, row in zip(shapes, pieces, rows):
            n = piece[rank] * row
            front = (piece[rank], *s[:axis], *s[axis + 1 :])
            self.unpack.append((start, start + n, front))
            start += n
        self.total = self.counts[rank]

    def start(self, blocks: list[Any], started: bool) -> Any:
        """Pack ``blocks`` and make the call (``started``: non-blocking). Collective."""
        if not all(type(b) is np.ndarray for b in blocks):  # device arrays: the transports
            if self.axis < 0:
                return coll.all_reduce_coalesced(blocks, self.op, self.comm)
            return coll.reduce_scatter_coalesced(blocks, self.op, self.axis, self.comm)
        plan = self.plan
        if self.axis < 0:
            send = np.concatenate(
                [np.ascontiguousarray(b, dtype=plan.wire).reshape(-1) for b in blocks]
            )
        else:
            fronts = [to_front(b, self.axis, plan.wire).reshape(-1) for b in blocks]
            send = np.concatenate([fronts[i][a:b] for i, a, b in self.cuts])
        recv = np.empty(self.total, plan.wire)
        if tracing.hooked:  # CommMode and explain count it as the one call it is
            kind = "all_reduce" if self.axis < 0 else "reduce_scatter"
            name = kind + ("_coalesced" if len(blocks) > 1 else "")
            tracing.direct(name, self.comm, send.nbytes, recv.nbytes)
        send_spec, recv_spec = [send, plan.datatype], [recv, plan.datatype]
        request: Any = None
        comm = self.comm
        if self.axis < 0 and started:
            request = comm.Iallreduce(send_spec, recv_spec, plan.mpi_op)
        elif self.axis < 0:
            comm.Allreduce(send_spec, recv_spec, plan.mpi_op)
        elif started:
            request = comm.Ireduce_scatter(send_spec, recv_spec, self.counts, plan.mpi_op)
        else:
            comm.Reduce_scatter(send_spec, recv_spec, self.counts, plan.mpi_op)
        return request, send, recv

    def finish(self, made: Any) -> list[Any]:
        """The reduced arrays of a call :meth:`start` made (waits for a started one)."""
        if isinstance(made, list):  # the coalesced collectives' results
            return [r.astype(self.dtype, copy=False) for r in made]
        request, _, recv = made
        if request is not None:
            tracing.wait_all([request])
        flat = self.plan.finish(recv, self.nranks)
        results = []
        for a, b, shape in self.unpack:
            piece = flat[a:b].reshape(shape)
            if self.axis >= 0:
                piece = from_front(piece, self.axis)
            results.append(piece.astype(self.dtype, copy=False))
        return results
