"""all_reduce's results bit for bit: NaN payloads, integer extremes, empty and one-element arrays.

MPI adds the terms in another order on each rank, and a sum (or a maximum)
of two NaNs keeps the sign and payload of one of them: ``all_reduce`` makes
NaNs ``+nan`` wherever ranks combine, so every rank holds the same bits.
The sizes cover each path: one element, a few (checked in Python), a
medium array (one ``Allreduce`` and a ``min``) and arrays of 768 KiB, split
into a reduce-scatter and an all-gather when the rank count divides them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh.collectives as C
from helpers import assert_all, assert_equal_all
from references import reduce_reference

FLOATS = (np.float16, np.float32, np.float64, np.complex64, np.complex128)
# 768 KiB: above the split size (collectives/reductions.py), and a number of
# elements divisible by 1, 2, 3 and 4 ranks for every itemsize (the odd size
# after it takes the Allreduce path).
SPLIT = 3 * 2**18


def _sizes(dtype: Any) -> tuple[int, ...]:
    big = SPLIT // np.dtype(dtype).itemsize
    return (1, 8, 33, 1000, big, big + 1)


_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _payload_nans(dtype: Any, n: int, rank: int) -> np.ndarray:
    """``n`` values of ``dtype`` with NaNs of a payload and sign particular to ``rank``.

    Every third element is NaN on every rank (the NaN-and-NaN case that
    differs between orders), every fifth on this rank only, and the rest
    finite values; complex values get the NaNs in the real or imaginary part.
    """
    real = np.dtype(dtype).type(0).real.dtype
    values = np.random.default_rng([rank, n]).standard_normal(n)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * np.random.default_rng([rank, n, 1]).standard_normal(n)
    x = np.asarray(values).astype(dtype)
    parts = x.view(real)
    bits = parts.view(_BITS[real.itemsize])
    nan_bits = np.full(1, np.nan, real).view(bits.dtype)[0]
    sign = bits.dtype.type(1) << bits.dtype.type(8 * real.itemsize - 1)
    payload = bits.dtype.type(rank + 1) | (sign if rank % 2 else bits.dtype.type(0))
    bits[0::3] = nan_bits | payload
    bits[rank % 5 :: 5] = nan_bits | payload | bits.dtype.type(2)  # (another payload)
    return x


def _check_same_bits(comm: MPI.Intracomm, got: Any, want: np.ndarray, label: str) -> None:
    """The same bytes on every rank, +nan wherever NaN (2+ ranks), the values of ``want``."""
    real = got.view(got.real.dtype) if got.ndim else got.reshape(1).view(got.real.dtype)
    nan = np.isnan(real)
    canonical = comm.Get_size() == 1 or (
        real[nan].tobytes() == np.full(int(nan.sum()), np.nan, real.dtype).tobytes()
    )
    rtol = 1e-2 if got.real.dtype == np.float16 else 1e-5
    close = got.shape == want.shape and np.allclose(got, want, rtol, rtol, equal_nan=True)
    same = len(set(comm.allgather(got.tobytes()))) == 1
    assert_all(comm, same and canonical and close, f"{label}: same {same}, +nan {canonical}, "
               f"values {close}")  # fmt: skip


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_payloads_give_the_same_bits(comm: MPI.Intracomm, op: str, dtype: Any) -> None:
    """A NaN with a payload on one rank and -nan on another: identical bits on every rank."""
    if op in ("max", "min") and np.dtype(dtype).kind == "c":
        pytest.skip("complex numbers are not ordered")
    n, rank = comm.Get_size(), comm.Get_rank()
    for size in _sizes(dtype):
        inputs = [_payload_nans(dtype, size, r) for r in range(n)]
        want = reduce_reference(op, inputs)
        mine = inputs[rank]
        _check_same_bits(comm, C.all_reduce(mine, op, comm), want, f"{op} {size}")
        _check_same_bits(comm, C.all_reduce(mine.reshape(1, -1), op, comm),
                         want.reshape(1, -1), f"{op} {size} 2-d")  # fmt: skip
        if size <= 33:  # the general path: strided, and non-blocking
            spread = np.repeat(mine, 2)[::2]
            _check_same_bits(comm, C.all_reduce(spread, op, comm), want, f"{op} {size} strided")
            waited = C.all_reduce(mine, op, comm, async_op=True).wait()
            _check_same_bits(comm, waited, want, f"{op} {size} async")
            coalesced = C.all_reduce_coalesced([mine, mine[:1]], op, comm)
            _check_same_bits(comm, coalesced[0], want, f"{op} {size} coalesced")


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_one_element_nan_payloads(comm: MPI.Intracomm, op: str) -> None:
    """0-d and one-element arrays (the scalar path): a payload NaN and -nan meet."""
    n, rank = comm.Get_size(), comm.Get_rank()
    for dtype in (np.float32, np.float64):
        inputs = [_payload_nans(dtype, 1, r) for r in range(n)]
        want = reduce_reference(op, inputs)
        for shape in ((), (1,), (1, 1)):
            got = C.all_reduce(inputs[rank].reshape(shape), op, comm)
            _check_same_bits(comm, got, want.reshape(shape), f"{op} {dtype.__name__} {shape}")


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint64, np.uint8])
def test_integer_extremes(comm: MPI.Intracomm, dtype: Any) -> None:
    """Sums that wrap around, products, max and min of the extremes: NumPy's answer."""
    n, rank = comm.Get_size(), comm.Get_rank()
    info = np.iinfo(dtype)
    for size in (1, 8, SPLIT // np.dtype(dtype).itemsize):
        base = np.resize(np.array([info.max, info.min, 1, info.max - 1], dtype), size)
        inputs = [np.roll(base, r) for r in range(n)]
        for op in ("sum", "prod", "max", "min", "band", "bor", "bxor"):
            got = C.all_reduce(inputs[rank], op, comm)
            assert_equal_all(comm, got, reduce_reference(op, inputs))
            assert_all(comm, len(set(comm.allgather(got.tobytes()))) == 1, f"{op} {size}")


@pytest.mark.parametrize("op", C.REDUCE_OPS)
def test_empty_arrays(comm: MPI.Intracomm, op: str) -> None:
    """Empty inputs give an empty result of the right shape and dtype."""
    for dtype in (np.float64, np.complex64, np.int32, np.bool_):
        kind = np.dtype(dtype).kind
        if (op in ("max", "min") and kind == "c") or (op[0] in "bl" and kind not in "biu"):
            continue
        for shape in ((0,), (2, 0), (0, 3)):
            got = C.all_reduce(np.zeros(shape, dtype), op, comm)
            want = reduce_reference(op, [np.zeros(shape, dtype)] * comm.Get_size())
            assert_all(
                comm,
                got.shape == shape and got.dtype == want.dtype,
                f"{op} {dtype.__name__} {shape}: {got.shape} {got.dtype}",
            )


def test_one_rank_group_returns_its_input() -> None:
    """A one-rank group combines nothing: the result is the input's bits, NaN payloads kept."""
    for size in _sizes(np.float64):
        x = _payload_nans(np.float64, size, 1)
        for op in ("sum", "max", "min", "prod"):
            got = C.all_reduce(x, op, MPI.COMM_SELF)
            assert got is not x
            assert got.tobytes() == x.tobytes(), f"{op} {size}"
