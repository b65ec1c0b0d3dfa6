"""Pieces every collective shares: argument checks, axis packing, headers, completion."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from dmesh.collectives.async_array import AsyncArray, Pending
from dmesh.collectives.device import array_module, is_device_array
from dmesh.collectives.dtypes import SUPPORTED_CODES, check_dtype, dtype_code, dtype_from_code
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError

MAX_DIMS = 64  # numpy.ndarray's dimension limit (NPY_MAXDIMS in NumPy 2)


def as_array(x: Any, argument: str = "x") -> Any:
    """``x`` as a NumPy or CuPy array of a dtype collectives can move."""
    if type(x) is np.ndarray and x.dtype.char in SUPPORTED_CODES and x.dtype.isnative:
        return x  # the common case first: this is on every call's path
    if is_device_array(x) or isinstance(x, np.ndarray):
        array = x
    else:
        if x is None:
            raise ArgumentTypeError(f"{argument}: expected an array, got None")
        array = np.asarray(x)
    check_dtype(array.dtype, argument)
    return array


def check_flag(value: Any, argument: str) -> bool:
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{argument}: expected True or False, got {value!r}")
    return value


def check_root(root: Any, size: int, argument: str) -> int:
    if not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < size:
        raise ArgumentError(
            f"{argument}={root!r} is not a rank of the group; allowed: 0 to {size - 1}"
        )
    return root


def to_front(x: Any, axis: int, dtype: np.dtype | None = None) -> Any:
    """A C-contiguous copy of ``x`` with ``axis`` first (no copy when already so)."""
    xp = array_module(x)
    moved = x if axis == 0 else xp.moveaxis(x, axis, 0)
    return xp.ascontiguousarray(moved, dtype=dtype)


def from_front(buf: Any, axis: int) -> Any:
    """Undo :func:`to_front`: move the first axis back to ``axis``, C-contiguous."""
    if axis == 0:
        return buf
    xp = array_module(buf)
    return xp.ascontiguousarray(xp.moveaxis(buf, 0, axis))


def row_size(shape: Sequence[int], axis: int) -> int:
    """Number of elements in one index of ``axis``."""
    n = 1
    for i, s in enumerate(shape):
        if i != axis:
            n *= s
    return n


# -- headers ---------------------------------------------------------------
def encode_header(shape: Sequence[int], dtype: np.dtype, extra: Sequence[int] = ()) -> np.ndarray:
    """``[ndim, dtype code, shape padded to MAX_DIMS, *extra]`` as int64."""
    header = np.zeros(2 + MAX_DIMS + len(extra), dtype=np.int64)
    header[0] = len(shape)
    header[1] = dtype_code(dtype)
    header[2 : 2 + len(shape)] = shape
    header[2 + MAX_DIMS :] = extra
    return header


def decode_header(header: np.ndarray) -> tuple[tuple[int, ...], np.dtype, tuple[int, ...]]:
    ndim = int(header[0])
    shape = tuple(int(s) for s in header[2 : 2 + ndim])
    extra = tuple(int(v) for v in header[2 + MAX_DIMS :])
    return shape, dtype_from_code(int(header[1])), extra


def all_gather_headers(
    comm: MPI.Intracomm, shape: Sequence[int], dtype: np.dtype, extra: Sequence[int] = ()
) -> list[tuple[tuple[int, ...], np.dtype, tuple[int, ...]]]:
    """Every rank's (shape, dtype, extra), in rank order (one small ``Allgather``)."""
    mine = encode_header(shape, dtype, extra)
    table = np.empty((comm.Get_size(), mine.size), dtype=np.int64)
    comm.Allgather(mine, table)
    return [decode_header(row) for row in table]


def check_same_except(
    headers: Sequence[tuple[tuple[int, ...], np.dtype, tuple[int, ...]]],
    axis: int | None,
    what: str,
) -> None:
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


# -- completion --------------------------------------------------------------
def start_async(
    nonblocking: Callable[[], Sequence[MPI.Request]],
    finish: Callable[[], Any],
    shape: tuple[int, ...],
    dtype: np.dtype,
) -> AsyncArray:
    """Start a non-blocking call and return its result as an :class:`AsyncArray`."""
    # The Pending keeps `nonblocking`, whose closure holds the buffers.
    return AsyncArray(Pending(nonblocking(), lambda: (finish(),), nonblocking), 0, shape, dtype)


def complete(
    async_op: bool,
    blocking: Callable[[], object],
    nonblocking: Callable[[], Sequence[MPI.Request]],
    finish: Callable[[], Any],
    shape: tuple[int, ...],
    dtype: np.dtype,
) -> Any:
    """Run the blocking MPI call and finish, or start the non-blocking one as an AsyncArray.

    Blocking calls are kept for the synchronous path: MPI libraries tune them
    separately, and their non-blocking twins are often slower for one message.
    """
    if async_op:
        return start_async(nonblocking, finish, shape, dtype)
    blocking()
    return finish()
