"""dmesh.array_api's manipulation, utility and indexing functions (issue 15) against
array_api_strict on one process: values, dtype, shape; the same bits on every rank;
even, uneven and empty blocks; errors on every rank."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import array_api_strict as xs
import numpy as np
import pytest
from mpi4py import MPI

import dmesh
import dmesh.array_api as xp
from dmesh import Shard
from dmesh.collectives.errors import UnsupportedError
from helpers import BitVerdict, assert_raises_all

xs.set_array_api_strict_flags(api_version="2024.12")

A = np.array([[3.0, -0.0, np.nan, 2.0], [1.0, np.inf, 0.0, -np.inf], [5.0, 2.0, 2.0, -1.0]])


def layouts(mesh: dmesh.DeviceMesh, a: np.ndarray) -> Iterator[tuple[str, Any]]:
    """``a`` sharded evenly-ish, unevenly (one extra leading row dropped), and in 1 row."""
    shard = [Shard(0)] * mesh.ndim
    yield "even", dmesh.distribute(a, mesh, shard)
    yield "uneven", dmesh.distribute(np.concatenate([a[:1], a]), mesh, shard)[1:]


def local(v: Any) -> np.ndarray:
    """The whole array of a DArray (collective), or a NumPy view of a strict array."""
    if isinstance(v, dmesh.DArray):
        return np.asarray(v.full_array())
    return np.asarray(v)


def check(v: BitVerdict, label: str, got: Any, want: Any) -> None:
    """Results (arrays, tuples or lists) equal, zero signs too; the same bits on every rank."""
    if isinstance(want, (tuple, list)):
        v.check(type(got) is type(want) and len(got) == len(want), f"{label}: {got!r}")
        for i, (g, w) in enumerate(zip(got, want, strict=False)):
            check(v, f"{label}[{i}]", g, w)
        return
    v.check(isinstance(got, dmesh.DArray), f"{label}: not a DArray: {type(got).__name__}")
    g, w = local(got), local(want)
    v.equal(g, w)
    if g.shape == w.shape and g.dtype.kind == "f" == w.dtype.kind:
        v.check(np.array_equal(np.signbit(g), np.signbit(w)), f"{label}: zero signs {g} {w}")
    v.bits(label, g)


def compare(
    comm: MPI.Intracomm,
    mesh: dmesh.DeviceMesh,
    cases: list[tuple[str, Callable[[Any], Any], np.ndarray]],
) -> None:
    """Each case's function on each layout of its array against array_api_strict."""
    with BitVerdict(comm) as v:
        for label, fn, a in cases:
            want = fn(xs.asarray(a))
            for name, x in layouts(mesh, a):
                check(v, f"{label} ({name})", fn(x), want)


def test_shape_functions(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    i8 = np.array([[-128, 127, 0], [1, -1, 5]], dtype=np.int8)
    cases: list[tuple[str, Callable[[Any], Any], np.ndarray]] = [
        ("flip", lambda x: x.__array_namespace__().flip(x, axis=0), A),
        ("flip all", lambda x: x.__array_namespace__().flip(x), A),
        ("roll", lambda x: x.__array_namespace__().roll(x, 1), A),
        ("roll axes", lambda x: x.__array_namespace__().roll(x, (1, -1), axis=(0, 1)), A),
        ("moveaxis", lambda x: x.__array_namespace__().moveaxis(x, 0, -1), A),
        ("permute_dims", lambda x: x.__array_namespace__().permute_dims(x, (1, 0)), A),
        ("reshape", lambda x: x.__array_namespace__().reshape(x, (2, 6)), A),
        ("reshape copy", lambda x: x.__array_namespace__().reshape(x, (-1,), copy=True), A),
        ("expand_dims", lambda x: x.__array_namespace__().expand_dims(x, axis=-1), A),
        ("squeeze", lambda x: x.__array_namespace__().squeeze(x[:1, ...], axis=0), A),
        ("tile", lambda x: x.__array_namespace__().tile(x, (2, 1)), i8),
        ("repeat", lambda x: x.__array_namespace__().repeat(x, 2, axis=0), i8),
        ("repeat flat", lambda x: x.__array_namespace__().repeat(x, 3), i8),
        ("broadcast_to", lambda x: x.__array_namespace__().broadcast_to(x[:1, ...], (3, 3)), i8),
        ("unstack", lambda x: x.__array_namespace__().unstack(x, axis=1), A),
        ("unstack rows", lambda x: x.__array_namespace__().unstack(x), i8),
        ("concat", lambda x: x.__array_namespace__().concat([x, x[:1, ...]]), A),
        ("concat 1", lambda x: x.__array_namespace__().concat((x, x), axis=1), A),
        ("concat None", lambda x: x.__array_namespace__().concat([x, x], axis=None), i8),
        ("stack", lambda x: x.__array_namespace__().stack([x, x], axis=1), A),
        ("broadcast_arrays", lambda x: x.__array_namespace__().broadcast_arrays(x, x[:1, ...]), A),
        ("empty flip", lambda x: x.__array_namespace__().flip(x[:0, ...], axis=0), A),
        ("1 row", lambda x: x.__array_namespace__().roll(x[1:2, ...], 1, axis=1), A),
    ]
    compare(comm, mesh, cases)


def test_utility_and_indexing(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    b = np.array([[True, False, True], [True, True, True]])
    i64 = np.array([[np.iinfo(np.int64).max, 0, -1], [np.iinfo(np.int64).min, 7, 7]])
    cases: list[tuple[str, Callable[[Any], Any], np.ndarray]] = [
        ("all", lambda x: x.__array_namespace__().all(x, axis=1), b),
        ("any", lambda x: x.__array_namespace__().any(x, axis=(0, 1), keepdims=True), b),
        ("all nan", lambda x: x.__array_namespace__().all(x), A),
        ("any empty", lambda x: x.__array_namespace__().any(x[:0, ...]), A),
        ("diff", lambda x: x.__array_namespace__().diff(x, axis=0), A),
        ("diff n", lambda x: x.__array_namespace__().diff(x, n=2), i64),
        ("diff pre", lambda x: x.__array_namespace__().diff(x, axis=0, prepend=x[:1, ...]), A),
        ("diff app", lambda x: x.__array_namespace__().diff(x, append=x[:, :2]), i64),
        ("take", lambda x: x.__array_namespace__().take(x, _idx(x, [2, 0, 2]), axis=0), A),
        ("take 1", lambda x: x.__array_namespace__().take(x, _idx(x, [3, 0]), axis=1), A),
        ("take 1-D", lambda x: x.__array_namespace__().take(x[0, :], _idx(x, [1, 1, 0])), i64),
        (
            "take_along_axis",
            lambda x: x.__array_namespace__().take_along_axis(
                x, x.__array_namespace__().argsort(x, axis=1), axis=1
            ),
            i64,
        ),
    ]
    compare(comm, mesh, cases)


def _idx(x: Any, values: list[int]) -> Any:
    """Indices in the namespace of ``x`` (a DArray on x's mesh, or a strict array)."""
    if isinstance(x, dmesh.DArray):
        return dmesh.distribute(np.array(values), x.mesh, [Shard(0)] * x.mesh.ndim)
    return xs.asarray(values)


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(A, mesh, [Shard(0)] * mesh.ndim)
    assert_raises_all(comm, TypeError, xp.flip, A, match="flip: expected a DArray")
    assert_raises_all(comm, TypeError, xp.concat, [x, A], match="xp.asarray")
    assert_raises_all(comm, TypeError, xp.stack, x, match="tuple or list")
    assert_raises_all(comm, ValueError, xp.squeeze, x, axis=0)
    assert_raises_all(comm, NotImplementedError, xp.reshape, x, (12,), copy=False)
    assert_raises_all(comm, UnsupportedError, xp.repeat, x, _idx(x, [1, 2, 0]), axis=0)
    assert_raises_all(comm, ValueError, xp.take, x, _idx(x, [0]), match="axis is required")
    assert_raises_all(comm, TypeError, xp.take, x, x, axis=0, match="integer")
    assert_raises_all(comm, ValueError, xp.diff, x, n=-1)
    assert_raises_all(comm, ValueError, xp.diff, x[0, 0])


@pytest.mark.parametrize("n", [1, 2])
def test_diff_of_small_arrays(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, n: int) -> None:
    a = np.array([1.0, -0.0, np.nan])[:n]
    compare(comm, mesh, [("diff short", lambda x: x.__array_namespace__().diff(x), a)])
