"""np.apply_along_axis of DArrays (issue 14, item 11's list): func1d on whole slices where
they lie; a sharded axis is moved, never gathered; at 1-4 ranks, uneven and empty blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.collectives.errors import UnsupportedError
from helpers import BitVerdict, assert_all, assert_raises_all

X = np.arange(42.0).reshape(6, 7) % 5 - 2
X[1, 3], X[4, 0] = np.nan, -0.0

FUNCS: list[tuple[str, Callable[[np.ndarray], Any]]] = [
    ("sum", np.sum),  # a scalar per slice: the axis goes
    ("cumsum", np.cumsum),  # a slice per slice: the axis stays
    ("first three", lambda v: v[:3] * 2),  # another length
    ("outer", lambda v: np.outer(v[:2], v[:3])),  # two dims in place of one
    ("int", lambda v: np.int8(np.nan_to_num(v).sum() > 0)),  # another dtype
]


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_apply_along_axis(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, axis: int) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    layouts = [[Shard(0), *rest], [Shard(1), *rest], [Replicate(), *rest], [Partial("sum"), *rest]]
    with BitVerdict(comm) as verdict:
        for placements in layouts:
            whole = np.concatenate([X, X])
            for a, x in ((dmesh.distribute(X, mesh, placements), X),
                         (dmesh.distribute(whole, mesh, placements)[7:], whole[7:])):  # fmt: skip
                for name, func in FUNCS:
                    got = np.apply_along_axis(func, axis, a).full_array()
                    want = np.apply_along_axis(func, axis, x)
                    ok = got.shape == want.shape and got.dtype == want.dtype
                    ok = ok and np.array_equal(got, want, equal_nan=True)
                    verdict.check(ok, f"{name} axis {axis} {placements}: {got!r} != {want!r}")
                    verdict.bits(f"{name} {placements}", got)


def test_a_sharded_axis_moves_without_a_gather(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    big = np.arange(64 * 16, dtype=np.float64).reshape(64, 16)
    a = dmesh.distribute(big, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    with debug.CommMode() as mode:
        got = np.apply_along_axis(np.sort, 0, a)
    received = sum(r for _, r in mode.bytes().values())
    assert_all(comm, received <= big.nbytes // 2 + 4096, f"received {received} bytes")
    assert_all(comm, np.array_equal(got.full_array(), np.sort(big, axis=0)), "values")


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    v = dmesh.distribute(np.arange(9.0), mesh, [Shard(0), *rest])
    if mesh.shape[0] > 1:
        assert_raises_all(comm, UnsupportedError, np.apply_along_axis, np.sum, 0, v,
                          match="only axis")  # fmt: skip
    else:  # one rank holds the whole axis: nothing to move
        assert_all(comm, np.apply_along_axis(np.sum, 0, v).full_array() == 36.0, "1 rank")
    a = dmesh.distribute(X, mesh, [Shard(0), *rest])
    assert_raises_all(comm, np.exceptions.AxisError, np.apply_along_axis, np.sum, 2, a)
    ragged = dmesh.distribute(np.zeros((4, 0)), mesh, [Shard(0), *rest])
    assert_raises_all(comm, ValueError, np.apply_along_axis, np.sum, 0, ragged, match="are 0")
