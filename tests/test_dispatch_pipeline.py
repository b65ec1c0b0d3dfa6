"""The one dispatch pipeline and its cache: cached calls answer as the first call does.

Every case runs twice (the second call is served from the cache) and is
compared with one-process NumPy: reductions called as methods and as
functions, with keywords, on NaN/inf, on uneven and empty blocks, one-element
results turned into arrays and Python values, Partial(max/min) operands.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, _call_keys
from dmesh.collectives.errors import ArgumentError
from dmesh.ops import pipeline
from helpers import assert_all, assert_equal_all, assert_raises_all, same_on_every_rank

WORLD = MPI.COMM_WORLD.Get_size()


def rows(mesh: dmesh.DeviceMesh) -> list[Any]:
    """Row-sharded on the first mesh dim, replicated on any other (conftest's meshes)."""
    return [Shard(0)] + [Replicate()] * (mesh.ndim - 1)


DATA = {
    "plain": np.arange(7.0) - 2.5,
    "nan": np.array([1.0, np.nan, 3.0, 4.0, 5.0]),
    "inf": np.array([1.0, np.inf, -2.0, 3.0, 5.0]),
    "short": np.array([4.0, -1.0]),  # empty blocks from 3 ranks
    "empty": np.zeros(0),
}


@pytest.mark.parametrize("name", list(DATA))
def test_reductions_cached_as_methods_and_functions(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, name: str
) -> None:
    data = DATA[name]
    a = dmesh.distribute(data, mesh, rows(mesh))
    funcs = ["sum", "prod", "mean"] + (["max", "min"] if data.size else [])
    for _ in range(2):  # the second round comes from the cache
        for func in funcs:
            want = getattr(np, func)(data)
            with np.errstate(all="ignore"):
                results = [
                    getattr(a, func)(),
                    getattr(np, func)(a),
                    getattr(a, func)(axis=0),
                    getattr(np, func)(a, keepdims=True),
                ]
            for result in results:
                full = result.full_array()
                assert_equal_all(comm, full.reshape(()), np.asarray(want), rtol=1e-12)
                same_on_every_rank(comm, full)
            value = float(getattr(np, func)(a))
            close = np.isclose(value, want, rtol=1e-12, equal_nan=True)
            assert_all(comm, bool(close), f"{func}: {value} != {want}")
            same_on_every_rank(comm, np.array([value, a.sum().item()]))


@pytest.mark.parametrize("at", [0, 2, 4])
@pytest.mark.parametrize("func", [np.max, np.min, np.maximum.reduce, np.minimum.reduce])
def test_partial_max_of_nan_is_nan(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, func: Any, at: int
) -> None:
    """A NaN in any block wins, as in NumPy (MPI's MAX/MIN would drop it)."""
    data = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    data[at] = np.nan
    a = dmesh.distribute(data, mesh, rows(mesh))
    replicated = [Replicate()] * mesh.ndim
    values = [
        float(func(a)),
        func(a).full_array().item(),
        func(a).redistribute(placements=replicated).local.item(),
    ]
    assert_all(comm, bool(np.isnan(values).all()), f"{func.__name__} of NaN data: {values}")
    same_on_every_rank(comm, np.array(values))
    table = dmesh.distribute(np.vstack([data, data[::-1]]).T.copy(), mesh, rows(mesh))
    got = func(table, axis=0).full_array()
    assert_all(comm, bool(np.isnan(got).all()), f"{func.__name__}(axis=0): {got}")


def test_errors_are_the_same_when_cached(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    empty = dmesh.distribute(np.zeros(0), mesh, rows(mesh))
    a = dmesh.distribute(np.arange(6.0), mesh, rows(mesh))
    for _ in range(2):
        with pytest.raises(ArgumentError, match="zero-size array"):
            empty.max()
        with pytest.raises(ArgumentError, match="out of bounds"):
            a.sum(axis=3)
        with pytest.raises(ArgumentError, match="6 elements"):
            a.item()


def test_keyword_values_are_keys_with_their_types(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    data = np.arange(12.0).reshape(3, 4)
    a = dmesh.distribute(data, mesh, rows(mesh))
    by_axis = np.sum(a, axis=1)
    keep = np.sum(a, axis=1, keepdims=True)
    assert_equal_all(comm, by_axis.full_array(), data.sum(axis=1))
    assert_equal_all(comm, keep.full_array(), data.sum(axis=1, keepdims=True))
    assert_all(comm, (np.sum, a.spec, ("axis", 1, int)) in pipeline.steps, "axis=1 not kept")
    assert_all(comm, _call_keys.call_key(np.sum, [a], {"axis": True})[-1] == ("axis", True, bool))
    assert_all(comm, _call_keys.call_key(np.sum, [a], {"axis": np.int64(1)}) is None)
    assert_all(comm, _call_keys.call_key(np.sum, [a], {"axis": (0, True)}) is None)


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_one_element_partials_become_values(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, op: str
) -> None:
    # Each rank's term differs; the full array and the value are the reduction.
    rank = comm.Get_rank()
    terms = [np.array([float(r) * (-1) ** r]) for r in range(WORLD)]
    want = {"sum": np.sum, "max": np.max, "min": np.min}[op](terms)
    spec_source = dmesh.from_local(terms[rank], mesh, [Partial(op)] * mesh.ndim)
    for _ in range(2):
        full = spec_source.full_array()
        assert_equal_all(comm, full, np.array([want]))
        assert_all(comm, spec_source.item() == want, str(spec_source.item()))
        same_on_every_rank(comm, full)


def test_replicated_one_element_is_its_block(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    one = dmesh.distribute(np.array([3.5]), mesh, [Replicate()] * mesh.ndim)
    for _ in range(2):
        assert_equal_all(comm, one.full_array(), np.array([3.5]))


@pytest.mark.parametrize(
    ("left", "right"), list(itertools.product([Shard(0), Replicate()], repeat=2))
)
def test_cached_elementwise_with_scalars_and_moves(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, left: Any, right: Any
) -> None:
    x, y = np.arange(5.0), np.arange(5.0)[::-1].copy()
    a = dmesh.distribute(x, mesh, [left] + [Replicate()] * (mesh.ndim - 1))
    b = dmesh.distribute(y, mesh, [right] + [Replicate()] * (mesh.ndim - 1))
    for _ in range(2):
        assert_equal_all(comm, (a + b).full_array(), x + y)
        assert_equal_all(comm, (2 * a - b / 4.0).full_array(), 2 * x - y / 4.0)
        assert_equal_all(comm, np.maximum(a, b).full_array(), np.maximum(x, y))


@pytest.mark.parametrize("name", ["plain", "nan", "inf", "int"])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
def test_one_term_partial_converts_without_messages(
    comm: MPI.Intracomm, name: str, op: str
) -> None:
    """A Partial over mesh dims of size 1 holds one term: the block is the value, on every rank.

    On a (1, WORLD) mesh, a row-sharded sum is Partial on the size-1 dim only:
    its scalar conversions take the local route (no collective is made), and
    every rank still gets NumPy's value, bit for bit.
    """
    data = np.array([[7, -3, 0, 2]], np.int64) if name == "int" else DATA[name][None, :4]
    with dmesh.init_mesh((1, WORLD), comm=comm) as mesh2:
        a = dmesh.distribute(data, mesh2, [Shard(0), Replicate()])
        s = a.sum()
        assert_all(comm, s.placements == (Partial("sum"), Replicate()), f"{s.placements}")
        with dmesh.debug.CommMode() as recorded:
            values = [float(s), s.item(), s.full_array().item(), float(np.sum(a))]
        assert_all(comm, recorded.counts() == {}, f"collectives made: {recorded.counts()}")
        want = float(np.sum(data))
        ok = all(v == want or (np.isnan(v) and np.isnan(want)) for v in values)
        assert_all(comm, ok, f"{values} != {want}")
        same_on_every_rank(comm, np.array(values))
        # Any reduce op: a one-element, one-term Partial built from the local blocks
        # (an integer average is refused: see test_integer_average_is_refused).
        one = data[:, 1:2] if not (op == "avg" and name == "int") else data[:, 1:2] * 1.0
        term = dmesh.from_local(one, mesh2, [Partial(op), Replicate()], shape=one.shape)
        with dmesh.debug.CommMode() as recorded:
            got, value = term.full_array(), term.item()
        assert_all(comm, recorded.counts() == {}, f"collectives made: {recorded.counts()}")
        assert_equal_all(comm, got, one)
        same_on_every_rank(comm, np.array([value]))


def test_integer_average_is_refused(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A Partial("avg") of integers has no integer value: every rank refuses to make one."""
    partial = [Partial("avg")] + [Replicate()] * (mesh.ndim - 1)
    for dtype in (np.int64, np.int8, np.uint8, np.bool_):
        data = np.full(3, np.iinfo(np.int64).max if dtype is np.int64 else 1, dtype)
        assert_raises_all(comm, ArgumentError, dmesh.distribute, data, mesh, partial, match="avg")
    a = dmesh.distribute(np.arange(4.0), mesh, partial)  # floats keep it
    assert_equal_all(comm, a.full_array(), np.arange(4.0))
