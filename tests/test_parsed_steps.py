"""Calls whose rule parses its arguments (``np.concatenate``'s list, ``np.stack``'s) keep
their step under the parsed operands' specs and static arguments: a repeated call skips
the planner and still equals NumPy, and a changed axis or dtype is a different step."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from dmesh.ops import pipeline
from helpers import assert_all, assert_equal_all


def test_repeated_joins_come_from_the_step_cache(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    x = np.arange(35.0).reshape(7, 5) - 3.5
    y = (np.arange(35) % 4).reshape(7, 5).astype(np.int32)
    a = dmesh.distribute(x, mesh, [Shard(0), *rest])
    b = dmesh.distribute(y, mesh, [Shard(0), *rest])
    calls = [
        (np.concatenate, ([a, b], 1), ([x, y], 1)),
        (np.concatenate, ([b, a, a], 1), ([y, x, x], 1)),
        (np.stack, ([a, a], 2), ([x, x], 2)),
        (np.stack, ([a, a], 1), ([x, x], 1)),
        (np.stack, ([b, b], 1), ([y, y], 1)),
    ]
    for func, args, plain in calls:
        want = func(*plain)
        for _ in range(2):  # planned, then from the cache
            got = func(*args)
            assert_all(comm, got.dtype == want.dtype, f"{func.__name__}: {got.dtype}")
            assert_equal_all(comm, got.full_array(), want)
    parsed = [key for key in pipeline.steps if len(key) > 1 and key[1] == "parsed"]
    assert_all(comm, len(parsed) >= len(calls), f"{len(parsed)} parsed steps kept")
