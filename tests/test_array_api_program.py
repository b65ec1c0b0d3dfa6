"""An unmodified Array API program runs on DArrays and on array_api_strict arrays and
gives the same answer (issue 15, item 4): the program asks its argument for its
namespace and calls only that."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import BitVerdict

xs = pytest.importorskip("array_api_strict")


def conjugate_gradient(a: Any, b: Any, steps: int) -> Any:
    """Solve ``a x = b`` (symmetric positive definite ``a``) by conjugate gradients."""
    xp = a.__array_namespace__()
    x = xp.zeros_like(b)
    r = b - xp.matmul(a, x)
    p = r
    rr = xp.vecdot(r, r)
    for _ in range(steps):
        ap = xp.matmul(a, p)
        alpha = rr / xp.vecdot(p, ap)
        x = x + alpha * p
        r = r - alpha * ap
        new = xp.vecdot(r, r)
        p = r + (new / rr) * p
        rr = new
    return x


def summary(x: Any) -> Any:
    """Standardized columns, their sorted maxima, unique signs and a clipped norm."""
    xp = x.__array_namespace__()
    z = (x - xp.mean(x, axis=0)) / xp.std(x, axis=0, correction=1)
    top = xp.sort(xp.max(z, axis=0), descending=True)
    signs = xp.unique_values(xp.sign(xp.round(z)))
    norm = xp.clip(xp.linalg.vector_norm(z, axis=1), max=2.5)
    flipped = xp.flip(xp.cumulative_sum(xp.where(z > 0, z, 0.0), axis=0), axis=0)
    return top, signs, norm, flipped


def test_program_on_both_namespaces(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rng = np.random.default_rng(15)
    m = rng.standard_normal((9, 9))
    a = m @ m.T + 9 * np.eye(9)
    b = rng.standard_normal(9)
    data = rng.standard_normal((11, 4)) * [1.0, 10.0, 0.1, 3.0]
    rows = [Shard(0)] * mesh.ndim
    with BitVerdict(comm) as verdict:
        got = conjugate_gradient(
            dmesh.distribute(a, mesh, rows), dmesh.distribute(b, mesh, rows), 12
        )
        want = conjugate_gradient(xs.asarray(a), xs.asarray(b), 12)
        verdict.equal(got.full_array(), np.asarray(want), rtol=1e-12, atol=1e-12)
        verdict.bits("cg", got.full_array())
        ours = summary(dmesh.distribute(data, mesh, rows))
        theirs = summary(xs.asarray(data))
        for i, (g, w) in enumerate(zip(ours, theirs)):
            verdict.equal(g.full_array(), np.asarray(w), rtol=1e-12, atol=1e-12)
            verdict.bits(f"summary {i}", g.full_array())
        # Partial operands: the max over mesh dim 0 of (the data at 0, -inf elsewhere).
        rest = [Replicate()] * (mesh.ndim - 1)
        terms = data if mesh.coordinate[0] == 0 else np.full_like(data, -np.inf)
        partial = dmesh.from_local(terms, mesh, [Partial("max"), *rest])
        for i, (g, w) in enumerate(zip(summary(partial), theirs)):
            verdict.equal(g.full_array(), np.asarray(w), rtol=1e-12, atol=1e-12)
            verdict.bits(f"partial max {i}", g.full_array())
