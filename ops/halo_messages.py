"""The cells that cross ranks in a shifted-slice op (:mod:`dmesh.ops.aligned`) or a roll
along a sharded axis (``ops/kernels/roll.py``): packed, sent, received.

Unwatched, every rank posts its receives, packs the cells its neighbours
need into one buffer and sends each neighbour its part, point to point; the
caller does its local work (the pieces that need no received cells, the
rows it keeps) while they travel, then waits (:func:`start`). The buffers,
the typed place of each packed part and the view of each received piece
(:func:`kept`) are made per call, or once and kept with a shifted-slice op's
prepared step or a roll's plan where they are small (``KEPT_BYTES``, 1 MiB);
kept buffers are exchanged by persistent requests (:class:`Posted`). A debug tool
watching sees one ``Alltoallv`` of the packed bytes through
:func:`dmesh.collectives.all_to_all` (:func:`watched`). Every
rank takes the same path: whether cells cross comes from the layouts, and a
debug tool watches every rank or none.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from mpi4py import MPI

import dmesh.collectives as coll

__all__ = ["KEPT_BYTES", "Kept", "Posted", "kept", "start", "watched"]

KEPT_BYTES = 1 << 20  # exchanges moving more than this (per rank) allocate per call
TAG = 0xA11  # the point-to-point messages of these exchanges, each complete before its op returns

Parts = tuple[tuple[int, tuple[slice, ...]], ...]  # (operand, its block's cells), packed in order
Counts = tuple[list[int], list[int]]  # byte counts and displacements per rank
Incoming = Any  # per received part: (begin, nbytes, shape, dtype) in the receive buffer


class Kept(NamedTuple):
    """The messages of one prepared exchange, laid out on their buffers."""

    receives: tuple[tuple[Any, int], ...]  # (its part of the receive buffer, source rank)
    sends: tuple[tuple[Any, int], ...]  # (its part of the send buffer, destination rank)
    pack: tuple[tuple[int, tuple[slice, ...], Any], ...]  # (operand, its cells, place in send)
    received: list[Any]  # each received part, typed and shaped, in the order of incoming
    # For buffers kept across calls: a one-slot cell for their persistent requests
    # (:class:`Posted`, made by the first :func:`start`); None for one call's buffers.
    posted: list[Posted] | None = None


class Posted:
    """The persistent requests (``Recv_init``/``Send_init``) of a kept exchange on ``comm``.

    A repeated exchange starts them (``Startall``) instead of posting new
    ``Irecv``/``Isend``: mpi4py then parses no buffer and MPI matches no new
    request, about 2 us of a 7 us halo at 2 ranks. Freed when dropped (the
    prepared step or roll that keeps them is evicted), unless MPI is finalized.
    """

    __slots__ = ("all", "comm", "receives", "sends")

    def __init__(self, kept: Kept, comm: MPI.Intracomm) -> None:
        self.comm = comm
        self.receives = [comm.Recv_init(buf, source, TAG) for buf, source in kept.receives]
        self.sends = [comm.Send_init(buf, dest, TAG) for buf, dest in kept.sends]
        self.all: list[MPI.Request] = [*self.receives, *self.sends]

    def __del__(self) -> None:
        if not MPI.Is_finalized():
            for request in self.all:
                if request:  # (MPI.REQUEST_NULL is false)
                    request.Free()


def kept(
    operands: list[Any],
    outgoing: Parts,
    send: Counts,
    receive: Counts,
    incoming: Incoming,
    reused: bool = False,
) -> Kept:
    """The messages of an exchange on new buffers (see :class:`Kept`): ``outgoing`` names
    the cells of the DArrays in ``operands`` to send, in rank order; ``send`` and
    ``receive`` the byte counts and displacements per rank; ``incoming`` where each
    received part lies in the receive buffer. ``reused``: the buffers serve repeated
    exchanges (kept with a prepared step), which then start persistent requests."""
    send_buf = np.empty(sum(send[0]), np.uint8)
    receive_buf = np.empty(sum(receive[0]), np.uint8)
    pack = []
    at = 0
    for operand, index in outgoing:
        dtype = operands[operand].dtype
        shape = tuple(s.stop - s.start for s in index)
        nbytes = math.prod(shape) * dtype.itemsize
        pack.append((operand, index, send_buf[at : at + nbytes].view(dtype).reshape(shape)))
        at += nbytes
    received = [
        receive_buf[begin : begin + nbytes].view(dtype).reshape(shape)
        for begin, nbytes, shape, dtype in incoming
    ]
    receives = tuple(
        (receive_buf[start : start + count], rank)
        for rank, (count, start) in enumerate(zip(*receive))
        if count
    )
    sends = tuple(
        (send_buf[start : start + count], rank)
        for rank, (count, start) in enumerate(zip(*send))
        if count
    )
    return Kept(receives, sends, tuple(pack), received, [] if reused else None)


def start(kept: Kept, operands: list[Any], comm: MPI.Intracomm) -> list[MPI.Request]:
    """Post the receives, pack the crossing cells and send them; the requests to wait for
    (persistent ones, started again, for buffers kept across calls)."""
    cell = kept.posted
    if cell is not None:
        posted = cell[0] if cell else None
        if posted is None or posted.comm is not comm:
            posted = Posted(kept, comm)
            cell[:] = [posted]
        if posted.receives:
            MPI.Prequest.Startall(posted.receives)
        for operand, index, place in kept.pack:
            place[...] = operands[operand]._local[index]
        if posted.sends:
            MPI.Prequest.Startall(posted.sends)
        return posted.all
    requests = [comm.Irecv(buf, source, TAG) for buf, source in kept.receives]
    for operand, index, place in kept.pack:
        place[...] = operands[operand]._local[index]
    requests += [comm.Isend(buf, dest, TAG) for buf, dest in kept.sends]
    return requests


def watched(
    operands: list[Any],
    outgoing: Parts,
    send: Counts,
    receive: Counts,
    incoming: Incoming,
    comm: Any,
) -> list[Any]:
    """The crossing cells of every moved operand in one ``Alltoallv`` of bytes, through
    :func:`dmesh.collectives.all_to_all` (a debug tool watching sees it there).

    Returns the received pieces, each in its shape, in the order of ``incoming``.
    """
    buffer = np.empty(sum(send[0]), np.uint8)
    at = 0
    for operand, index in outgoing:  # one copy each, straight into the send buffer
        part = operands[operand]._local[index]
        buffer[at : at + part.nbytes].view(part.dtype).reshape(part.shape)[...] = part
        at += part.nbytes
    flat = coll.all_to_all(buffer, 0, 0, comm, split_sizes=send[0], concat_sizes=receive[0])
    return [
        flat[begin : begin + nbytes].view(dtype).reshape(shape)
        for begin, nbytes, shape, dtype in incoming
    ]
