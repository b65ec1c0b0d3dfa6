"""The small-message fast paths (contiguous host arrays, even pieces along axis 0) agree
with NumPy and with the general path, which a rank-list group always takes."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import dmesh.collectives as C
from helpers import assert_equal_all, assert_raises_all
from references import rank_array, reduce_reference, tolerance


@pytest.mark.parametrize("dtype", [np.float64, np.int8, np.bool_, np.complex64])
def test_even_pieces_on_axis_0(comm: MPI.Intracomm, dtype: type) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    world = list(range(MPI.COMM_WORLD.Get_size()))  # same ranks, general path
    inputs = [rank_array((2 * n, 3), dtype, r) for r in range(n)]
    x = inputs[rank]
    op = "sum" if np.dtype(dtype).kind == "c" else "max"  # complex numbers have no max
    tol = tolerance(op, dtype)
    for group in (comm, world):
        assert_equal_all(comm, C.all_reduce(x, op, group), reduce_reference(op, inputs), **tol)
        gathered = C.all_gather(x, 0, group, sizes=[2 * n] * n)
        assert_equal_all(comm, gathered, np.concatenate(inputs))
        scattered = C.reduce_scatter(x, op, 0, group)
        expected = reduce_reference(op, inputs)[2 * rank : 2 * rank + 2]
        assert_equal_all(comm, scattered, expected, **tol)
        exchanged = C.all_to_all(x, 0, 0, group, concat_sizes=[2] * n)
        expected = np.concatenate([inputs[q][2 * rank : 2 * rank + 2] for q in range(n)])
        assert_equal_all(comm, exchanged, expected)


def test_fast_paths_still_validate(comm: MPI.Intracomm) -> None:
    n = comm.Get_size()
    x = np.ones((n, 2))
    assert_raises_all(comm, ValueError, C.all_gather, x, 0, comm, sizes=[n] * (n + 1))
    assert_raises_all(comm, ValueError, C.all_to_all, x, 0, 0, comm, concat_sizes=[1] * (n + 1))
    assert_raises_all(comm, ValueError, C.all_reduce, x, "summ", comm)
    big_endian = np.ones(3, dtype=">f8")
    assert_raises_all(comm, TypeError, C.all_reduce, big_endian, "sum", comm, match="byte order")
