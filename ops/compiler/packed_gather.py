"""A compiled plan's packed all-gather: known shapes, one ``Iallgatherv``, no header.

When a plan is generated every rank's block shape of every gathered array
is known from the layouts, so the counts, displacements and the slices that
unpack the received buffer are computed once; a call only copies the blocks
into one buffer, starts one non-blocking ``Allgatherv`` and, at the first
use, cuts the results out. Data moves unchanged, so the results have the
bits of separate gathers. Blocks that are not NumPy arrays (CuPy) take
``all_gather_coalesced``, whose transports handle device memory.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh.collectives as coll
from dmesh.collectives import tracing
from dmesh.collectives.blocks import offsets_of
from dmesh.collectives.dtypes import mpi_datatype
from dmesh.ops.compiler.packing import from_front, to_front

__all__ = ["PackedGather"]


class PackedGather:
    """All-gather arrays along ``axis`` over ``comm`` in one call; ``shapes[r][i]`` is
    rank ``r``'s block shape of array ``i`` (the same on every rank)."""

    def __init__(
        self, comm: MPI.Comm, axis: int, shapes: list[list[tuple[int, ...]]], dtype: np.dtype
    ) -> None:
        self.comm, self.axis, self.dtype = comm, axis, np.dtype(dtype)
        self.sizes = [[shape[i][axis] for shape in shapes] for i in range(len(shapes[0]))]
        elements = [[math.prod(s) for s in row] for row in shapes]
        self.counts = [sum(row) for row in elements]
        self.displs = offsets_of(self.counts)
        self.total = sum(self.counts)
        self.datatype = mpi_datatype(self.dtype)
        # For each array, each rank's piece: (start, stop) in the buffer and its shape
        # with the gathered axis first.
        self.pieces = []
        for i in range(len(shapes[0])):
            row = []
            for r, shape in enumerate(shapes):
                start = self.displs[r] + sum(elements[r][:i])
                front = (shape[i][axis], *shape[i][:axis], *shape[i][axis + 1 :])
                row.append((start, start + elements[r][i], front))
            self.pieces.append(row)

    def start(self, blocks: list[Any]) -> Any:
        """Copy ``blocks`` into one buffer and start the gather (collective)."""
        if not all(type(b) is np.ndarray for b in blocks):  # device arrays: the transports
            return coll.all_gather_coalesced(blocks, self.axis, self.comm, sizes=self.sizes)
        send = np.concatenate([to_front(b, self.axis).reshape(-1) for b in blocks])
        recv = np.empty(self.total, self.dtype)
        if tracing.hooked:  # CommMode and explain count it as the one call it is
            name = "all_gather_coalesced" if len(blocks) > 1 else "all_gather"
            tracing.direct(name, self.comm, send.nbytes, recv.nbytes)
        request = self.comm.Iallgatherv(
            [send, self.datatype], [recv, (self.counts, self.displs), self.datatype]
        )
        return request, send, recv

    def finish(self, started: Any) -> list[Any]:
        """The gathered arrays of a started call (waits for it)."""
        if isinstance(started, list):  # all_gather_coalesced's results
            return started
        request, _, recv = started
        tracing.wait_all([request])
        results = []
        for row in self.pieces:
            parts = [recv[a:b].reshape(front) for a, b, front in row]
            whole = parts[0].copy() if len(parts) == 1 else np.concatenate(parts)
            results.append(from_front(whole, self.axis))  # C-contiguous, as all_gather's
        return results
