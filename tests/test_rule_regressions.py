"""Regressions of the wrong rows and kernels found by the rule checker (tests/pure/).

Each test gives NumPy's answer on every rank, the same bits everywhere, and
failed before its fix at 2 ranks or more (some at one rank).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import assert_all, assert_equal_all, same_on_every_rank

WORLD = MPI.COMM_WORLD.Get_size()


def rows(mesh: dmesh.DeviceMesh) -> list[Any]:
    return [Shard(0)] + [Replicate()] * (mesh.ndim - 1)


def check(comm: MPI.Intracomm, got: Any, want: Any) -> None:
    """``got`` (a DArray or a Python value) is NumPy's ``want`` on every rank, bit for bit."""
    full = got.full_array() if isinstance(got, dmesh.DArray) else np.asarray(got)
    assert_equal_all(comm, full, np.asarray(want))
    same_on_every_rank(comm, full)


@pytest.mark.parametrize("func", [np.sqrt, np.log, np.log2, np.log10, np.log1p])
def test_domain_functions_of_a_partial_max(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, func: Any
) -> None:
    """sqrt/log kept Partial("max"): an empty block's -inf, or a negative term, became NaN."""
    x = np.array([4.0, 9.0, 16.0, 25.0, 1.0, 2.0, 3.0, 100.0])
    a = dmesh.distribute(x, mesh, rows(mesh))
    with np.errstate(all="ignore"):
        check(comm, float(func(np.max(a[6:]))), float(func(np.max(x[6:]))))
        check(comm, func(np.max(a[6:])), func(np.max(x[6:])))
        b = dmesh.distribute(x - 50.0, mesh, rows(mesh))  # negatives below the maximum
        check(comm, func(np.max(b)), func(np.max(x - 50.0)))
        check(comm, func(np.min(b[5:])), func(np.min(x[5:] - 50.0)))  # min stays partial
        check(comm, np.exp(np.max(a[6:])), np.exp(np.max(x[6:])))  # exp keeps it: -inf -> 0


@pytest.mark.parametrize("other", [np.inf, -np.inf, np.nan, 0.0])
def test_float_partial_sum_times_or_over_a_value(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, other: float
) -> None:
    """multiply/divide kept a float Partial("sum"): a zero term times inf (or 0/0) is NaN."""
    x = np.array([[1.0, 0.0, -2.0], [3.0, 0.0, 5.0]])  # one row per block, the rest empty
    a = dmesh.distribute(x, mesh, rows(mesh))
    y = np.array([other, 2.0, other])
    with dmesh.implicit_replication(), np.errstate(all="ignore"):
        check(comm, np.sum(a, axis=0) * other, np.sum(x, axis=0) * other)
        check(comm, np.sum(a, axis=0) * y, np.sum(x, axis=0) * y)
        check(comm, np.sum(a, axis=0) / other, np.sum(x, axis=0) / other)


def test_integer_partial_sum_is_not_widened(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """An int8 partial sum's terms wrap around in int8: widened to int64 first, they added up wrong.

    (np.sum of it, a mean of it, or adding or joining an int64 partial sum.)
    """
    x = np.full((WORLD, 3), 100, np.int8)  # one row per rank: the column sums wrap in int8
    a = dmesh.distribute(x, mesh, rows(mesh))
    s = np.sum(a, axis=0, dtype=np.int8)  # int8, partial over the rows' mesh dim
    want = np.sum(x, axis=0, dtype=np.int8)
    check(comm, s, want)
    check(comm, np.sum(s), np.sum(want))
    check(comm, np.mean(s), np.mean(want))
    y = np.arange(WORLD * 3, dtype=np.int64).reshape(WORLD, 3)
    t = np.sum(dmesh.distribute(y, mesh, rows(mesh)), axis=0)  # int64, partial
    check(comm, s + t, want + np.sum(y, axis=0))
    check(comm, np.concatenate([s, t]), np.concatenate([want, np.sum(y, axis=0)]))


def test_mean_of_integers_accumulates_in_float64(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """np.mean of int64 added in int64 (wrapping around) before dividing; NumPy adds in float64."""
    big = np.iinfo(np.int64).max
    x = np.array([big, big, big - 5, 7, big], np.int64)
    a = dmesh.distribute(x, mesh, rows(mesh))
    check(comm, np.mean(a), np.mean(x))
    check(comm, float(np.mean(a)), float(np.mean(x)))
    h = dmesh.distribute(x.astype(np.float16) / 1e15, mesh, rows(mesh))  # float16: in float32
    check(comm, np.mean(h), np.mean(x.astype(np.float16) / 1e15))


def test_mean_with_an_integer_dtype_truncates_once(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """np.mean(..., dtype=int) gave float64, and truncating each rank's share would be wrong."""
    x = np.array([[1, 2], [2, 2], [2, 3], [0, 1], [4, 4]], np.int64)
    a = dmesh.distribute(x, mesh, rows(mesh))
    for axis in (None, 0, 1):
        check(comm, np.mean(a, axis=axis, dtype=np.int64), np.mean(x, axis=axis, dtype=np.int64))
        check(
            comm, np.mean(a > 1, axis=axis, dtype=np.int8), np.mean(x > 1, axis=axis, dtype=np.int8)
        )


def test_broadcast_to_more_dims_keeps_uneven_blocks_aligned(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """np.broadcast_to mapped operand dim 0 to output dim 0 when dims were added in front."""
    x = np.arange(4.0 * WORLD + 2)
    a = dmesh.distribute(x, mesh, rows(mesh))[1:]  # uneven blocks
    check(comm, np.broadcast_to(a, (2, x.size - 1)), np.broadcast_to(x[1:], (2, x.size - 1)))
    check(comm, np.broadcast_to(a[:, None], (3, x.size - 1, 2)),
          np.broadcast_to(x[1:, None], (3, x.size - 1, 2)))  # fmt: skip


def test_exp_keeps_a_partial_max_without_communicating(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """The rows that stay: exp of a partial max is still a partial max (one reduction, later)."""
    x = np.array([1.0, -np.inf, np.nan, 2.0, 0.5])
    a = dmesh.distribute(x, mesh, rows(mesh))
    m = np.exp(np.max(a[3:]))
    partial = WORLD > 1 and mesh.ndim == 1
    assert_all(comm, not partial or m.placements[0] == Partial("max"), f"{m.placements}")
    check(comm, m, np.exp(np.max(x[3:])))
    check(comm, np.exp(np.max(a)), np.exp(np.max(x)))  # NaN wins


def test_partial_sum_keeps_a_negative_zero(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """R -> P(sum) filled the other ranks with +0.0: -0.0 + 0.0 is +0.0 (1/x: +inf, not -inf)."""
    x = np.array([-0.0, 0.0, -1.5])
    for dtype in (np.float64, np.complex128):
        p = dmesh.distribute(
            x.astype(dtype), mesh, [Partial("sum")] + [Replicate()] * (mesh.ndim - 1)
        )
        full = p.full_array()
        parts = full.view(full.real.dtype)
        assert_all(
            comm,
            np.signbit(parts).tolist()
            == np.signbit(x.astype(dtype).view(full.real.dtype)).tolist(),
            f"{full}",
        )
        with np.errstate(divide="ignore"):
            check(comm, np.reciprocal(p), np.reciprocal(x.astype(dtype)))
