"""``np.zeros_like``/``ones_like``/``full_like``/``copy`` of DArrays (issue 14, item 2):
the argument's layout, no communication, NumPy's values at 1-4 ranks."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.collectives.errors import UnsupportedError
from helpers import Verdict, assert_all, assert_raises_all

X = np.arange(30.0).reshape(6, 5) - 7.5


def test_like_functions_keep_the_layout(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    with Verdict(comm) as verdict:
        for placements in ([Shard(0), *rest], [Shard(1), *rest], [Replicate(), *rest]):
            a = dmesh.distribute(X, mesh, placements)[1:]  # uneven, an empty block at 4+ ranks
            with debug.CommMode() as mode:
                made = {
                    "zeros": (np.zeros_like(a), np.zeros_like(X[1:])),
                    "ones int8": (np.ones_like(a, dtype=np.int8), np.ones_like(X[1:], np.int8)),
                    "full": (np.full_like(a, np.nan), np.full_like(X[1:], np.nan)),
                    "full int": (np.full_like(a, -3, dtype=int), np.full_like(X[1:], -3, int)),
                    "copy": (np.copy(a), np.copy(X[1:])),
                }
            verdict.check(mode.counts() == {}, f"communicated: {mode.counts()}")
            for name, (got, want) in made.items():
                verdict.check(got.spec.layout == a.spec.layout, f"{name}: layout {got.spec}")
                full = got.full_array()
                ok = full.dtype == want.dtype and np.array_equal(full, want, equal_nan=True)
                verdict.check(ok, f"{name} {placements}: {full!r}")
            other = np.zeros_like(a, shape=(3, 2))
            verdict.check(np.array_equal(other.full_array(), np.zeros((3, 2))), "shape=")


def test_partial_argument_gives_its_value(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """ones_like of a partial sum is ones, not the number of ranks."""
    for op in ("sum", "prod", "max", "min"):
        p = dmesh.distribute(X, mesh, [Partial(op)] + [Replicate()] * (mesh.ndim - 1))
        for got, want in (
            (np.ones_like(p), np.ones_like(X)),
            (np.full_like(p, 2.5), np.full_like(X, 2.5)),
        ):
            assert_all(comm, np.array_equal(got.full_array(), want), f"{op}: {got.full_array()}")
        copied = np.copy(p)
        assert_all(comm, np.array_equal(copied.full_array(), X), f"copy of {op}")


def test_unsupported_keywords_raise_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(X, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, UnsupportedError, np.zeros_like, a, order="F", match="order")
    assert_raises_all(comm, UnsupportedError, np.ones_like, a, subok=False, match="subok")
    assert_raises_all(comm, UnsupportedError, np.copy, a, order="F", match="order")
