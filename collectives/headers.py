"""Small metadata messages: array headers (shape, dtype, extras) and byte strings.

A header is ``[ndim, dtype code, shape padded to MAX_DIMS, *extra]`` as int64,
a fixed-size buffer every rank can receive without knowing the sender's
array: collectives send one before the data when a receiver cannot know the
other ranks' shapes, and ``dmesh`` uses the same encoding for its own
announcements (``distribute(src=...)``). Byte strings (a manifest, an error
message) travel as a length, then the bytes, so nothing is pickled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from mpi4py import MPI

from dmesh.collectives import tracing
from dmesh.collectives.dtypes import dtype_code, dtype_from_code
from dmesh.collectives.errors import ArgumentError

__all__ = [
    "MAX_DIMS",
    "Header",
    "all_gather_headers",
    "broadcast_bytes",
    "check_same_except",
    "decode_header",
    "encode_header",
]

MAX_DIMS = 64  # numpy.ndarray's dimension limit (NPY_MAXDIMS in NumPy 2)

Header = tuple[tuple[int, ...], np.dtype, tuple[int, ...]]
"""A decoded header: (shape, dtype, extra integers)."""


def encode_header(shape: Sequence[int], dtype: np.dtype, extra: Sequence[int] = ()) -> np.ndarray:
    """``[ndim, dtype code, shape padded to MAX_DIMS, *extra]`` as int64."""
    header = np.zeros(2 + MAX_DIMS + len(extra), dtype=np.int64)
    header[0] = len(shape)
    header[1] = dtype_code(dtype)
    header[2 : 2 + len(shape)] = shape
    header[2 + MAX_DIMS :] = extra
    return header


def decode_header(header: np.ndarray) -> Header:
    """Undo :func:`encode_header`: ``(shape, dtype, extra)``."""
    ndim = int(header[0])
    shape = tuple(int(s) for s in header[2 : 2 + ndim])
    extra = tuple(int(v) for v in header[2 + MAX_DIMS :])
    return shape, dtype_from_code(int(header[1])), extra


def all_gather_headers(
    comm: MPI.Intracomm, shape: Sequence[int], dtype: np.dtype, extra: Sequence[int] = ()
) -> list[Header]:
    """Every rank's (shape, dtype, extra), in rank order (one small ``Allgather``). Collective."""
    mine = encode_header(shape, dtype, extra)
    table = np.empty((comm.Get_size(), mine.size), dtype=np.int64)
    comm.Allgather(mine, table)
    return [decode_header(row) for row in table]


def check_same_except(headers: Sequence[Header], axis: int | None, what: str) -> None:
    """Raise (on every rank: all hold the same headers) unless shapes agree off ``axis``."""
    shape0, dtype0, _ = headers[0]
    for rank, (shape, dtype, _) in enumerate(headers):
        off_axis = [s for i, s in enumerate(shape) if i != axis]
        off_axis0 = [s for i, s in enumerate(shape0) if i != axis]
        if dtype != dtype0 or len(shape) != len(shape0) or off_axis != off_axis0:
            along = "" if axis is None else f" except along axis {axis}"
            raise ArgumentError(
                f"{what}: the ranks' arrays must agree in dtype and shape{along}; rank 0 has "
                f"{dtype0}{list(shape0)} but rank {rank} has {dtype}{list(shape)}"
            )


def broadcast_bytes(comm: MPI.Comm, data: bytes, root: int = 0) -> bytes:
    """Rank ``root``'s ``data`` on every rank (two ``Bcast``: length, bytes). Collective.

    The other ranks' ``data`` is ignored. Recorded as one broadcast by the
    debug tools.
    """
    length = np.array([len(data)], np.int64)
    # Two messages (length, bytes), checked before the first and recorded as one
    # broadcast once every rank knows the length.
    call = tracing.direct("broadcast", comm, record=False) if tracing.hooked else None
    comm.Bcast(length, root)
    if call is not None:
        is_root = comm.Get_rank() == root
        tracing.record_direct(call, (8 + int(length[0])) * is_root, 8 + int(length[0]))
    buf: np.ndarray = np.frombuffer(data, np.uint8).copy()
    if comm.Get_rank() != root:
        buf = np.empty(int(length[0]), np.uint8)
    comm.Bcast(buf, root)
    return bytes(buf.tobytes())
