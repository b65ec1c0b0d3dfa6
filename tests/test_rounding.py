"""Rounding and special values (issue 14, item 1): ``np.round``/``np.around`` and the
``round()`` method, ``np.fix``, ``np.isposinf``, ``np.isneginf``, ``np.sinc``, ``np.i0``,
against NumPy at 1-4 ranks on balanced, uneven and empty blocks and hostile values."""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import Verdict, assert_equal_all

X = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 1.25, -1.35, 12345.678, np.nan, np.inf, -np.inf, -0.0])


def same(got: Any, want: np.ndarray) -> bool:
    full = np.asarray(got.full_array())
    return (
        full.dtype == want.dtype
        and np.array_equal(full, want, equal_nan=full.dtype.kind in "fc")
        and np.array_equal(np.signbit(np.real(full)), np.signbit(np.real(want)))
    )


def test_rounding_matches_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    with Verdict(comm) as verdict, np.errstate(all="ignore"):
        for source in (X, np.concatenate([X, X])[X.size - 1 :]):  # balanced, then uneven
            for placements in ([Shard(0), *rest], [Replicate(), *rest]):
                a = dmesh.distribute(source, mesh, placements)[1:]  # empty blocks at 4 ranks
                want = source[1:]
                for decimals in (0, 1, -2):
                    verdict.check(same(np.round(a, decimals), np.round(want, decimals)), "round")
                    verdict.check(same(np.around(a, decimals), np.around(want, decimals)), "around")
                    verdict.check(same(a.round(decimals), want.round(decimals)), "round()")
                for func in (np.fix, np.isposinf, np.isneginf, np.sinc, np.i0):
                    verdict.check(same(func(a), func(want)), func.__name__)
                ints = dmesh.distribute(np.arange(-7, 8), mesh, placements)
                verdict.check(same(np.round(ints, -1), np.round(np.arange(-7, 8), -1)), "ints")


def test_partial_operand_is_reduced_first(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    p = dmesh.distribute(X, mesh, [Partial("sum")] + [Replicate()] * (mesh.ndim - 1))
    assert_equal_all(comm, np.round(p, 1).full_array(), np.round(X, 1))
