"""Async forms: same values as the blocking forms, and the call returns before completion."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh.collectives as C
from helpers import assert_all, assert_equal_all, same_on_every_rank
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
# Float sums: MPI may add in another order in the non-blocking call (Open MPI's
# Ireduce_scatter at 3 ranks differs from its Reduce_scatter in the last bit),
# so these match to rounding; every other case bit for bit.
SUMS = ("all_reduce", "all_reduce_avg", "all_reduce_coalesced", "reduce_scatter_coalesced")


def _assert_matches(name: str, got: Any, want: Any) -> None:
    if name in SUMS:
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(np.float64).eps, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


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
                _assert_matches(name, r.wait(), e)
        elif expected is None:
            assert result is None, f"expected None, got {type(result)}"
        else:
            assert isinstance(result, C.AsyncArray), f"got {type(result)}"
            assert result.shape == expected.shape
            assert result.dtype == expected.dtype
            _assert_matches(name, np.asarray(result), expected)
    except AssertionError as exc:
        ok, message = False, str(exc)
    assert_all(comm, ok, message)
    if name.startswith("all_reduce"):  # whatever the order, every rank gets the same bits
        for got in result if isinstance(result, list) else [result]:
            same_on_every_rank(comm, np.asarray(got))


BIG = 1 << 21  # float64 elements per rank: 16 MiB, far more than one progress step moves


def _big_cases(n: int, rank: int) -> dict[str, tuple[bool, Callable[..., Any]]]:
    """Async calls on large messages: (gated?, call).

    Gated calls have no blocking header step, so rank 0 can start them while
    the other ranks are held back (see the test). Calls that first exchange a
    header (sizes unknown, broadcast, scatter) cannot be gated, since the
    header step waits for every rank; they are started by all ranks at once.
    """
    x = np.full(BIG, float(rank + 1))
    rows = x.reshape(n, -1) if BIG % n == 0 else x[: BIG - BIG % n].reshape(n, -1)
    ring = [(r, (r + 1) % n) for r in range(n)]
    sizes = [BIG] * n
    return {
        "all_reduce": (True, lambda c: C.all_reduce(x, "sum", c, async_op=True)),
        "reduce_scatter": (True, lambda c: C.reduce_scatter(x, "sum", 0, c, async_op=True)),
        "all_gather": (True, lambda c: C.all_gather(x, 0, c, sizes=sizes, async_op=True)),
        "gather": (True, lambda c: C.gather(x, 0, 0, c, sizes=sizes, async_op=True)),
        "all_to_all": (
            True,
            lambda c: C.all_to_all(rows, 0, 1, c, concat_sizes=[rows.shape[1]] * n, async_op=True),
        ),
        "permute": (True, lambda c: C.permute(x, ring, c, async_op=True)),
        "all_reduce_coalesced": (
            True,
            lambda c: C.all_reduce_coalesced([x, x[:10]], "sum", c, async_op=True)[0],
        ),
        "reduce_scatter_coalesced": (
            True,
            lambda c: C.reduce_scatter_coalesced([x, x[:10]], "sum", 0, c, async_op=True)[0],
        ),
        "all_gather_exchanging_sizes": (False, lambda c: C.all_gather(x, 0, c, async_op=True)),
        "all_gather_coalesced": (
            False,
            lambda c: C.all_gather_coalesced([x, x[:10]], 0, c, async_op=True)[0],
        ),
        "broadcast": (False, lambda c: C.broadcast(x if rank == 0 else None, 0, c, async_op=True)),
        "scatter": (False, lambda c: C.scatter(x if rank == 0 else None, 0, 0, c, async_op=True)),
    }


@pytest.mark.parametrize("name", list(_big_cases(2, 0)))
def test_async_call_returns_before_completion(comm: MPI.Intracomm, name: str) -> None:
    """The call returns while its request is still pending: communication can overlap compute.

    For gated calls this is certain: rank 0 starts the call while the other
    ranks wait for a token on a separate communicator, which rank 0 sends only
    after checking that its request is pending (had the call waited for
    completion, rank 0 would never get there and pytest-timeout would fire).
    The others start theirs once released, in rank order. Ungated calls move
    16 MiB, which MPICH progresses in many steps, each inside an MPI call, so
    one test right after the call cannot have finished it on every rank.
    """
    n, rank = comm.Get_size(), comm.Get_rank()
    if n < 2:
        pytest.skip("on one rank a collective has nothing to wait for")
    gated, call = _big_cases(n, rank)[name]
    expected = np.asarray(call(comm))  # the values, waited for
    gate = comm.Dup()
    if gated and rank > 0:
        gate.Recv(np.empty(1), source=rank - 1)
    pending = call(comm)
    # Ranks that are not rank 0 of a gated call may find it done already.
    checked = rank == 0
    still_pending = pending is None or not pending.done()
    view = pending[1:] if pending is not None else None  # a view does not wait either
    still_pending = still_pending and (pending is None or not pending.done())
    if gated and rank + 1 < n:
        gate.Send(np.ones(1), dest=rank + 1)
    result = None if pending is None else np.asarray(pending)
    gate.Free()
    if gated:
        ok = not checked or still_pending
    else:  # a leaf of a broadcast tree may be done early; the call must not have waited on all
        ok = any(comm.allgather(still_pending and pending is not None))
    assert_all(comm, ok, f"{name}(async_op=True) had completed when the call returned")
    if pending is not None:
        ok = np.array_equal(result, expected) and np.array_equal(np.asarray(view), expected[1:])
    assert_all(comm, ok, f"{name}: async values differ from the blocking ones")


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


def test_async_keeps_packed_buffers_alive(comm: MPI.Intracomm) -> None:
    """mpi4py does not keep a non-blocking call's buffers alive: dmesh must.

    The inputs are non-contiguous, so the send buffers are temporary packed
    copies; allocating between the call and the wait reuses freed memory.
    """
    n, rank = comm.Get_size(), comm.Get_rank()
    inputs = [np.full((2 * n, 1 << 17), float(r + 1))[:, ::2] for r in range(n)]
    x = inputs[rank]
    pending = [
        C.all_reduce(x, "sum", comm, async_op=True),
        C.all_to_all(x, 1, 0, comm, async_op=True),
        C.reduce_scatter_coalesced([x, x[:1]], "sum", 0, comm, async_op=True)[0],
    ]
    junk = [np.full(x.size, -7.0) for _ in range(4)]
    expected = [
        C.all_reduce(x, "sum", comm),
        C.all_to_all(x, 1, 0, comm),
        C.reduce_scatter(x, "sum", 0, comm),
    ]
    del junk
    for got, want in zip(pending, expected, strict=True):
        assert_equal_all(comm, np.asarray(got), want)
