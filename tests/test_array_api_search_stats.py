"""dmesh.array_api's statistical, searching, sorting and set functions (issue 15)
against array_api_strict on one process: values, dtype, shape; the same bits on
every rank; even and uneven blocks; NaN, inf, -0.0, integer extremes; errors on
every rank."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import array_api_strict as xs
import numpy as np
from mpi4py import MPI
from test_array_api_manipulation import A, check, layouts, local

import dmesh
import dmesh.array_api as xp
from dmesh import Shard
from helpers import BitVerdict, assert_raises_all

xs.set_array_api_strict_flags(api_version="2024.12")

I8 = np.array([[-128, 127, 0, 3], [1, -1, 5, 127], [3, 3, -128, 0]], dtype=np.int8)
TIES = np.array([[2.0, 1.0, 2.0, np.nan], [-0.0, 0.0, -0.0, 1.0], [1.0, 1.0, np.nan, 1.0]])
Case = tuple[str, Callable[[Any], Any], np.ndarray]


def ns(x: Any) -> Any:
    """The namespace of ``x``."""
    return x.__array_namespace__()


def compare(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, cases: list[Case], rtol: float) -> None:
    """Each case on each layout against array_api_strict (``rtol`` for floating reductions)."""
    with BitVerdict(comm) as v:
        for label, fn, a in cases:
            want = fn(xs.asarray(a))
            for name, x in layouts(mesh, a):
                got = fn(x)
                if rtol:
                    g = local(got)
                    v.equal(g, local(want), rtol=rtol)
                    v.bits(label, g)
                else:
                    check(v, f"{label} ({name})", got, want)


def test_statistics(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    f = np.array([[1.5, -2.0, 3.25], [0.5, 4.0, -1.0], [2.0, 2.0, 8.0]], dtype=np.float32)
    exact: list[Case] = [
        ("max", lambda x: ns(x).max(x, axis=0), A),
        ("min keepdims", lambda x: ns(x).min(x, axis=1, keepdims=True), A),
        ("max i8", lambda x: ns(x).max(x), I8),
        ("min i8", lambda x: ns(x).min(x, axis=(0, 1)), I8),
        ("sum i8", lambda x: ns(x).sum(x, axis=0), I8),
        ("sum u8", lambda x: ns(x).sum(x), I8.astype(np.uint8)),
        ("sum dtype", lambda x: ns(x).sum(x, axis=1, dtype=ns(x).int8), I8),
        ("prod i8", lambda x: ns(x).prod(x, axis=1, keepdims=True), I8),
        ("sum f32", lambda x: ns(x).sum(x, axis=0), f),
        ("sum inf", lambda x: ns(x).sum(x, axis=1), A),
        ("cumsum", lambda x: ns(x).cumulative_sum(x, axis=0), I8),
        ("cumsum init", lambda x: ns(x).cumulative_sum(x, axis=0, include_initial=True), f),
        ("cumsum 1-D", lambda x: ns(x).cumulative_sum(x[:, 0], include_initial=True), I8),
        ("cumprod", lambda x: ns(x).cumulative_prod(x, axis=1, include_initial=True), f),
        ("cumprod dtype", lambda x: ns(x).cumulative_prod(x, axis=0, dtype=ns(x).float64), f),
    ]
    compare(comm, mesh, exact, 0.0)
    close: list[Case] = [
        ("mean", lambda x: ns(x).mean(x, axis=0), f),
        ("mean all", lambda x: ns(x).mean(x, keepdims=True), A),
        ("std", lambda x: ns(x).std(x, axis=0, correction=1), f),
        ("var", lambda x: ns(x).var(x, correction=0.5), f),
        ("var nan", lambda x: ns(x).var(x, axis=1), A),
    ]
    compare(comm, mesh, close, 1e-6)


def test_searching(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    srt = np.array([-np.inf, -1.0, 0.0, 0.0, 2.0, 2.0, np.inf])
    cases: list[Case] = [
        ("argmax", lambda x: ns(x).argmax(x, axis=0), I8),
        ("argmin keepdims", lambda x: ns(x).argmin(x, axis=1, keepdims=True), I8),
        ("argmax flat", lambda x: ns(x).argmax(x), A),
        ("argmin nan", lambda x: ns(x).argmin(x, axis=1), A),
        ("count_nonzero", lambda x: ns(x).count_nonzero(x), A),
        ("count_nonzero axis", lambda x: ns(x).count_nonzero(x, axis=0, keepdims=True), I8),
        ("nonzero", lambda x: ns(x).nonzero(x), A),
        ("nonzero 1-D", lambda x: ns(x).nonzero(x[:, 2]), I8),
        ("where", lambda x: ns(x).where(x > 0, x, -x), A),
        ("where scalar", lambda x: ns(x).where(x > 0, x, 0.5), A),
        ("where scalar 1", lambda x: ns(x).where(x > 0, 7, x), I8),
        ("searchsorted", lambda x: ns(x).searchsorted(x, x), srt),
        ("searchsorted right", lambda x: ns(x).searchsorted(x, x[1:4], side="right"), srt),
        (
            "searchsorted sorter",
            lambda x: ns(x).searchsorted(
                ns(x).flip(x), x, sorter=ns(x).flip(ns(x).argsort(x)), side="left"
            ),
            srt,
        ),
    ]
    compare(comm, mesh, cases, 0.0)


def test_sorting_and_sets(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    cases: list[Case] = [
        ("sort", lambda x: ns(x).sort(x), TIES),
        ("sort 0", lambda x: ns(x).sort(x, axis=0), A),
        ("sort i8", lambda x: ns(x).sort(x, axis=0, descending=True), I8),
        ("argsort", lambda x: ns(x).argsort(x), TIES),
        ("argsort 0", lambda x: ns(x).argsort(x, axis=0, stable=False), TIES),
        ("argsort desc", lambda x: ns(x).argsort(x, descending=True), TIES),
        ("argsort desc 0", lambda x: ns(x).argsort(x, axis=0, descending=True), TIES),
        ("argsort desc i8", lambda x: ns(x).argsort(x, axis=-2, descending=True), I8),
        ("unique_values", lambda x: ns(x).unique_values(x), I8),
        ("unique_counts", lambda x: tuple(ns(x).unique_counts(x)), I8),
        ("unique_inverse", lambda x: tuple(ns(x).unique_inverse(x)), I8),
        ("unique_all", lambda x: tuple(ns(x).unique_all(x)), I8),
        (
            "unique_counts nan",
            lambda x: tuple(ns(x).unique_counts(x)),
            A + 0.0,
        ),  # which zero: unspecified
    ]
    compare(comm, mesh, cases, 0.0)
    # Descending sorts are stable: the values taken in argsort's order, zero signs included.
    with BitVerdict(comm) as v:
        for name, x in layouts(mesh, TIES):
            want = np.take_along_axis(
                TIES, np.asarray(xs.argsort(xs.asarray(TIES), descending=True)), axis=-1
            )
            check(v, f"sort desc ({name})", xp.sort(x, descending=True), xs.asarray(want))
            r = xp.unique_all(x)
            v.check(r._fields == ("values", "indices", "inverse_indices", "counts"), name)
            v.check(xp.unique_inverse(x).inverse_indices.shape == TIES.shape, name)


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(A, mesh, [Shard(0)] * mesh.ndim)
    i = dmesh.distribute(I8, mesh, [Shard(0)] * mesh.ndim)
    assert_raises_all(comm, TypeError, xp.sum, A, match="sum: expected a DArray")
    assert_raises_all(comm, TypeError, xp.where, x > 0, 1.0, 2.0, match="both")
    assert_raises_all(comm, TypeError, xp.where, i > 0, i, 0.5, match="float")
    assert_raises_all(comm, TypeError, xp.where, x, x, x, match="boolean")
    assert_raises_all(comm, TypeError, xp.sort, x > 0, match="real numeric")
    assert_raises_all(comm, ValueError, xp.argsort, x, axis=2, match="out of bounds")
    assert_raises_all(comm, ValueError, xp.nonzero, x[0, 0])
    assert_raises_all(comm, ValueError, xp.searchsorted, x, x, match="1-D")
    assert_raises_all(comm, ValueError, xp.cumulative_sum, x)
    assert_raises_all(comm, TypeError, xp.std, x, correction="1")
