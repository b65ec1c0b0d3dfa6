"""Diagonals and triangles (issue 14, item 4; ops/rules/diagonals.py, dmesh/triangles.py):
NumPy's values at 1-4 ranks on balanced, uneven and empty blocks, every placement; tril,
triu, diag of a vector and the triangle indices communicate nothing; errors on every rank."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.collectives.errors import UnsupportedError
from helpers import BitVerdict, Verdict, assert_all, assert_raises_all

X = np.arange(42.0).reshape(7, 6) - 20.5
X[1, 1], X[3, 3], X[5, 5], X[0, 4], X[2, 2] = np.nan, np.inf, -np.inf, -0.0, -0.0
IX = (np.arange(30).reshape(5, 6) - 15) * (2**60)
IX[2, 2] = np.iinfo(np.int64).min
C3 = np.arange(60.0).reshape(3, 4, 5) - 30.0
V = np.array([3.0, -0.0, np.nan, -np.inf, 7.5, 1e300])


def _layouts(mesh: dmesh.DeviceMesh, x: np.ndarray) -> list[tuple[str, Any]]:
    rest = [Replicate()] * (mesh.ndim - 1)
    choices = [Replicate(), *(Shard(d) for d in range(x.ndim))]
    made = [
        (str(c), lambda x, c=list(c): dmesh.distribute(x, mesh, c))
        for c in itertools.product(choices, repeat=mesh.ndim)
    ]
    first = [Shard(0), *rest]
    made.append(("tail", lambda x: dmesh.distribute(np.concatenate([x, x]), mesh, first)[len(x) :]))
    made.append(("head", lambda x: dmesh.distribute(np.concatenate([x, x]), mesh, first)[: len(x)]))
    if x.ndim > 1:
        last = [*rest, Shard(x.ndim - 1)]
        made.append(("S(-1) sliced", lambda x: dmesh.distribute(
            np.concatenate([x[..., -1:], x], axis=-1), mesh, last)[..., 1:]))  # fmt: skip
    return made


def _record(verdict: BitVerdict, label: str, got: Any, want: Any, exact: bool = True) -> None:
    if isinstance(want, tuple):
        for i, (g, w) in enumerate(zip(got, want)):
            _record(verdict, f"{label}[{i}]", g, w, exact)
        return
    full = np.asarray(got.full_array())
    verdict.bits(label, full)
    ok = full.shape == want.shape and full.dtype == want.dtype
    if exact:
        ok = ok and np.array_equal(full, want, equal_nan=True)
        ok = ok and np.array_equal(np.signbit(full), np.signbit(want))
    else:
        ok = ok and np.allclose(
            full, want, rtol=1e-6 if full.dtype == np.float32 else 1e-12, equal_nan=True
        )
    verdict.check(ok, f"{label}: {full!r} != {want!r}")


@pytest.mark.parametrize("k", [-8, -2, 0, 1, 6])
def test_triangles_and_diagonals(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, k: int) -> None:
    with BitVerdict(comm) as verdict:
        for x in (X, IX):
            for label, make in _layouts(mesh, x):
                a = make(x)
                with debug.CommMode() as mode:
                    lower, upper = np.tril(a, k), np.triu(a, k)
                verdict.check(mode.counts() == {}, f"tril/triu communicated: {mode.counts()}")
                verdict.check(lower.spec.layout == a.spec.layout, f"tril layout {lower.spec}")
                _record(verdict, f"tril {label} {k}", lower, np.tril(x, k))
                _record(verdict, f"triu {label} {k}", upper, np.triu(x, k))
                _record(verdict, f"diagonal {label} {k}", np.diagonal(a, k), np.diagonal(x, k))
                _record(verdict, f"diag {label} {k}", np.diag(a, k), np.diag(x, k))
                _record(verdict, f"T diagonal {label} {k}", np.diagonal(a, k, 1, 0),
                        np.diagonal(x, k, 1, 0))  # fmt: skip
                got, want = np.trace(a, k), np.trace(x, k)
                _record(verdict, f"trace {label} {k}", got, np.asarray(want), exact=x is IX)
                _record(verdict, f"trace int32 {label} {k}", np.trace(a, k, dtype=np.float32),
                        np.asarray(np.trace(x, k, dtype=np.float32)), exact=False)  # fmt: skip


def test_diag_of_a_vector_stays_sharded(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        for label, make in _layouts(mesh, V):
            v = make(V)
            for k in (-3, 0, 2):
                with debug.CommMode() as mode:
                    got = np.diag(v, k)
                verdict.check(mode.counts() == {}, f"diag communicated: {mode.counts()}")
                _record(verdict, f"diag {label} {k}", got, np.diag(V, k))
                if v.placements[0] == Shard(0):
                    verdict.check(got.placements[0] == Shard(0), f"{got.placements}")
        v = dmesh.distribute(V[:0], mesh, [Shard(0), *rest])
        _record(verdict, "diag empty", np.diag(v, 1), np.diag(V[:0], 1))


def test_three_dims_and_partials(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        for label, make in _layouts(mesh, C3):
            c = make(C3)
            for args in ((0, 0, 1), (1, 2, 0), (-2, 1, 2), (3, -1, 0)):
                _record(verdict, f"diagonal {label} {args}", np.diagonal(c, *args),
                        np.diagonal(C3, *args))  # fmt: skip
                _record(verdict, f"trace {label} {args}", np.trace(c, *args),
                        np.trace(C3, *args), exact=False)  # fmt: skip
            _record(verdict, f"linalg.diagonal {label}", np.linalg.diagonal(c, offset=1),
                    np.linalg.diagonal(C3, offset=1))  # fmt: skip
            _record(verdict, f"tril 3-d {label}", np.tril(c, 1), np.tril(C3, 1))
            _record(verdict, f"triu 3-d {label}", np.triu(c, -1), np.triu(C3, -1))
        for op in ("sum", "max", "min", "prod"):
            p = dmesh.distribute(X[:, :5], mesh, [Partial(op), *rest])
            _record(verdict, f"tril {op}", np.tril(p), np.tril(X[:, :5]))
            _record(verdict, f"diagonal {op}", np.diagonal(p, -1), np.diagonal(X[:, :5], -1))
        v = dmesh.distribute(V[:4], mesh, [Shard(0), *rest])
        _record(verdict, "tril 1-d", np.tril(v), np.tril(V[:4]))


def test_fill_diagonal_in_place(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    tall = np.zeros((11, 3))
    cube = np.zeros((4, 4, 4), dtype=np.int32)
    with BitVerdict(comm) as verdict:
        for x, val, wrap in ((X, -1.5, False), (X, [np.nan, -0.0, 2.0], False),
                             (tall, [1.0, 2.0], True), (tall, 7.0, False), (IX, 9, False),
                             (cube, [3, 4], False)):  # fmt: skip
            want = x.copy()
            np.fill_diagonal(want, val, wrap=wrap)
            for label, make in _layouts(mesh, x):
                a = make(x)
                verdict.check(np.fill_diagonal(a, val, wrap=wrap) is None, "returns None")
                _record(verdict, f"fill_diagonal {label} {val} {wrap}", a, want)
        a = dmesh.distribute(
            np.concatenate([X, X]), mesh, [Shard(0), *[Replicate()] * (mesh.ndim - 1)]
        )
        view = a[7:]
        np.fill_diagonal(view, 0.5)  # writes through the view, as NumPy's
        want = np.concatenate([X, X])
        np.fill_diagonal(want[7:], 0.5)
        _record(verdict, "fill_diagonal view", a, want)


@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (5, 5), (7, 3), (3, 8)])
def test_triangle_indices(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: tuple[int, int]
) -> None:
    n, m = shape
    with BitVerdict(comm) as verdict:
        for k in (-9, -1, 0, 2, 9):
            with debug.CommMode() as mode:
                got = (
                    dmesh.tril_indices(n, k, m, mesh=mesh),
                    dmesh.triu_indices(n, k, m, mesh=mesh),
                )
            verdict.check(mode.counts() == {}, f"communicated: {mode.counts()}")
            _record(verdict, f"tril_indices {shape} {k}", got[0], np.tril_indices(n, k, m))
            _record(verdict, f"triu_indices {shape} {k}", got[1], np.triu_indices(n, k, m))
            a = dmesh.distribute(
                np.zeros(shape), mesh, [Shard(0), *[Replicate()] * (mesh.ndim - 1)]
            )
            _record(verdict, f"tril_indices_from {k}", np.tril_indices_from(a, k),
                    np.tril_indices_from(np.zeros(shape), k))  # fmt: skip
            _record(verdict, f"triu_indices_from {k}", np.triu_indices_from(a, k),
                    np.triu_indices_from(np.zeros(shape), k))  # fmt: skip
        r = dmesh.tril_indices(n, mesh=mesh, placements=[Replicate()] * mesh.ndim)
        _record(verdict, "replicated", r, np.tril_indices(n))


def test_errors_raise_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    a = dmesh.distribute(X, mesh, [Shard(0), *rest])
    v = dmesh.distribute(V, mesh, [Shard(0), *rest])
    assert_raises_all(comm, ValueError, np.diagonal, v)
    assert_raises_all(comm, ValueError, np.diagonal, a, 0, 1, 1)
    assert_raises_all(comm, ValueError, np.diag, dmesh.distribute(C3, mesh, [Shard(0), *rest]))
    assert_raises_all(comm, ValueError, np.fill_diagonal, v, 1.0)
    assert_raises_all(
        comm, ValueError, np.fill_diagonal, dmesh.distribute(C3, mesh, [Shard(0), *rest]), 1.0
    )
    assert_raises_all(comm, UnsupportedError, np.fill_diagonal, a, v)
    p = dmesh.distribute(X, mesh, [Partial("sum"), *rest])
    np.fill_diagonal(p, 1.0)  # a partial target holds its value first, then the write
    want = X.copy()
    np.fill_diagonal(want, 1.0)
    assert_all(comm, np.array_equal(p.full_array(), want, equal_nan=True), "partial target")
    assert_raises_all(comm, ValueError, np.tril_indices_from, v)
    assert_raises_all(comm, UnsupportedError, np.trace, a, out=np.zeros(()))
    with Verdict(comm) as verdict:
        verdict.check(True)
