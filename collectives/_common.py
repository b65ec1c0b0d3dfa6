"""Pieces every collective shares: argument checks, axis packing, completion.

Headers (shapes and dtypes sent ahead of data) are public, in :mod:`dmesh.collectives.headers`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from dmesh.collectives.async_array import AsyncArray, Pending
from dmesh.collectives.device import array_module, is_device_array
from dmesh.collectives.dtypes import SUPPORTED_CODES, check_dtype
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError


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
