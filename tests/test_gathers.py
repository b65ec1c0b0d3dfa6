"""all_gather, gather, scatter and broadcast against NumPy on one process."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import dmesh.collectives as C
from helpers import assert_all, assert_equal_all
from references import DATA_MOVEMENT_DTYPES, rank_array

BASE_SHAPES = [(4,), (3, 2), (2, 3, 2)]


def uneven_shape(base: tuple[int, ...], axis: int, rank: int) -> tuple[int, ...]:
    """Rank 0's piece is empty, then lengths 1, 2, 0, 1, ... along ``axis``."""
    shape = list(base)
    shape[axis] = rank % 3
    return tuple(shape)


@pytest.mark.parametrize("base", BASE_SHAPES)
@pytest.mark.parametrize("with_sizes", [False, True])
def test_all_gather_uneven_every_axis(
    comm: MPI.Intracomm, base: tuple[int, ...], with_sizes: bool
) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    for dtype in DATA_MOVEMENT_DTYPES:
        for axis in range(len(base)):
            inputs = [rank_array(uneven_shape(base, axis, r), dtype, r) for r in range(n)]
            sizes = [a.shape[axis] for a in inputs] if with_sizes else None
            before = inputs[rank].copy()
            result = C.all_gather(inputs[rank], axis, comm, sizes=sizes)
            assert_equal_all(comm, result, np.concatenate(inputs, axis=axis))
            assert_equal_all(comm, inputs[rank], before)


def test_all_gather_zero_d_stacks(comm: MPI.Intracomm) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    result = C.all_gather(np.float32(rank * 1.5), 0, comm)
    assert_equal_all(comm, result, np.arange(n, dtype=np.float32) * 1.5)


def test_all_gather_negative_axis_and_non_contiguous(comm: MPI.Intracomm) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    inputs = [rank_array((4, 6), np.int64, r)[:, ::2] for r in range(n)]
    result = C.all_gather(inputs[rank], -1, comm)
    assert_equal_all(comm, result, np.concatenate(inputs, axis=-1))


@pytest.mark.parametrize("base", BASE_SHAPES)
def test_gather_to_every_root(comm: MPI.Intracomm, base: tuple[int, ...]) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    for dtype in DATA_MOVEMENT_DTYPES:
        for axis in range(len(base)):
            inputs = [rank_array(uneven_shape(base, axis, r), dtype, r) for r in range(n)]
            for dst in range(n):
                result = C.gather(inputs[rank], dst, axis, comm)
                if rank == dst:
                    assert_equal_all(comm, result, np.concatenate(inputs, axis=axis))
                else:
                    assert_all(comm, result is None, f"non-root got {result!r}")


@pytest.mark.parametrize("base", [(0,), (5,), (2, 7), (3, 1, 4)])
def test_scatter_balanced_and_explicit(comm: MPI.Intracomm, base: tuple[int, ...]) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    src = n - 1
    for dtype in DATA_MOVEMENT_DTYPES:
        full = rank_array(base, dtype, 99)
        for axis in range(len(base)):
            result = C.scatter(full if rank == src else None, src, axis, comm)
            assert_equal_all(comm, result, np.array_split(full, n, axis=axis)[rank])
        # Explicit sizes, read on src only: everything to the last rank.
        sizes = [0] * (n - 1) + [base[0]]
        result = C.scatter(full if rank == src else None, src, 0, comm, sizes=sizes)
        expected = full if rank == n - 1 else full[:0]
        assert_equal_all(comm, result, expected)


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (2, 1, 3)])
def test_broadcast_from_every_root(comm: MPI.Intracomm, shape: tuple[int, ...]) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    for dtype in DATA_MOVEMENT_DTYPES:
        for src in range(n):
            data = rank_array(shape, dtype, src)
            mine = data if rank == src else None
            result = C.broadcast(mine, src, comm)
            assert_equal_all(comm, result, data)
            assert_all(comm, result is not mine, "the root must get a new array")


@pytest.mark.parametrize("rows", [0, 1, 300])
def test_all_gather_sizes_unknown_small_large_and_many_dims(comm: MPI.Intracomm, rows: int) -> None:
    """Small arrays travel inside the size exchange; larger ones (> 1 KiB on some rank)
    take a second round; arrays of more than 8 dims use the full header exchange."""
    n, rank = comm.Get_size(), comm.Get_rank()
    # Rank r holds r * rows rows: with 300, larger than a slot from rank 1 on.
    inputs = [rank_array((r * rows, 3), np.float64, r) for r in range(n)]
    result = C.all_gather(inputs[rank], 0, comm)
    assert_equal_all(comm, result, np.concatenate(inputs))
    many = [rank_array((1,) * 8 + (r + 1,), np.int16, r) for r in range(n)]
    result = C.all_gather(many[rank], 8, comm)
    assert_equal_all(comm, result, np.concatenate(many, axis=8))
