"""``np.unique`` of DArrays with ``return_index``, ``return_inverse``, ``return_counts``
and ``equal_nan``: NumPy's exact results, for even, uneven and empty blocks, runs of
equal values that span several ranks, NaNs, ints, bools, 2-D inputs and subset meshes.

Every rank makes the same sequence of collective assertions; each case gathers
its results and agrees on one verdict.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import assert_all, assert_raises_all

WORLD = MPI.COMM_WORLD.Get_size()
ALL = {"return_index": True, "return_inverse": True, "return_counts": True}
_RNG = np.random.default_rng(5)
_NANS = np.where(_RNG.random(23) < 0.3, np.nan, _RNG.integers(0, 4, 23).astype(np.float64))

# name -> 1-D array; sharded over the mesh, these give runs across block edges.
ARRAYS = {
    "ints": _RNG.integers(-3, 4, 29),
    "all_equal": np.full(13, 7, dtype=np.int64),  # one run over every rank
    "long_runs": np.repeat(np.array([2, 0, 1], dtype=np.int32), [9, 1, 6]),
    "nans": _NANS,
    "all_nan": np.full(6, np.nan),
    "floats_distinct": _RNG.permutation(17).astype(np.float64) / 4,
    "bools": _RNG.random(11) < 0.4,
    "three": np.array([5, 1, 5]),  # fewer elements than ranks: empty blocks
    "one": np.array([4.5]),
    "empty": np.array([], dtype=np.float64),
}


def _as_tuple(result: Any) -> tuple[Any, ...]:
    return result if isinstance(result, tuple) else (result,)


def _mismatch(got: Any, expected: Any) -> str:
    """'' when the DArray results equal NumPy's (shape, dtype, values, NaNs), else why not.

    Collective: gathers every result (``full_array``); on a non-member the
    gathered arrays are empty and only the number of results is checked.
    """
    got_t, expected_t = _as_tuple(got), _as_tuple(expected)
    if isinstance(got, tuple) != isinstance(expected, tuple) or len(got_t) != len(expected_t):
        return f"returned {type(got).__name__} of {len(got_t)}, NumPy {len(expected_t)}"
    fulls = [np.asarray(g.full_array()) for g in got_t]
    if not got_t[0].mesh.is_member:
        return ""
    for i, (full, want) in enumerate(zip(fulls, expected_t)):
        nan = full.dtype.kind in "fc"
        if full.shape != want.shape or full.dtype != want.dtype:
            return f"result {i}: {full.dtype}{full.shape} != {want.dtype}{want.shape}"
        if not np.array_equal(full, want, equal_nan=nan):
            return f"result {i}: {full} != {want}"
    return ""


def _check(comm: MPI.Intracomm, x: Any, expected_input: np.ndarray, label: str,
           **kwargs: Any) -> Any:  # fmt: skip
    """One ``np.unique`` call on ``x`` against NumPy's on ``expected_input``; one verdict.

    Returns what the call returned.
    """
    got = np.unique(x, **kwargs)
    problem = _mismatch(got, np.unique(expected_input, **kwargs))
    assert_all(comm, not problem, f"{label} {kwargs}: {problem}")
    return got


def _flag_sets() -> list[dict[str, bool]]:
    return [{}, {"return_counts": True}, {"return_index": True, "return_inverse": True}, ALL]


@pytest.mark.parametrize("name", list(ARRAYS))
def test_unique_sharded_and_replicated(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, name: str
) -> None:
    a = ARRAYS[name]
    placements = [[Shard(0)] * mesh.ndim, [Replicate()] * mesh.ndim]
    if mesh.ndim == 2:
        placements.append([Replicate(), Shard(0)])  # a replicated mesh dim sorts on its own
    for p in placements:
        x = dmesh.distribute(a, mesh, p)
        for flags in _flag_sets():
            _check(comm, x, a, f"{name} {p}", **flags)
        if a.dtype.kind == "f":
            _check(comm, x, a, f"{name} {p}", equal_nan=False, **ALL)


def test_results_are_distributed(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Values, indices and counts stay sharded; the inverse has the input's layout."""
    a = ARRAYS["floats_distinct"]
    x = dmesh.distribute(a, mesh, [Shard(0)] * mesh.ndim)
    values, index, inverse, counts = np.unique(x, **ALL)
    sharded = all(r.placements == (Shard(0),) * mesh.ndim for r in (values, index, counts))
    local, most = values.to_local().shape[0], -(-a.size // int(np.prod(mesh.shape)))
    assert_all(comm, sharded and local <= most, f"{values!r} holds {local} of {a.size}")
    assert_all(comm, inverse.spec.layout == x.spec.layout, f"{inverse!r} vs {x!r}")


def _uneven_blocks(a: np.ndarray, sizes: list[int], rank: int) -> np.ndarray:
    start = sum(sizes[:rank])
    return a[start : start + sizes[rank]]


def test_uneven_and_empty_blocks(comm: MPI.Intracomm) -> None:
    """Blocks of any size, empty ones between full ones, runs crossing empty blocks."""
    a = np.array([3, 3, 1, 3, 3, 3, 2, 2, 2, 2, 3, 1, 1], dtype=np.int64)
    cases = [[a.size] + [0] * (WORLD - 1), [0] * (WORLD - 1) + [a.size]]
    if WORLD > 1:
        cases.append([1 if r % 2 else 0 for r in range(WORLD - 1)] + [0])
        cases[-1][-1] = a.size - sum(cases[-1])
        cases.append([4] + [0] * (WORLD - 2) + [a.size - 4])
    with dmesh.init_mesh(comm=comm) as mesh:
        for sizes in cases:
            x = dmesh.from_local(_uneven_blocks(a, sizes, comm.Get_rank()), mesh, [Shard(0)])
            _check(comm, x, a, f"blocks {sizes}", **ALL)
            inverse = np.unique(x, return_inverse=True)[1]
            assert_all(comm, inverse.spec.layout == x.spec.layout, f"{inverse!r} vs {x!r}")


def test_two_dimensional(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Flattened as NumPy does with axis=None; the inverse has the input's shape and layout."""
    m = np.array([[2.0, np.nan, 1.0, 2.0], [1.0, 1.0, np.nan, 0.0], [2.0, 2.0, 2.0, 2.0]])
    layouts: list[list[Any]] = [[Shard(0)] * mesh.ndim, [Shard(1)] * mesh.ndim]
    if mesh.ndim == 2:
        layouts += [[Shard(0), Shard(1)], [Shard(1), Replicate()]]
    for p in layouts:
        x = dmesh.distribute(m, mesh, p)
        _check(comm, x, m, f"2-D {p}", **ALL)
        _check(comm, x, m, f"2-D {p}", equal_nan=False, return_inverse=True)
        inverse = np.unique(x, return_inverse=True)[1]
        assert_all(comm, inverse.spec.layout == x.spec.layout, f"{inverse!r} vs {x!r}")
    empty = np.zeros((3, 0))
    _check(comm, dmesh.distribute(empty, mesh, [Shard(0)] * mesh.ndim), empty, "(3, 0)", **ALL)
    scalar = np.array(4)
    _check(comm, dmesh.distribute(scalar, mesh, [Replicate()] * mesh.ndim), scalar, "0-d", **ALL)


def test_partial_input(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A Partial input is reduced first; the inverse is then replicated along that mesh dim."""
    a = np.array([1, 2, 2, 0, 1, 2, 2], dtype=np.int64)
    n = mesh.size(0)
    part = a * 0 if mesh.coordinate is not None and mesh.coordinate[0] else a
    x = dmesh.from_local(part, mesh, [Partial("sum")] + [Replicate()] * (mesh.ndim - 1),
                         shape=a.shape)  # fmt: skip
    _check(comm, x, a, f"Partial over {n} ranks", **ALL)


@pytest.mark.skipif(WORLD < 2, reason="a subset mesh needs at least 2 ranks")
def test_subset_mesh(comm: MPI.Intracomm) -> None:
    """Ranks outside the mesh get empty blocks and never communicate."""
    a = np.array([4, 4, 4, 4, 1, 4, 4, 0], dtype=np.int64)
    with dmesh.init_mesh((WORLD - 1,), comm=comm) as mesh:
        x = dmesh.distribute(a, mesh, [Shard(0)])
        got = _check(comm, x, a, "subset", **ALL)
        empty = all(g.to_local().size == 0 for g in got) and got[2].shape == a.shape
        assert_all(comm, mesh.is_member or empty, "a non-member holds data")


def test_unsupported(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(np.arange(12).reshape(4, 3) % 5, mesh, [Shard(0)] * mesh.ndim)
    for kwargs in ({"axis": 0}, {"axis": 1, "return_counts": True}, {"axis": -1}):
        assert_raises_all(comm, NotImplementedError, np.unique, x, match="axis=None", **kwargs)


@settings(max_examples=15)
@given(
    st.lists(st.integers(0, 3), max_size=24),
    st.lists(st.integers(0, 24), min_size=WORLD, max_size=WORLD),
    st.booleans(),
)
def test_matches_numpy(
    comm: MPI.Intracomm, data: list[int], cuts: list[int], with_nan: bool
) -> None:
    """Random small arrays (many repeats) cut into random blocks, NaNs or not."""
    a = np.array(data, dtype=np.float64)
    if with_nan:
        a[::3] = np.nan
    bounds = [0, *sorted(min(c, a.size) for c in cuts[:-1]), a.size]
    rank = comm.Get_rank()
    with dmesh.init_mesh(comm=comm) as mesh:
        x = dmesh.from_local(a[bounds[rank] : bounds[rank + 1]], mesh, [Shard(0)])
        _check(comm, x, a, f"bounds {bounds}", **ALL)
        _check(comm, x, a, f"bounds {bounds}", equal_nan=False, **ALL)
