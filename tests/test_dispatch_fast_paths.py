"""The dispatch hot paths give the same answers as the general ones.

* one-element arrays turn into Python values without a planned gather
  (``float(np.sum(a))``), through one reduction of the partial terms;
* a repeated call reuses its parse and decision (the pipeline's cache);
* with temporary elision on, ``a * b + c`` writes into the block of the
  temporary ``a * b`` and never into a block that something else still holds.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, _call_keys, _elision
from dmesh.ops import pipeline
from helpers import assert_all, assert_equal_all

WORLD = MPI.COMM_WORLD.Get_size()


@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128", "bool"])
def test_scalar_values_of_every_placement(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: str
) -> None:
    # Every placement of a one-element array, and of sums, means, extrema of
    # small arrays (uneven and empty blocks at 3 and 4 ranks).
    data = (np.arange(5) % 3).astype(dtype)
    got, want = [], []
    for placements in itertools.product([Replicate(), Shard(0), Partial("sum")], repeat=mesh.ndim):
        one = dmesh.distribute(data[1:2], mesh, list(placements))
        got.append(one.item())
        want.append(data[1].item())
        sharded = [Shard(0) if p.is_partial() else p for p in placements]
        a = dmesh.distribute(data, mesh, sharded)
        for func in (np.sum, np.max, np.any, np.mean) if dtype != "complex128" else (np.sum,):
            got.append(func(a).item())
            want.append(func(data).item())
    assert_equal_all(comm, np.array(got, complex), np.array(want, complex), rtol=1e-12)
    assert_all(comm, [type(v) for v in got] == [type(v) for v in want], "Python types differ")


def test_scalar_conversions(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(np.arange(7.0), mesh, [Shard(0)] * mesh.ndim)
    values = [float(np.sum(a)), int(np.max(a)), bool(np.any(a > 5)), complex(np.min(a))]
    assert_all(comm, values == [21.0, 6, True, 0j], str(values))


def test_repeated_calls_reuse_the_decision(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    # The cache empties itself when full (bounded: specs hold meshes); emptied here, the
    # suite's earlier calls cannot fill it between a call and the check.
    pipeline.steps.clear()
    data = np.arange(12.0).reshape(4, 3)
    a = dmesh.distribute(data, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    v = dmesh.distribute(np.ones(3), mesh, [Replicate()] * mesh.ndim)
    first = [np.sum(a).item(), np.dot(a, v).full_array(), np.transpose(a).full_array()]
    assert_all(comm, (np.sum, a.spec) in pipeline.steps, "np.sum(a) was not remembered")
    again = [np.sum(a).item(), np.dot(a, v).full_array(), np.transpose(a).full_array()]
    for x, y in zip(first, again):
        assert_equal_all(comm, x, y)
    assert_equal_all(comm, again[1], data @ np.ones(3))
    assert_equal_all(comm, (a @ v).full_array(), data @ np.ones(3))
    assert_equal_all(comm, (a @ v).full_array(), data @ np.ones(3))


def test_every_form_of_a_call_is_remembered(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Calls that parse alike (np.sum(a, axis=0) and np.sum(a) of a 1-D a, np.sum(b, 0) and
    np.sum(b, axis=0))
    are each remembered under their own key, whichever came first, and positional static
    arguments are keyed by value: np.sum(b, 1) after np.sum(b, 0) is its own call."""
    from dmesh.ops import static_calls

    pipeline.steps.clear()  # (a bounded cache: see test_repeated_calls_reuse_the_decision)
    a = dmesh.distribute(np.arange(7.0), mesh, [Shard(0)] * mesh.ndim)
    b = dmesh.distribute(np.arange(12.0).reshape(4, 3), mesh, [Shard(0)] * mesh.ndim)
    for _ in range(2):
        assert_equal_all(comm, np.sum(a, axis=0).item(), 21.0)  # (parsed as np.sum(a))
        assert_equal_all(comm, np.sum(a).item(), 21.0)
        for axis in (0, 1):
            want = np.arange(12.0).reshape(4, 3).sum(axis)
            assert_equal_all(comm, np.sum(b, axis=axis).full_array(), want)
            assert_equal_all(comm, np.sum(b, axis).full_array(), want)
    assert_all(comm, (np.sum, a.spec) in pipeline.steps, "np.sum(a) not kept")
    for axis in (0, 1):
        key = _call_keys.argument_key(np.sum, (b, axis), {})
        assert_all(comm, static_calls.lookup(key) is not None, f"np.sum(b, {axis}) not kept")


ELIDE = _elision.temporary_refs > 0
BIG = _elision.ELIDE_BYTES // 8 * WORLD * 2  # float64 blocks above the elision size


@pytest.mark.usefixtures("elide")
def test_temporaries_are_reused(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, donations: list[int]
) -> None:
    if not ELIDE:
        pytest.skip("this interpreter cannot tell temporaries apart")
    x = dmesh.full((BIG,), 2.0, mesh=mesh)
    y = dmesh.full((BIG,), 3.0, mesh=mesh)
    z = dmesh.full((BIG,), 1.0, mesh=mesh)
    for _ in range(2):  # the second round is served from the decision cache
        left = x * y + z
        right = z - x * y
        scaled = 2.0 * (x * y) / 4.0
    assert_all(comm, donations == [0, 1, 1, 0] * 2, f"donors {donations}")
    assert_equal_all(comm, left.local, np.full(left.local.shape, 7.0))
    assert_equal_all(comm, right.local, np.full(right.local.shape, -5.0))
    assert_equal_all(comm, scaled.local, np.full(scaled.local.shape, 3.0))


@pytest.mark.usefixtures("elide")
def test_held_blocks_are_never_overwritten(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, donations: list[int]
) -> None:
    x = dmesh.full((BIG,), 2.0, mesh=mesh)
    z = dmesh.full((BIG,), 1.0, mesh=mesh)
    big = dmesh.full((BIG * 8,), 1.0, mesh=mesh)
    for _ in range(2):
        named = x * 1.0
        _ = named + z  # named: held by a variable
        _ = x[1:] + z[1:]  # a view of x's block
        _ = x.redistribute() + z  # the same block as x
        _ = (big > 0) + 1.5  # a bool temporary offered, not used: the result is float64
    assert_equal_all(comm, x.local, np.full(x.local.shape, 2.0))
    assert_equal_all(comm, named.local, np.full(named.local.shape, 2.0))
    # Only the bool temporary was offered, and its block was not used (float64 result).
    assert_all(comm, donations == ([0, 0] if ELIDE else []), f"donors {donations}")
