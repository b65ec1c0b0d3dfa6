"""``np.median``/``percentile``/``quantile`` and their nan forms on DArrays (issue 14, item 7).

NumPy's values, dtypes and shapes at 1-4 ranks, the same bits on every rank,
along sharded axes (distributed selection, run with tiny ``SAMPLES``/``SMALL``
so that small arrays take many rounds, duplicates included) and unsharded
ones (local), on balanced, uneven and empty blocks, with NaN, +-inf, -0.0 and
integer extremes; errors raised on every rank.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard, debug
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.ops.kernels import selection
from helpers import BitVerdict, assert_raises_all

R = Replicate()
I64 = np.iinfo(np.int64)


@pytest.fixture(params=["tiny", "default"])
def rounds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Tiny sample and finish sizes make the selection take many rounds on small data."""
    if request.param == "tiny":
        monkeypatch.setattr(selection, "SAMPLES", 3)
        monkeypatch.setattr(selection, "SMALL", 2)
    return str(request.param)


def _compare(verdict: BitVerdict, func: Callable[..., Any], a: Any, x: np.ndarray,
             *args: Any, **kwargs: Any) -> None:  # fmt: skip
    where = f"{func.__name__}({x.dtype}{list(x.shape)}, {args}, {kwargs}) on {a.placements}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.asarray(func(x, *args, **kwargs))
        got = func(a, *args, **kwargs).full_array()
    verdict.bits(where, got)
    ok = got.dtype == want.dtype and got.shape == want.shape
    verdict.check(ok and np.array_equal(got, want, equal_nan=True), f"{where}: {got!r} != {want!r}")


CALLS: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
    (np.median, (), {}),
    (np.nanmedian, (), {}),
    (np.percentile, ([1, 50, 99],), {}),
    (np.quantile, (0.3,), {}),
    (np.quantile, (np.array(0.3),), {}),
    (np.quantile, ([0, 0.25, 1],), {"method": "lower"}),
    (np.quantile, ([0.1, 0.5, 0.75],), {"method": "higher"}),
    (np.percentile, ([10, 50, 95],), {"method": "nearest"}),
    (np.quantile, ([0.1, 0.5],), {"method": "midpoint"}),
    (np.nanpercentile, ([5, 50, 100],), {}),
    (np.nanquantile, (0.75,), {}),
]


def _vectors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    floats = rng.standard_normal(61)
    hostile = floats.copy()
    hostile[[3, 17, 40]] = [np.inf, -np.inf, -0.0]
    hostile[20:26] = 0.0  # ties
    with_nan = hostile.copy()
    with_nan[[5, 44]] = np.nan
    ints = rng.integers(-9, 9, 60)
    ints[[0, 9]] = I64.min, I64.max
    return {
        "floats": floats,
        "hostile": hostile,
        "with nan": with_nan,
        "all nan": np.full(9, np.nan),
        "ints": ints,
        "float32": hostile.astype(np.float32),
        "one": np.array([2.5]),
    }


def test_vectors_along_the_sharded_axis(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, rounds: str
) -> None:
    rest = [R] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        for x in _vectors().values():
            whole = dmesh.distribute(np.concatenate([x, x[:7]]), mesh, [Shard(0), *rest])
            for a in (dmesh.distribute(x, mesh, [Shard(0), *rest]), whole[: x.size]):
                for func, args, kwargs in CALLS:
                    _compare(verdict, func, a, x, *args, **kwargs)


def test_matrices_every_axis(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, rounds: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-4, 4, (7, 10)).astype(np.float64)
    x[2, 3] = np.nan
    x[:, 6] = np.nan  # an all-NaN column
    x[5, 1] = -0.0
    layouts = [[Shard(0)], [Shard(1)], [R]]
    if mesh.ndim == 2:
        layouts = [[Shard(0), Shard(1)], [Shard(1), Shard(0)], [Shard(0), Shard(0)], [R, Shard(1)]]
    with BitVerdict(comm) as verdict:
        for placements in layouts:
            whole = dmesh.distribute(x, mesh, placements)
            for a, y in ((whole, x), (whole[1:, 7:], x[1:, 7:])):  # empty blocks in both dims
                _matrix_calls(verdict, a, y)


def _matrix_calls(verdict: BitVerdict, a: Any, x: np.ndarray) -> None:
    for axis in (None, 0, 1, -1, (0, 1)):
        for keepdims in (False, True):
            for func, args, kwargs in CALLS[:6] + CALLS[9:]:
                _compare(verdict, func, a, x, *args, axis=axis, keepdims=keepdims, **kwargs)


def test_many_slices_move_the_sharding(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Over 64 slices and a kept dim long enough: one redistribution, then local work."""
    x = np.random.default_rng(5).standard_normal((9, 80))
    a = dmesh.distribute(x, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    with BitVerdict(comm) as verdict:
        with debug.CommMode() as mode:
            _compare(verdict, np.median, a, x, axis=0)
        if comm.Get_size() > 1:
            verdict.check("all_reduce" not in mode.counts(), f"selected: {mode.counts()}")
        _compare(verdict, np.percentile, a, x, [25, 75], axis=0, keepdims=True)
        if mesh.ndim == 2:  # the kept dim already cut by the other mesh dim: cut it twice
            b = dmesh.distribute(x, mesh, [Shard(0), Shard(1)])
            _compare(verdict, np.nanmedian, b, x, axis=0)
        cube = np.random.default_rng(6).integers(0, 9, (5, 3, 40)).astype(float)
        c = dmesh.distribute(cube, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
        _compare(verdict, np.quantile, c, cube, [0.5, 0.9], axis=0)
        _compare(verdict, np.median, c, cube, axis=(0, 1), keepdims=True)


def test_local_axis_communicates_nothing(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.random.default_rng(2).standard_normal((6, 9))
    a = dmesh.distribute(x, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))[1:]
    with BitVerdict(comm) as verdict:
        with debug.CommMode() as mode:
            got = np.median(a, axis=1)
            other = np.nanquantile(a, [0.2, 0.9], axis=1)
        verdict.check(mode.counts() == {}, f"communicated: {mode.counts()}")
        verdict.check(got.placements[0] == Shard(0), f"{got.placements}")
        verdict.equal(got.full_array(), np.median(x[1:], axis=1))
        verdict.equal(other.full_array(), np.nanquantile(x[1:], [0.2, 0.9], axis=1))


def test_more_ranks_than_values(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.array([3.0, -1.0])
    a = dmesh.distribute(x, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    with BitVerdict(comm) as verdict:
        for func, args, kwargs in CALLS:
            _compare(verdict, func, a, x, *args, **kwargs)
        empty = dmesh.distribute(np.zeros((0, 3)), mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
        _compare(verdict, np.median, empty, np.zeros((0, 3)), axis=0)


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(np.arange(10.0), mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    c = dmesh.distribute(np.arange(4.0) + 1j, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    assert_raises_all(comm, ArgumentError, np.percentile, a, 101, match="range")
    assert_raises_all(comm, ArgumentError, np.quantile, a, [-0.1], match="range")
    assert_raises_all(comm, ArgumentError, np.quantile, a, [[0.5]], match="1d")
    assert_raises_all(comm, ArgumentError, np.median, a, axis=1, match="out of bounds")
    assert_raises_all(comm, ArgumentTypeError, np.median, c, match="real")
    assert_raises_all(comm, ArgumentError, np.quantile, a, 0.5, method="nope", match="valid")
    assert_raises_all(comm, UnsupportedError, np.quantile, a, 0.5, method="hazen",
                      match="linear")  # fmt: skip
    assert_raises_all(comm, UnsupportedError, np.quantile, a, 0.5, weights=np.ones(10),
                      match="weights")  # fmt: skip
    assert_raises_all(comm, UnsupportedError, np.median, a, out=np.zeros(()), match="out")


def test_selection_kernel_on_duplicates(comm: MPI.Intracomm, rounds: str) -> None:
    """The kernel itself: any ranks of data with many ties, spread unevenly over the ranks."""
    rng = np.random.default_rng(12)
    size, rank = comm.Get_size(), comm.Get_rank()
    with BitVerdict(comm) as verdict:
        ties = rng.integers(0, 3, 57).astype(float)
        for data in (np.full(40, 2.0), ties, rng.standard_normal(70), rng.integers(-5, 5, 33)):
            cuts = np.sort(rng.integers(0, data.size + 1, size - 1))
            piece = np.split(data, cuts)[rank]
            ordered = np.sort(data)
            lows = [0, data.size // 2, data.size - 2, data.size - 1, 5]
            highs = [1, data.size // 2, data.size - 1, data.size - 1, 6]
            got = selection.select([piece] * len(lows), lows, highs, comm)
            want = np.stack([ordered[lows], ordered[highs]], axis=1)
            verdict.bits(f"select {data[:4]}", got)
            verdict.check(np.array_equal(got, want), f"{got} != {want}")
