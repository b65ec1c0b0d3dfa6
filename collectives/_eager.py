"""One-round exchanges for small messages whose sizes the receivers do not know.

``all_gather`` and ``all_to_all`` without explicit sizes need every rank's
shape before the data can move: two rounds, two latencies. For small arrays
one round does: every rank sends a fixed-size *slot* holding its header
(dtype, its array's shape, the piece's shape) and, when its whole array fits
in the slot, the data itself. Every rank receives one slot from every rank,
so all of them see the same headers, validate alike and take the same
decision: if every rank's array fitted, the result is assembled from the
slots; otherwise the caller runs the second round with the sizes now known.

A slot holds up to 1 KiB of data (less beyond 64 ranks, so that the slot table
stays under 64 KiB whatever the rank count). Host (NumPy) arrays of at most
``EAGER_DIMS`` dimensions (beyond that, all ranks fall back together).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from dmesh.collectives.dtypes import dtype_code, dtype_from_code

EAGER_DIMS = 8
# A slot's header: fits, dtype code, ndim, the array's shape and the piece's
# shape (padded to EAGER_DIMS), as little-endian int64; the data follows.
_HEAD = struct.Struct(f"<3q{EAGER_DIMS}q{EAGER_DIMS}q")
_PAD = (0,) * EAGER_DIMS


def slot_capacity(nranks: int) -> int:
    """Bytes of data a slot carries inline for ``nranks`` ranks (a multiple of 8)."""
    return max(64, min(1024, 65536 // nranks // 8 * 8))


@dataclass
class Slots:
    """What one round of slots told every rank."""

    shapes: list[tuple[int, ...]]  # every rank's array shape, in rank order
    dtypes: list[np.dtype]
    piece_shapes: list[tuple[int, ...]]  # shape of the piece each rank sent here
    inline: list[np.ndarray] | None  # those pieces, when every rank's array fitted


# The slots are packed with struct and bytes rather than NumPy indexing: at
# these sizes each NumPy slice assignment costs more than the message itself.
def _fill(buf: bytearray, offset: int, x: np.ndarray, piece: np.ndarray, capacity: int) -> None:
    ndim = x.ndim
    if ndim > EAGER_DIMS:  # no room for the shape: the readers fall back (see _read)
        _HEAD.pack_into(buf, offset, 0, dtype_code(x.dtype), ndim, *_PAD, *_PAD)
        return
    fits = x.nbytes <= capacity
    pad = _PAD[ndim:]
    _HEAD.pack_into(
        buf, offset, fits, dtype_code(x.dtype), ndim, *x.shape, *pad, *piece.shape, *pad
    )
    if fits and piece.size:
        start = offset + _HEAD.size
        buf[start : start + piece.nbytes] = piece.tobytes()  # C order, any strides


def _read(buf: bytearray, nranks: int, slot_size: int) -> Slots | None:
    """Decode a table of slots; None if some rank's array has too many dimensions.

    Every rank reads the same headers, so every rank returns None alike and
    falls back to the full header exchange together.
    """
    heads = [_HEAD.unpack_from(buf, q * slot_size) for q in range(nranks)]
    if any(head[2] > EAGER_DIMS for head in heads):
        return None
    shapes, dtypes, piece_shapes = [], [], []
    for head in heads:
        ndim = head[2]
        shapes.append(head[3 : 3 + ndim])
        piece_shapes.append(head[3 + EAGER_DIMS : 3 + EAGER_DIMS + ndim])
        dtypes.append(dtype_from_code(head[1]))
    inline = None
    if all(head[0] for head in heads):
        inline = [
            np.frombuffer(buf, dtype, math.prod(shape), q * slot_size + _HEAD.size).reshape(shape)
            for q, (dtype, shape) in enumerate(zip(dtypes, piece_shapes))
        ]
    return Slots(shapes, dtypes, piece_shapes, inline)


def all_gather_slots(comm: MPI.Intracomm, x: np.ndarray) -> Slots | None:
    """One ``Allgather`` of slots carrying ``x`` (every rank sends the same slot to all)."""
    nranks = comm.Get_size()
    capacity = slot_capacity(nranks)
    slot_size = _HEAD.size + capacity
    mine = bytearray(slot_size)
    _fill(mine, 0, x, x, capacity)
    table = bytearray(nranks * slot_size)
    comm.Allgather([mine, MPI.BYTE], [table, MPI.BYTE])
    return _read(table, nranks, slot_size)


def all_to_all_slots(comm: MPI.Intracomm, x: np.ndarray, pieces: list[np.ndarray]) -> Slots | None:
    """One ``Alltoall`` of slots: slot ``p`` carries ``pieces[p]`` and ``x``'s header."""
    nranks = comm.Get_size()
    capacity = slot_capacity(nranks)
    slot_size = _HEAD.size + capacity
    send = bytearray(nranks * slot_size)
    for p, piece in enumerate(pieces):
        _fill(send, p * slot_size, x, piece, capacity)
    table = bytearray(nranks * slot_size)
    comm.Alltoall([send, MPI.BYTE], [table, MPI.BYTE])
    return _read(table, nranks, slot_size)
