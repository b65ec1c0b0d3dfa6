"""Basic-index plans come from one cache keyed by (spec, key): ints, NumPy integers,
negative indices and slices of them hit it; the results equal NumPy's (issue 28, item 2)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard, _call_keys
from dmesh.ops.indexing import plans
from helpers import assert_all, assert_equal_all


@pytest.mark.pure
def test_plain_keys_are_hashable_and_equal_across_integer_types() -> None:
    key = _call_keys.index_key
    assert key(3) == key(np.int64(3)) == key(np.uint8(3))
    assert _call_keys.index_key(np.s_[1:-1, ::2]) == _call_keys.index_key(
        (slice(np.int32(1), np.int64(-1)), slice(None, None, np.int16(2)))
    )
    assert _call_keys.index_key((Ellipsis, None, -1)) == (Ellipsis, None, -1)
    assert key(slice(1, 2)) != key((1, 2, None))  # a slice is no tuple
    for key in (True, np.bool_(False), [0, 1], np.arange(3), (0, [1]), 1.0, slice(0.5, 2)):
        assert _call_keys.index_key(key) is None, key


def test_repeated_keys_hit_the_cache(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    # The cache is bounded (emptied when full): start it empty, so that the tests run
    # before this one cannot fill it between a count and its check.
    plans._selections.clear()
    data = np.arange(70.0).reshape(7, 10)
    for placements in ([Shard(0)], [Shard(1)], [Replicate()]):
        placements = placements + [Replicate()] * (mesh.ndim - 1)
        a = dmesh.distribute(data, mesh, placements)
        keys = [np.int64(3), -2, (np.int32(1), slice(2, None)), np.s_[1:-1, ::3], np.s_[..., -1]]
        for key in keys:
            assert_equal_all(comm, a[key].full_array(), data[key])
        size = len(plans._selections)
        for key in keys:  # the same keys again, and the same ints as other types
            a[key]
        a[3], a[np.uint16(3)], a[-2], a[1, 2:]
        assert_all(comm, len(plans._selections) == size, "repeated keys made new plans")


def test_cached_writes_match_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    want = np.arange(70).reshape(7, 10)
    for placements in ([Shard(0)], [Shard(1)], [Replicate()]):
        placements = placements + [Replicate()] * (mesh.ndim - 1)
        a = dmesh.distribute(want, mesh, placements)
        got = want.copy()
        for _ in range(2):  # the second round runs from the cache
            for target in (a, got):
                target[0] = -1
                target[np.int64(-1)] = 7
                target[2, 1:4] = [5, 6, 8]
                target[..., np.int8(-1)] = 9
                target[3:5, 2] += 100
        assert_equal_all(comm, a.full_array(), got)
        b = dmesh.distribute(want * 2, mesh, placements)
        a[1:3] = b[4:6]  # a DArray value laid out like the selection
        a[5] = b[0]
        got[1:3], got[5] = want[4:6] * 2, want[0] * 2
        assert_equal_all(comm, a.full_array(), got)


@pytest.mark.parametrize("shape", [(9, 5), (4, 3), (2, 6)], ids=str)
def test_row_copies_between_rows_of_one_rank(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: tuple[int, int]
) -> None:
    # p[0, :] = p[1, :], the boundary condition of every finite-difference code:
    # where one rank holds both rows its holders copy them, with no message;
    # elsewhere the general path moves the row. Either way NumPy's values.
    data = np.arange(float(np.prod(shape))).reshape(shape) - 4
    data[1, 0], data[-2, -1] = np.nan, -np.inf
    other = data[::-1].copy() * -1.5
    placements = [Shard(0)] + [Shard(1)] * (mesh.ndim - 1)
    for write in [
        lambda p, q: p.__setitem__((0, slice(None)), p[1, :]),
        lambda p, q: p.__setitem__(-1, p[-2]),
        lambda p, q: p.__setitem__((slice(None), 0), p[:, 1]),
        lambda p, q: p.__setitem__(0, q[1]),
        lambda p, q: p.__setitem__(1, q[shape[0] - 1]),
        lambda p, q: p.__setitem__((0, slice(1, None)), p[1, :-1]),
    ]:
        want, want_q = data.copy(), other.copy()
        write(want, want_q)
        p, q = (dmesh.distribute(x, mesh, placements) for x in (data, other))
        for _ in range(2):  # planned, then from the plan cache
            write(p, q)
        assert_equal_all(comm, p.full_array(), want)
        assert_equal_all(comm, q.full_array(), want_q)


def test_row_copy_on_one_rank_sends_nothing(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    p = dmesh.distribute(np.arange(60.0).reshape(12, 5), mesh, [Shard(0)] * mesh.ndim)
    p[0, :] = p[1, :]  # planned
    with dmesh.debug.CommMode() as record:
        p[0, :] = p[1, :]
        p[-1] = p[-2]
    assert_all(comm, record.total_count == 0, f"{record.total_count} collectives")


def test_scalar_writes_raise_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    # A value the dtype cannot hold raises as NumPy does on every rank, holders of the
    # selected elements or not (a rank that raised alone would leave the others waiting).
    data = np.arange(12, dtype=np.int8).reshape(4, 3)
    a = dmesh.distribute(data, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    row = a[3]  # a detached view: its elements live on one coordinate
    for target, key in [(a, (-1, slice(None))), (a, (0, 1)), (a, (slice(None), 0)), (row, ...)]:
        for value, error in [(1000, OverflowError), (float("nan"), ValueError), (1j, TypeError)]:
            for _ in range(2):  # planned, then from the cache
                with pytest.raises(error):
                    target[key] = value
    assert_equal_all(comm, a.full_array(), data)
