"""Coalesced collectives give what one call per array gives."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import dmesh.collectives as C
from dmesh.collectives.errors import ArgumentError
from helpers import assert_all, assert_equal_all, assert_raises_all
from references import rank_array, reduce_reference, tolerance

SHAPES = [(), (0,), (3,), (2, 5), (1, 2, 3)]


@pytest.mark.parametrize("op", ["sum", "prod", "max", "avg", "bor"])
@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.bool_])
def test_all_reduce_coalesced(comm: MPI.Intracomm, op: str, dtype: type) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    if op == "bor" and np.dtype(dtype).kind == "f":
        return
    inputs = [[rank_array(s, dtype, r, seed=i) for i, s in enumerate(SHAPES)] for r in range(n)]
    results = C.all_reduce_coalesced(inputs[rank], op, comm)
    for i in range(len(SHAPES)):
        expected = reduce_reference(op, [inputs[r][i] for r in range(n)])
        assert_equal_all(comm, results[i], expected, **tolerance(op, dtype))


def test_all_gather_coalesced_uneven(comm: MPI.Intracomm) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    for axis in (0, 1):

        def shapes(r: int, axis: int = axis) -> list[tuple[int, ...]]:
            a, b = [2, 3], [3, 1]
            a[axis], b[axis] = r % 3, (r + 1) % 2
            return [tuple(a), tuple(b)]

        inputs = [
            [rank_array(s, np.float32, r, i) for i, s in enumerate(shapes(r))] for r in range(n)
        ]
        results = C.all_gather_coalesced(inputs[rank], axis, comm)
        # Known lengths (what dmesh.compile passes): no header, the same result.
        sizes = [[shapes(r)[i][axis] for r in range(n)] for i in range(2)]
        known = C.all_gather_coalesced(inputs[rank], axis, comm, sizes=sizes)
        for i in range(2):
            expected = np.concatenate([inputs[r][i] for r in range(n)], axis=axis)
            assert_equal_all(comm, results[i], expected)
            assert_equal_all(comm, known[i], expected)
    assert_raises_all(
        comm, ArgumentError, lambda: C.all_gather_coalesced([np.ones(2)], 0, comm, sizes=[[2]] * 2)
    )


def test_reduce_scatter_coalesced(comm: MPI.Intracomm) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    shapes = [(n + 1, 2), (1, 3), (2 * n, 1)]
    for axis in (0, 1):
        inputs = [[rank_array(s, np.int64, r, i) for i, s in enumerate(shapes)] for r in range(n)]
        results = C.reduce_scatter_coalesced(inputs[rank], "sum", axis, comm)
        for i in range(len(shapes)):
            full = reduce_reference("sum", [inputs[r][i] for r in range(n)])
            assert_equal_all(comm, results[i], np.array_split(full, n, axis=axis)[rank])


def test_empty_list_and_mixed_dtypes(comm: MPI.Intracomm) -> None:
    assert_all(comm, C.all_reduce_coalesced([], "sum", comm) == [])
    assert_raises_all(
        comm,
        TypeError,
        C.all_reduce_coalesced,
        [np.ones(2), np.ones(2, np.float32)],
        "sum",
        comm,
        match=r"xs\[1\] is float32",
    )
