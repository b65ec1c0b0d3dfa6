"""Integer-array indexing, assignment and ``np.take`` on DArrays agree with NumPy.

Each check compares this rank's block with its part of NumPy's result (the
layout says which part), so most cases cost only the op's own collectives;
the verdicts are pooled into one ``assert_all`` per test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import assert_all, assert_raises_all

WORLD = MPI.COMM_WORLD.Get_size()
A1 = np.arange(5.0) * 10  # 5 elements: uneven blocks on 2, 3 and 4 ranks
A2 = np.arange(15.0).reshape(5, 3) ** 2
KEYS1 = [
    [3, 1], np.array([-1, 0, 4, 4, 2]), [], np.array([[0, 4], [2, -5]]),
    np.array([True, False, True, True, False]), np.s_[None, [2, 2]], np.s_[..., [0]],
    True, False, np.s_[..., True], np.s_[np.False_, None, 1:],
]  # fmt: skip
KEYS2 = [
    [2, 0], np.s_[:, [2, -1, 0]], np.s_[[1, 1, 4], [0, 2, 2]], np.s_[[[0], [4]], [0, 1, 2]],
    np.s_[1:, [0, 0]], np.s_[[4, 0], 1:], np.s_[2, [1, 0]], np.s_[[1, 3], None, 0],
    np.s_[..., [2, 2]], np.s_[None, [1], :], np.s_[::2, [1]], A2 % 3 == 1, np.s_[[], :],
    np.s_[[[3]], ...], np.s_[-1, [[0], [2]]], np.s_[[0, 2], -1],
    np.s_[:, True], np.s_[True, 1], np.s_[[[0], [1]], False], np.s_[False, ..., None],
    np.s_[[4, 1], :, np.True_], np.s_[1, True, [2, 0]],
]  # fmt: skip
A3 = np.arange(60).reshape(3, 4, 5)
KEYS3 = [np.s_[[0, 2], :, [1, 4]], np.s_[:, [3, 0], ..., [4]], np.s_[1:, [[0], [3]], 2]]  # first
CASES = [
    (A1, KEYS1), (A2, KEYS2), (A3, KEYS3), (np.arange(1.0) + 7, [[0, 0, -1]]), (np.zeros(0), [[]]),
    (np.array(4.0), [True, False, np.s_[None, True], np.array(False)]),
]  # fmt: skip


def layouts(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[Any]]:
    """Replicated, and each dim sharded over every mesh dim (one mesh dim for a 2-D mesh)."""
    rest = [Replicate()] * (mesh.ndim - 1)
    out = [[Replicate()] * mesh.ndim] + [[Shard(d), *rest] for d in range(ndim)]
    if mesh.ndim == 2 and ndim > 0:
        out += [[Replicate(), Shard(0)]] + ([[Shard(1), Shard(0)]] if ndim > 1 else [])
    return out


def agrees(got: dmesh.DArray, want: np.ndarray) -> bool:
    """Global shape and dtype, and this rank's block against its part of ``want``."""
    coord = got.mesh.coordinate
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if coord is None:
        return got.local.size == 0 or got.ndim == 0
    return np.array_equal(got.local, want[got.spec.layout.slices(coord)])


def test_getitem(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    failed = []
    for a, keys in CASES:
        for placements in layouts(mesh, a.ndim):
            d = dmesh.distribute(a, mesh, placements)
            for key in keys:
                got = d[key]
                if not agrees(got, a[key]):
                    failed.append(f"{placements} {key!r}: {got.local!r}")
    uneven = dmesh.distribute(np.arange(7.0), mesh, [Shard(0)] * mesh.ndim)[2:]  # empty blocks
    for key in ([4, 0, -1, 0], [[1], [2]], []):
        if not agrees(uneven[key], np.arange(7.0)[2:][key]):
            failed.append(f"uneven {key}")
    assert_all(comm, not failed, "; ".join(failed))


def test_result_is_sharded_like_the_indexed_axis(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    d = dmesh.distribute(A2, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    got = d[np.array([[4, 0, 1], [2, 2, 3]])]  # shape (2, 3, 3)
    ok = got.placements[0] == Shard(0) and got.spec.layout.is_balanced
    columns = dmesh.distribute(A2, mesh, [Shard(1)] + [Replicate()] * (mesh.ndim - 1))
    kept = columns[[4, 0, 0]]  # the indexed axis is not sharded: a local take
    ok = ok and kept.placements[0] == Shard(1) and agrees(kept, A2[[4, 0, 0]])
    full = got.full_array()
    ok = ok and np.array_equal(full, A2[np.array([[4, 0, 1], [2, 2, 3]])])
    partial = dmesh.distribute(A2, mesh, [Partial("sum")] + [Shard(0)] * (mesh.ndim - 1))
    summed = partial[:, [2, 0]]  # taking is linear: the terms are taken, not reduced
    ok = ok and summed.placements[0] == Partial("sum")
    ok = ok and np.array_equal(summed.full_array(), A2[:, [2, 0]])
    assert_all(comm, ok, f"{got!r} {kept!r} {summed!r}")


def test_index_darrays(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    idx = np.array([4, 0, -2, 1, 1, 3, 2, -5])
    failed = []
    for index_placements in ([Replicate()] * mesh.ndim, [Shard(0)] * mesh.ndim):
        i = dmesh.distribute(idx, mesh, index_placements)
        for placements in layouts(mesh, 2):
            d = dmesh.distribute(A2, mesh, placements)
            for key, want in (
                (i, A2[idx]),
                (i[1:], A2[idx[1:]]),  # an uneven index
                ((slice(None), np.remainder(i, 3)), A2[:, idx % 3]),
                ((i, [[0], [2]]), A2[idx, [[0], [2]]]),  # broadcast with a replicated array
            ):
                if not agrees(d[key], want):
                    failed.append(f"{index_placements} {placements} {key!r}")
    two_d = dmesh.distribute(idx.reshape(2, 4), mesh, [Shard(1)] + [Replicate()] * (mesh.ndim - 1))
    rows = dmesh.distribute(A1, mesh, [Replicate()] * (mesh.ndim - 1) + [Shard(0)])
    got = rows[two_d]
    if not agrees(got, A1[idx.reshape(2, 4)]):
        failed.append("2-d index")
    assert_all(comm, not failed, "; ".join(failed))


def test_setitem(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    failed = []
    for a, keys in CASES[:2]:
        for placements in layouts(mesh, a.ndim):
            for key in keys:
                shape = a[key].shape
                values = -np.arange(1.0, 1 + int(np.prod(shape))).reshape(shape)
                darray_values = dmesh.distribute(values, mesh, [Replicate()] * mesh.ndim)
                for value in (7.5, values, darray_values):
                    d = dmesh.distribute(a, mesh, placements)
                    d[key] = value
                    want = a.copy()
                    want[key] = values if value is darray_values else value
                    if not agrees(d, want):
                        failed.append(f"{placements} {key!r} {type(value).__name__}")
    assert_all(comm, not failed, "; ".join(failed))


def test_setitem_repeated_and_distributed(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    failed = []
    idx = np.array([3, 0, 3, -2, 0, 3])  # repeated: NumPy's outcome (the last write here)
    values = np.arange(6.0) + 100
    for placements in layouts(mesh, 1):
        want = A1.copy()
        want[idx] = values
        d = dmesh.distribute(A1, mesh, placements)
        d[idx] = values
        e = dmesh.distribute(A1, mesh, placements)
        e[dmesh.distribute(idx, mesh, [Shard(0)] * mesh.ndim)] = dmesh.distribute(
            values, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
        )
        if not (agrees(d, want) and agrees(e, want)):
            failed.append(str(placements))
        grid = dmesh.distribute(A2, mesh, placements)
        grid[[1, 4], [2, 0]] = [[-1.0, -2.0]]
        expect = A2.copy()
        expect[[1, 4], [2, 0]] = [[-1.0, -2.0]]
        if not agrees(grid, expect):
            failed.append(f"2-d {placements}")
    assert_all(comm, not failed, "; ".join(failed))


@given(
    n=st.integers(0, 9),
    picks=st.lists(st.integers(-9, 8), max_size=7),
    sharded=st.booleans(),
)
def test_random_indices(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, n: int, picks: list[int], sharded: bool
) -> None:
    """Derandomized (tests/conftest.py): every rank draws the same examples."""
    a = np.arange(n) * 3 - 4
    index = np.array([p for p in picks if -n <= p < n], dtype=np.intp)
    placements = [Shard(0) if sharded else Replicate()] * mesh.ndim
    d = dmesh.distribute(a, mesh, placements)
    got = d[index]
    d[index[::-1]] = np.arange(index.size)
    want = a.copy()
    want[index[::-1]] = np.arange(index.size)
    assert_all(comm, agrees(got, a[index]) and agrees(d, want), f"{n} {index}")


def test_take(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    failed = []
    for placements in layouts(mesh, 2):
        d = dmesh.distribute(A2, mesh, placements)
        for args, kwargs in (
            (([3, 7, -1],), {}),
            (([[2, 0]],), {"axis": 1}),
            ((np.array([0, 4, 4]),), {"axis": -2}),
            (([7, -9, 2],), {"axis": 0, "mode": "wrap"}),
            (([7, -9, 2],), {"axis": 1, "mode": "clip"}),
            ((2,), {"axis": 0}),
        ):
            got = np.take(d, *args, **kwargs)
            if not agrees(got, np.asarray(np.take(A2, *args, **kwargs))):
                failed.append(f"{placements} {args} {kwargs}")
        i = dmesh.distribute(np.array([5, -1, 0]), mesh, [Shard(0)] * mesh.ndim)
        if not agrees(np.take(d, i, axis=1, mode="wrap"), np.take(A2, [5, -1, 0], 1, mode="wrap")):
            failed.append(f"{placements} DArray indices")
    assert_all(comm, not failed, "; ".join(failed))


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    d = dmesh.distribute(A2, mesh, [Shard(0)] * mesh.ndim)
    assert_raises_all(comm, IndexError, d.__getitem__, [5], match="index 5 is out of bounds")
    assert_raises_all(comm, IndexError, d.__getitem__, np.s_[:, [0, -4]], match="-4")
    assert_raises_all(comm, IndexError, d.__getitem__, [1.0], match="integer or boolean")
    assert_raises_all(comm, IndexError, d.__getitem__, np.s_[[0, 1], [0, 1, 2]], match="broadcast")
    assert_raises_all(comm, IndexError, d.__getitem__, np.array([True, False]), match="boolean")
    bad = dmesh.distribute(np.array([0, 9, 1]), mesh, [Shard(0)] * mesh.ndim)
    assert_raises_all(comm, IndexError, d.__getitem__, bad, match="index 9 is out of bounds")
    mask = dmesh.distribute(np.array([True] * 5), mesh, [Replicate()] * mesh.ndim)
    mixed = d[mask, 0]  # a boolean DArray beside an int: its nonzero() arrays, as NumPy
    assert_all(comm, np.array_equal(mixed.full_array(), A2[np.array([True] * 5), 0]))
    short = dmesh.distribute(np.array([True] * 4), mesh, [Replicate()] * mesh.ndim)
    assert_raises_all(comm, IndexError, d.__getitem__, (short, 0), match="did not match")
    assert_raises_all(comm, ValueError, d.__setitem__, [0, 1], np.ones(4), match="broadcast")
    assert_raises_all(comm, IndexError, d.__setitem__, [0, 7], 1.0, match="out of bounds")
    assert_raises_all(comm, np.exceptions.AxisError, np.take, d, [0], axis=2)


def test_only_the_indexed_elements_move(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replicated index: two all-to-alls and no redistribution of the array."""
    import dmesh.darray
    import dmesh.ops.indexing.fancy as fancy

    calls: list[str] = []
    all_to_all, moved = fancy.coll.all_to_all, dmesh.darray.DArray._moved

    def counting_all_to_all(*args: Any, **kwargs: Any) -> Any:
        calls.append("all_to_all")
        return all_to_all(*args, **kwargs)

    def counting_moved(self: dmesh.DArray, *args: Any) -> Any:
        calls.append("moved")
        return moved(self, *args)

    d = dmesh.distribute(A2, mesh, [Shard(0)] * mesh.ndim)
    monkeypatch.setattr(fancy.coll, "all_to_all", counting_all_to_all)
    monkeypatch.setattr(dmesh.darray.DArray, "_moved", counting_moved)
    got = d[[4, 0, 2, 2]]
    local = d[:, [2, 1]]
    monkeypatch.undo()
    ok = calls == ["all_to_all", "all_to_all"] and agrees(got, A2[[4, 0, 2, 2]])
    assert_all(comm, ok and agrees(local, A2[:, [2, 1]]), str(calls))


def test_non_members_do_not_hang(comm: MPI.Intracomm) -> None:
    if WORLD == 1:
        pytest.skip("needs a rank outside the mesh")
    with dmesh.init_mesh((WORLD - 1,), comm=comm) as mesh:
        d = dmesh.distribute(A1, mesh, [Shard(0)])
        i = dmesh.distribute(np.array([4, 1, 1]), mesh, [Shard(0)])
        got, by_darray = d[[3, 0, -1]], d[i]
        d[[0, 4]] = -1.0
        taken = np.take(d, [4, 0])
        ok = agrees(got, A1[[3, 0, -1]]) and agrees(by_darray, A1[[4, 1, 1]])
        ok = ok and agrees(taken, np.array([-1.0, -1.0]))
        assert_all(comm, ok and got.shape == (3,))


def test_zero_dimensional_boolean_darray_index(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A 0-d bool DArray indexes as a Python bool (a new axis of length 1 or 0), read and write."""
    failed = []
    for a in (np.array(3.0), A2):
        for placements in layouts(mesh, a.ndim):
            for flag in (True, False):
                mask = dmesh.distribute(np.array(flag), mesh, [Replicate()] * mesh.ndim)
                d = dmesh.distribute(a, mesh, placements)
                if not agrees(d[mask], a[np.array(flag)]) or not agrees(
                    d[..., mask], a[..., np.array(flag)]
                ):
                    failed.append(f"read {placements} {flag}")
                d[mask] = -1.0
                want = a.copy()
                want[np.array(flag)] = -1.0
                if not agrees(d, want):
                    failed.append(f"write {placements} {flag}")
    assert_all(comm, not failed, "; ".join(failed))
