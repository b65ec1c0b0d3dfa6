"""Ufuncs dmesh registers no rule for (scipy.special's, np.isnat) run elementwise; two-output
ufuncs (np.divmod and the divmod() operator, np.frexp, np.modf) reach their decompositions;
np.frompyfunc's object arrays are refused on every rank (issue 14, items 1 and 11)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import UnsupportedError
from dmesh.ops import registry
from helpers import BitVerdict, assert_raises_all

X = np.array([[np.nan, -0.0, 0.0, 2.5], [np.inf, -np.inf, -1.5, 7.0], [3.0, -2.0, 1e-300, 0.5]])


@pytest.fixture
def unregistered_sin(monkeypatch: pytest.MonkeyPatch) -> None:
    """np.sin without its rule: it stands for a ufunc of another library."""
    entries = dict(registry._entries)
    del entries[np.sin]
    monkeypatch.setattr(registry, "_entries", entries)


def _placements(mesh: dmesh.DeviceMesh) -> list[list[object]]:
    rest = [Replicate()] * (mesh.ndim - 1)
    return [[Shard(0), *rest], [Shard(1), *rest], [Partial("sum"), *rest]]


@pytest.mark.usefixtures("unregistered_sin")
def test_a_ufunc_without_a_rule_runs_elementwise(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    assert registry.rule_for(np.sin) is None
    with BitVerdict(comm) as verdict:
        for placements in _placements(mesh):
            whole = np.concatenate([X, X])
            for a, x in ((dmesh.distribute(X, mesh, placements), X),
                         (dmesh.distribute(whole, mesh, placements)[2:], whole[2:])):  # fmt: skip
                got = np.sin(a)
                partial = any(p.is_partial() for p in got.placements)
                verdict.check(not partial, f"{placements}: a partial result {got.placements}")
                full = got.full_array()
                verdict.check(np.array_equal(full, np.sin(x), equal_nan=True), f"{placements}")
                verdict.bits(f"{placements}", full)


def test_two_output_ufuncs(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    finite = np.nan_to_num(X, posinf=9.0, neginf=-9.0)
    with BitVerdict(comm) as verdict:
        for placements in _placements(mesh)[:2]:
            a = dmesh.distribute(finite, mesh, placements)
            for label, got, want in (
                ("np.divmod", np.divmod(a, 0.75), np.divmod(finite, 0.75)),
                ("divmod()", divmod(a, 0.75), divmod(finite, 0.75)),
                ("frexp", np.frexp(a), np.frexp(finite)),
                ("modf", np.modf(a), np.modf(finite)),
            ):
                for i, (g, w) in enumerate(zip(got, want)):
                    full = g.full_array()
                    ok = full.dtype == w.dtype and np.array_equal(full, w, equal_nan=True)
                    verdict.check(ok, f"{label}[{i}] {placements}: {full!r}")
                    verdict.bits(f"{label}[{i}]", full)


def test_object_ufuncs_are_refused(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(X, mesh, _placements(mesh)[0])
    twice = np.frompyfunc(lambda t: 2 * t, 1, 1)
    assert_raises_all(comm, UnsupportedError, twice, a, match="object arrays")
