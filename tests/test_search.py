"""``np.searchsorted``, ``np.digitize`` and ``np.isin`` of DArrays against NumPy, at any rank
count: sharded sorted arrays and/or sharded queries, uneven and empty blocks, NaN, +-inf,
-0.0, integer extremes, and errors raised on every rank.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI
from set_layouts import check, layouts

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import BitVerdict, assert_equal_all, assert_raises_all

_R = np.random.default_rng(14)
SORTED = np.sort(np.concatenate([_R.integers(-5, 6, 21).astype(np.float64), [np.inf, -np.inf,
                                 -0.0, np.nan, np.nan]]))  # fmt: skip
QUERIES = np.array([-np.inf, -6.0, -0.0, 0.0, 2.5, 3.0, 5.0, 7.0, np.inf, np.nan, 3.0])
BIG = np.iinfo(np.int64)
INTS = np.array([BIG.min, -3, 0, 0, 4, 9, BIG.max], dtype=np.int64)
INT_QUERIES = np.array([BIG.max, BIG.min, 0, 5, -4, 9], dtype=np.int64)


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, side: str) -> None:
    with BitVerdict(comm) as verdict:
        for a, v in ((SORTED, QUERIES), (INTS, INT_QUERIES), (SORTED[:2], QUERIES[:1])):
            want = np.searchsorted(a, v, side=side)
            for la, da in layouts(mesh, a):
                for lv, dv in layouts(mesh, v):
                    check(verdict, f"{side} a {la}, v {lv}", np.searchsorted(da, dv, side=side),
                          want)  # fmt: skip
                check(verdict, f"{side} a {la}, NumPy v", np.searchsorted(da, v, side=side), want)
                check(verdict, f"{side} scalar", np.searchsorted(da, v[0], side=side), want[0])
            for lv, dv in layouts(mesh, v):
                check(verdict, f"{side} NumPy a, v {lv}", np.searchsorted(a, dv, side=side), want)


def test_searchsorted_sorter_and_2d_queries(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = _R.integers(0, 9, 15).astype(np.float64)
    sorter = np.argsort(a, kind="stable")
    v = np.arange(-1, 11, dtype=np.float64).reshape(3, 4)
    with BitVerdict(comm) as verdict:
        for la, da in layouts(mesh, a):
            got = np.searchsorted(da, v, sorter=sorter)
            check(verdict, f"sorter, a {la}", got, np.searchsorted(a, v, sorter=sorter))
        for lv, dv in layouts(mesh, v):
            sa = dmesh.distribute(np.sort(a), mesh, [Shard(0)] * mesh.ndim)
            check(verdict, f"2-D v {lv}", np.searchsorted(sa, dv, "right"),
                  np.searchsorted(np.sort(a), v, "right"))  # fmt: skip


def test_partial_operands(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Partial terms are reduced first."""
    rest = [Replicate()] * (mesh.ndim - 1)
    a = dmesh.distribute(SORTED[:-2], mesh, [Partial("max"), *rest])
    v = dmesh.distribute(QUERIES, mesh, [Partial("sum"), *rest])
    with BitVerdict(comm) as verdict:
        check(verdict, "searchsorted", np.searchsorted(a, v), np.searchsorted(SORTED[:-2], QUERIES))
        check(verdict, "isin", np.isin(v, a), np.isin(QUERIES, SORTED[:-2]))
        check(verdict, "digitize", np.digitize(v, a), np.digitize(QUERIES, SORTED[:-2]))


@pytest.mark.parametrize("right", [False, True])
def test_digitize(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, right: bool) -> None:
    rising = np.array([-np.inf, -2.0, -0.0, 0.0, 1.0, 1.0, 4.0, np.inf])
    x = np.concatenate([QUERIES, rising])
    cases = [rising, rising[::-1].copy(), np.array([3.0, 3.0, 3.0, 5.0]), np.array([2.0])]
    cases += [np.array([7.0, 7.0, 2.0, 2.0, -1.0]), np.array([1.0, np.nan])]
    with BitVerdict(comm) as verdict:
        for bins in cases:
            want = np.digitize(x, bins, right=right)
            for lb, db in layouts(mesh, bins):
                check(verdict, f"bins {bins} {lb}", np.digitize(x, db, right=right), want)
            for lx, dx in layouts(mesh, x):
                check(verdict, f"x {lx}", np.digitize(dx, bins, right=right), want)
        ints = np.array([-9, 0, 0, 5], dtype=np.int64)
        for lb, db in layouts(mesh, ints):
            got = np.digitize(dmesh.distribute(INT_QUERIES, mesh), db, right=right)
            check(verdict, f"int bins {lb}", got, np.digitize(INT_QUERIES, ints, right=right))


def test_digitize_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Bins that are not monotonic, across a block edge too; complex x; 2-D bins."""
    n = 3 * mesh.size()
    zigzag = np.arange(n, dtype=np.float64)
    zigzag[n // 2] = -1.0  # the fall may sit on a block edge or inside a block
    for bins in (zigzag, np.array([0.0, 1.0, 0.5]), np.array([np.nan, 1.0, 2.0])):
        for _, db in layouts(mesh, bins):
            assert_raises_all(comm, ValueError, np.digitize, QUERIES, db, match="monoton")
    d = dmesh.distribute(QUERIES + 0j, mesh)
    assert_raises_all(comm, TypeError, np.digitize, d, np.arange(3.0), match="complex")
    b2 = dmesh.distribute(np.ones((2, 2)), mesh)
    assert_raises_all(comm, ValueError, np.digitize, QUERIES, b2, match="1-D")


def test_isin(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    tests = np.array([3.0, -0.0, np.nan, np.inf, 7.0, 3.0, 100.0, -5.0])
    element = np.concatenate([QUERIES, [0.0, 100.0, -5.0]]).reshape(2, 7)
    with BitVerdict(comm) as verdict:
        for invert in (False, True):
            want = np.isin(element, tests, invert=invert)
            for le, de in layouts(mesh, element):
                check(verdict, f"{le} in NumPy", np.isin(de, tests, invert=invert), want)
                for lt, dt in layouts(mesh, tests):
                    got = np.isin(de, dt, invert=invert)
                    check(verdict, f"{invert} {le} in {lt}", got, want)
            for lt, dt in layouts(mesh, tests):
                got = np.isin(element, dt, invert=invert)
                check(verdict, f"NumPy in {lt}", got, want)
        want = np.isin(INT_QUERIES, INTS)
        for lt, dt in layouts(mesh, INTS):
            for kind in (None, "sort"):
                got = np.isin(dmesh.distribute(INT_QUERIES, mesh), dt, kind=kind)
                check(verdict, f"ints {lt} {kind}", got, want)
            got = np.isin(dmesh.distribute(INT_QUERIES.astype(np.float64), mesh), dt)
            check(verdict, f"float in ints {lt}", got, np.isin(INT_QUERIES.astype(float), INTS))
            got = np.isin(dmesh.distribute(INT_QUERIES, mesh), dt, assume_unique=True)
            check(verdict, f"assume_unique {lt}", got, np.isin(INT_QUERIES, INTS, True))
        small = INTS[1:-1]
        for lt, dt in layouts(mesh, small):
            got = np.isin(dmesh.distribute(INT_QUERIES, mesh), dt, kind="table")
            check(verdict, f"table {lt}", got, np.isin(INT_QUERIES, small, kind="table"))
        empty = np.zeros(0)
        for lt, dt in layouts(mesh, empty):
            check(verdict, f"in empty {lt}", np.isin(QUERIES, dt), np.isin(QUERIES, empty))


def test_isin_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(QUERIES, mesh)
    assert_raises_all(comm, ValueError, np.isin, x, INTS, kind="table", match="table")
    assert_raises_all(comm, ValueError, np.isin, x, INTS, kind="hash", match="kind")
    for _, dt in layouts(mesh, INTS):  # NumPy: the test elements' range overflows int64
        q = dmesh.distribute(INT_QUERIES, mesh)
        assert_raises_all(comm, RuntimeError, np.isin, q, dt, kind="table", match="range")
    assert_raises_all(comm, ValueError, np.searchsorted, x, 1.0, side="middle", match="side")
    m = dmesh.distribute(np.ones((3, 2)), mesh)
    assert_raises_all(comm, ValueError, np.searchsorted, m, 1.0, match="1-D")


def test_sort_keywords(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """NumPy 2's ``stable=`` of np.sort/np.argsort, and ``kind=`` where one block holds the
    axis: NumPy's own order of ties (its default quicksort), bit for bit."""
    ties = np.random.default_rng(3).integers(0, 4, (6, 40)).astype(np.float64)
    ties[2, 5] = np.nan
    for placements in ([Replicate()] * mesh.ndim, [Shard(0)] * mesh.ndim):
        d = dmesh.distribute(ties, mesh, placements)
        assert_equal_all(comm, np.argsort(d, axis=1).full_array(), np.argsort(ties, axis=1))
        assert_equal_all(comm, np.argsort(d, axis=0, stable=True).full_array(),
                         np.argsort(ties, axis=0, stable=True))  # fmt: skip
        assert_equal_all(comm, np.sort(d, axis=None, stable=True).full_array(),
                         np.sort(ties, axis=None, stable=True))  # fmt: skip
        assert_raises_all(comm, ValueError, np.argsort, d, kind="stable", stable=True)


def test_default_argsort_of_a_sharded_axis_is_a_valid_order(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """Without ``stable``, each block is argsorted by NumPy's default (introsort): ties may
    come in any order, as NumPy's default allows, but the indices are a permutation that
    sorts the array (NaNs last), the same on every rank."""
    x = np.random.default_rng(5).integers(0, 5, 301).astype(np.float64)
    x[[7, 150, 299]] = np.nan
    with BitVerdict(comm) as v:
        for placements in ([Shard(0)] * mesh.ndim, [Shard(0)] + [Replicate()] * (mesh.ndim - 1)):
            d = dmesh.distribute(x, mesh, placements)
            order = np.argsort(d).full_array()
            v.check(np.array_equal(np.sort(order), np.arange(x.size)), "not a permutation")
            v.check(np.array_equal(x[order], np.sort(x), equal_nan=True), "not sorted")
            v.bits(f"argsort {placements}", order)
            stable = np.argsort(d, kind="stable").full_array()
            v.check(np.array_equal(stable, np.argsort(x, kind="stable")), "stable order")
