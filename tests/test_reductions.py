"""all_reduce and reduce_scatter against NumPy on one process."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import dmesh.collectives as C
from helpers import assert_all, assert_equal_all
from references import DTYPES, rank_array, reduce_reference, tolerance, valid_pair

SHAPES = [(), (0,), (5,), (3, 4), (2, 0, 3), (2, 3, 4)]


@pytest.mark.parametrize("op", C.REDUCE_OPS)
def test_all_reduce_every_op_dtype_and_shape(comm: MPI.Intracomm, op: str) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    for dtype in DTYPES:
        if not valid_pair(op, dtype):
            continue
        for shape in SHAPES:
            inputs = [rank_array(shape, dtype, r) for r in range(n)]
            before = inputs[rank].copy()
            result = C.all_reduce(inputs[rank], op, comm)
            expected = reduce_reference(op, inputs)
            assert_equal_all(comm, result, expected, **tolerance(op, dtype))
            assert_equal_all(comm, inputs[rank], before)  # the input is untouched


def test_all_reduce_non_contiguous_input(comm: MPI.Intracomm) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    inputs = [rank_array((6, 8), np.float64, r) for r in range(n)]
    views = [a[::2, 1::3] for a in inputs]
    result = C.all_reduce(views[rank], "max", comm)
    assert_equal_all(comm, result, reduce_reference("max", views))


@pytest.mark.parametrize("op", C.REDUCE_OPS)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 4, 3)])
def test_reduce_scatter_every_axis(comm: MPI.Intracomm, op: str, shape: tuple[int, ...]) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    for dtype in (np.int32, np.uint8, np.float64, np.bool_, np.complex64):
        if not valid_pair(op, dtype):
            continue
        for axis in range(-len(shape), len(shape)):
            inputs = [rank_array(shape, dtype, r) for r in range(n)]
            result = C.reduce_scatter(inputs[rank], op, axis, comm)
            expected = np.array_split(reduce_reference(op, inputs), n, axis=axis)[rank]
            assert_equal_all(comm, result, expected, **tolerance(op, dtype))


def test_reduce_scatter_uneven_and_empty_pieces(comm: MPI.Intracomm) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    # Fewer rows than ranks: trailing ranks get empty pieces.
    inputs = [rank_array((n - 1, 3), np.float64, r) for r in range(n)]
    result = C.reduce_scatter(inputs[rank], "sum", 0, comm)
    expected = np.array_split(reduce_reference("sum", inputs), n, axis=0)[rank]
    assert_equal_all(comm, result, expected, rtol=1e-13)
    # Explicit sizes: rank r gets r + 1 columns (the last rank gets what remains).
    sizes = [r + 1 for r in range(n)]
    inputs = [rank_array((2, sum(sizes)), np.int64, r) for r in range(n)]
    result = C.reduce_scatter(inputs[rank], "sum", 1, comm, sizes=sizes)
    full = reduce_reference("sum", inputs)
    start = sum(sizes[:rank])
    assert_equal_all(comm, result, full[:, start : start + sizes[rank]])


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_max_min_propagate_nan_from_any_rank(comm: MPI.Intracomm, op: str, dtype: type) -> None:
    """A NaN on any one rank wins, as in np.maximum/np.minimum; MPI's MAX/MIN would drop it."""
    n, rank = comm.Get_size(), comm.Get_rank()
    ufunc = np.maximum if op == "max" else np.minimum
    for holder in range(n):
        inputs = [rank_array((4, n), dtype, r) for r in range(n)]
        inputs[holder][1, :] = np.nan
        inputs[(holder + 1) % n][2, 0] = np.inf if op == "max" else -np.inf
        expected = ufunc.reduce(np.stack(inputs), axis=0)
        mine = inputs[rank]
        results = [
            C.all_reduce(mine, op, comm),
            C.all_reduce(mine[:, :1].copy(), op, comm),  # the small-message path
            C.all_reduce(mine, op, comm, async_op=True).wait(),
            C.reduce_scatter(mine, op, axis=1, group=comm),  # equal pieces
            C.reduce_scatter(mine, op, axis=0, group=comm),  # uneven pieces (4 rows)
            *C.all_reduce_coalesced([mine, mine[1]], op, comm),
        ]
        wants = [
            expected,
            expected[:, :1],
            expected,
            expected[:, rank : rank + 1],
            np.array_split(expected, n, axis=0)[rank],
            expected,
            expected[1],
        ]
        for got, want in zip(results, wants, strict=True):
            assert_equal_all(comm, got, want)


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
def test_every_rank_gets_the_same_bits(comm: MPI.Intracomm, op: str) -> None:
    """NaNs of either sign and zeros of either sign on different ranks: one answer, bit for bit.

    MPI combines terms in a different order on each rank; a sum of two NaNs
    keeps one of their signs, and max(-0.0, +0.0) returns its first operand.
    NaNs are made +nan where ranks combine; one rank's result is its input.
    """
    rank = comm.Get_rank()
    for dtype in (np.float64, np.float32, np.complex128):
        if op in ("max", "min") and dtype is np.complex128:
            continue
        signed = [np.nan, -np.nan, 0.0, -0.0][rank % 4 :] + [np.nan, -np.nan, 0.0, -0.0][: rank % 4]
        mine = np.array(signed + [-0.0 if rank % 2 else 0.0, 1.0], dtype)
        results = [C.all_reduce(mine, op, comm), C.all_reduce(mine[:1].copy(), op, comm)]
        for got in results:
            nan = np.isnan(got.view(got.real.dtype))
            canonical = comm.Get_size() == 1 or (
                got.view(got.real.dtype)[nan].tobytes()
                == np.full(nan.sum(), np.nan, got.real.dtype).tobytes()
            )
            assert_all(
                comm,
                len(set(comm.allgather(got.tobytes()))) == 1 and canonical,
                f"{op} {dtype}: {got}",
            )
