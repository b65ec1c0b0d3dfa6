"""Unmodified NumPy functions run on DArrays and give the same answers as on ndarrays."""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from helpers import assert_all


def power_iteration(m: Any, v: Any, steps: int = 60) -> tuple[Any, float]:
    """Top eigenvector and eigenvalue of a symmetric matrix: NumPy code, nothing dmesh."""
    for _ in range(steps):
        w = m @ v
        v = w / np.linalg.norm(w)
    return v, float(v @ (m @ v))


def standardize_and_score(x: Any, w: Any) -> tuple[float, Any]:
    """Standardize the columns, score them against weights, report the spread."""
    z = (x - np.mean(x, axis=0)) / np.std(x, axis=0, ddof=1)
    scores = z @ w
    return float(np.var(scores)), np.max(np.abs(z), axis=0)


def test_power_iteration(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = np.random.default_rng(3).standard_normal((9, 6))
    s = a.T @ a
    v0 = np.ones(6)
    expected_v, expected_value = power_iteration(s, v0)
    rows = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    v, value = power_iteration(
        dmesh.distribute(s, mesh, rows), dmesh.distribute(v0, mesh, [Replicate()] * mesh.ndim)
    )
    ok = abs(value - expected_value) <= 1e-10 * abs(expected_value)
    assert_all(comm, ok and np.allclose(v.full_array(), expected_v, rtol=1e-10, atol=1e-12))


def test_standardize_pipeline(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.random.default_rng(4).standard_normal((11, 4)) * [1.0, 3.0, 0.5, 2.0] + 7.0
    w = np.array([0.5, -1.0, 2.0, 0.25])
    expected_var, expected_max = standardize_and_score(x, w)
    for placements in ([Shard(0)], [Shard(1)], [Replicate()]):
        placements = placements + [Replicate()] * (mesh.ndim - 1)
        got_var, got_max = standardize_and_score(
            dmesh.distribute(x, mesh, placements),
            dmesh.distribute(w, mesh, [Replicate()] * mesh.ndim),
        )
        ok = np.isclose(got_var, expected_var, rtol=1e-12)
        ok = ok and np.allclose(got_max.full_array(), expected_max, rtol=1e-12)
        assert_all(comm, bool(ok), f"{placements}: {got_var} != {expected_var}")
