"""Async forms: same values as the blocking forms, and the call returns before completion."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import collectives as C
from helpers import assert_all, assert_equal_all
from references import rank_array


def _cases(n: int, rank: int) -> dict[str, Callable[..., Any]]:
    x = rank_array((n + 1, 3), np.float64, rank)
    uneven = rank_array((rank % 3, 2), np.int32, rank)
    ring = [(r, (r + 1) % n) for r in range(n)]
    return {
        "all_reduce": lambda comm, **kw: C.all_reduce(x, "sum", comm, **kw),
        "all_reduce_avg": lambda comm, **kw: C.all_reduce(x, "avg", comm, **kw),
        "reduce_scatter": lambda comm, **kw: C.reduce_scatter(x, "max", 1, comm, **kw),
        "all_gather": lambda comm, **kw: C.all_gather(uneven, 0, comm, **kw),
        "gather": lambda comm, **kw: C.gather(uneven, n - 1, 0, comm, **kw),
        "scatter": lambda comm, **kw: C.scatter(x if rank == 0 else None, 0, 1, comm, **kw),
        "broadcast": lambda comm, **kw: C.broadcast(x if rank == 0 else None, 0, comm, **kw),
        "all_to_all": lambda comm, **kw: C.all_to_all(x, 0, 1, comm, **kw),
        "permute": lambda comm, **kw: C.permute(x, ring, comm, **kw),
        "all_reduce_coalesced": lambda comm, **kw: C.all_reduce_coalesced([x, x[0]], "sum", comm, **kw),  # noqa: E501
        "all_gather_coalesced": lambda comm, **kw: C.all_gather_coalesced([uneven, uneven[:, :1]], 0, comm, **kw),  # noqa: E501
        "reduce_scatter_coalesced": lambda comm, **kw: C.reduce_scatter_coalesced([x, x.T], "sum", 0, comm, **kw),  # noqa: E501
    }  # fmt: skip


CASE_NAMES = list(_cases(2, 0))


@pytest.mark.parametrize("name", CASE_NAMES)
def test_async_equals_blocking(comm: MPI.Intracomm, name: str) -> None:
    call = _cases(comm.Get_size(), comm.Get_rank())[name]
    expected = call(comm)
    result = call(comm, async_op=True)
    # Ranks may take different branches (gather's non-root ranks get None), so
    # each rank reaches its verdict locally and they agree once at the end.
    ok, message = True, ""
    try:
        if isinstance(expected, list):
            assert all(isinstance(r, C.AsyncArray) for r in result)
            for r, e in zip(result, expected, strict=True):
                np.testing.assert_array_equal(r.wait(), e)
        elif expected is None:
            assert result is None, f"expected None, got {type(result)}"
        else:
            assert isinstance(result, C.AsyncArray), f"got {type(result)}"
            assert result.shape == expected.shape
            assert result.dtype == expected.dtype
            np.testing.assert_array_equal(np.asarray(result), expected)
    except AssertionError as exc:
        ok, message = False, str(exc)
    assert_all(comm, ok, message)


def test_async_call_returns_before_completion(comm: MPI.Intracomm) -> None:
    """Rank 0 starts a large all_reduce while the others are held back, so it cannot be done.

    The others wait for a token on a separate communicator that rank 0 sends
    only after checking its request is still pending: if the call had waited
    for completion, rank 0 would never get there (pytest-timeout would fire).
    """
    n, rank = comm.Get_size(), comm.Get_rank()
    if n < 2:
        pytest.skip("needs 2 ranks to have something to wait for")
    gate = comm.Dup()
    x = np.full(1 << 21, float(rank + 1))  # 16 MiB
    if rank == 0:
        pending = C.all_reduce(x, "sum", comm, async_op=True)
        still_pending = not pending.done()
        view = pending[::2]  # a view does not wait either
        still_pending = still_pending and not pending.done() and isinstance(view, C.AsyncArray)
        gate.Send(np.ones(1), dest=1)
    else:
        gate.Recv(np.empty(1), source=rank - 1)
        pending = C.all_reduce(x, "sum", comm, async_op=True)
        still_pending = True
        if rank + 1 < n:
            gate.Send(np.ones(1), dest=rank + 1)
        view = pending[::2]
    total = np.sum(pending)  # a NumPy function waits
    gate.Free()
    assert_all(comm, still_pending, "all_reduce(async_op=True) completed before all ranks joined")
    assert_equal_all(comm, total, np.float64(n * (n + 1) / 2 * (1 << 21)))
    assert_equal_all(comm, np.asarray(view), np.full(1 << 20, n * (n + 1) / 2))


def test_async_array_behaves_as_the_result(comm: MPI.Intracomm) -> None:
    n = comm.Get_size()
    x = np.arange(12.0).reshape(3, 4)
    result = C.all_reduce(x, "sum", comm, async_op=True)
    reshaped = result.reshape(4, 3)
    transposed = result.T
    sliced = result[1:, ...]
    assert_all(comm, all(isinstance(v, C.AsyncArray) for v in (reshaped, transposed, sliced)))
    assert_all(
        comm, reshaped.shape == (4, 3) and transposed.shape == (4, 3) and sliced.shape == (2, 4)
    )
    expected = x * n
    assert_equal_all(comm, np.add(result, 1), expected + 1)  # ufunc
    assert_equal_all(comm, result + result, 2 * expected)  # operators
    assert_equal_all(comm, 1 - result, 1 - expected)  # reflected
    assert_equal_all(comm, result[2, 3], expected[2, 3])  # element access
    assert_equal_all(comm, reshaped, expected.reshape(4, 3))
    assert_equal_all(comm, transposed, expected.T)
    assert_equal_all(comm, sliced, expected[1:])
    assert_equal_all(comm, result.sum(axis=0), expected.sum(axis=0))  # methods
    assert_all(comm, float(result[0, 1]) == float(n) and len(result) == 3)
    assert_all(comm, result.done())
