"""``np.union1d``, ``np.intersect1d``, ``np.setdiff1d``, ``np.setxor1d`` and the Array API's
``np.unique_*`` functions of DArrays against NumPy at any rank count: every pair of layouts
(sharded, replicated, uneven with empty blocks, NumPy arrays), NaN, +-inf, integer
extremes, empty arrays and 2-D inputs.

Zeros of both signs compare equal; NumPy's own sort is not stable, so which of them its
set functions keep is not defined, and the check compares zeros by value (every rank must
still hold the same bits).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI
from set_layouts import check, layouts

import dmesh
from helpers import BitVerdict

_R = np.random.default_rng(6)
A = _R.integers(0, 12, 17).astype(np.float64)
A[[2, 9]] = np.nan
A[4] = np.inf
B = _R.integers(5, 20, 13).astype(np.float64)
B[[3, 8]] = [np.nan, -np.inf]
BIG = np.iinfo(np.int64)
IA = np.array([BIG.max, 3, BIG.min, 3, 0, 7], dtype=np.int64)
IB = np.array([[7, BIG.min], [1, 1]], dtype=np.int64)
PAIRS = [(A, B), (IA, IB), (A[:3], np.zeros(0))]


def _each_pair(mesh: dmesh.DeviceMesh, a: np.ndarray, b: np.ndarray) -> Any:
    for la, da in layouts(mesh, a):
        yield f"{la}, NumPy", da, b
        for lb, db in layouts(mesh, b):
            yield f"{la}, {lb}", da, db
    yield "NumPy, sharded", a, dmesh.distribute(b, mesh)


@pytest.mark.parametrize("func", [np.union1d, np.setxor1d, np.setdiff1d], ids=lambda f: f.__name__)
def test_set_functions(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, func: Any) -> None:
    with BitVerdict(comm) as verdict:
        for a, b in PAIRS:
            for label, x, y in _each_pair(mesh, a, b):
                check(verdict, f"{label}", func(x, y), func(a, b))
            if func is not np.union1d:
                ua, ub = np.unique(a), np.unique(b)
                for label, x in layouts(mesh, ua):
                    got = func(x, dmesh.distribute(ub, mesh), assume_unique=True)
                    check(verdict, f"{label} assume_unique", got, func(ua, ub, assume_unique=True))
        mixed = func(dmesh.distribute(A, mesh), dmesh.distribute(IB, mesh))
        check(verdict, "float64 and int64", mixed, func(A, IB))


def test_intersect1d(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for a, b in PAIRS:
            for label, x, y in _each_pair(mesh, a, b):
                check(verdict, label, np.intersect1d(x, y), np.intersect1d(a, b))
                got = np.intersect1d(x, y, return_indices=True)
                check(verdict, f"{label} indices", got, np.intersect1d(a, b, return_indices=True))
                # NumPy's answer for non-unique input with assume_unique (pairs in a row)
                got = np.intersect1d(x, y, assume_unique=True, return_indices=True)
                want = np.intersect1d(a, b, assume_unique=True, return_indices=True)
                check(verdict, f"{label} assume_unique", got, want)


def test_results_are_sharded(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """No rank holds the whole result: blocks over every mesh dim."""
    a = np.arange(40) * 3
    x = dmesh.distribute(a, mesh)
    with BitVerdict(comm) as verdict:
        u = np.union1d(x, x + 1)
        verdict.check(all(p.is_shard() for p in u.placements), repr(u))
        verdict.check(u.to_local().size < u.size or mesh.size() == 1, repr(u))


_UNIQUE = [np.unique_values, np.unique_counts, np.unique_inverse, np.unique_all]


@pytest.mark.parametrize("func", _UNIQUE, ids=lambda f: f.__name__)
def test_unique_functions(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, func: Any) -> None:
    """NumPy's results (equal_nan=False: each NaN its own value), as its named tuples.

    NumPy's unique_values may leave integers unsorted and unique_inverse numbers
    separate NaNs by an unstable sort: dmesh's values are sorted and its NaN
    ids stable, so those are compared with np.unique's stable, sorted answer.
    """
    cases = [A, A.reshape(1, 17), IA, IB, np.zeros(0), np.array(2.5)]
    with BitVerdict(comm) as verdict:
        for a in cases:
            want: Any = np.unique(a, return_index=True, return_inverse=True,
                                  return_counts=True, equal_nan=False)  # fmt: skip
            values, index, inverse, counts = want
            want = {np.unique_values: values, np.unique_counts: (values, counts),
                    np.unique_inverse: (values, inverse),
                    np.unique_all: (values, index, inverse, counts)}[func]  # fmt: skip
            for label, x in layouts(mesh, a):
                got = func(x)
                if func is not np.unique_values:
                    named = type(func(a)).__name__
                    verdict.check(type(got).__name__ == named, f"{label}: {type(got)}")
                check(verdict, f"{a.shape} {label}", tuple(got) if isinstance(got, tuple)
                      else got, want)  # fmt: skip
