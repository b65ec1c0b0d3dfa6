"""Ufunc operands whose move needs no message are read as views of their own blocks.

A replicated operand against a sharded one (a spectral solver's wavenumbers
against its spectrum), or a block cut smaller, lies inside every rank's own
block: the ufunc reads a view of it (``ops.pipeline.local_views``) instead of
a redistributed copy. Checked against NumPy on uneven and empty blocks with
NaN, +-inf, -0.0 and integer extremes, on every mesh; that no redistribution
runs; that a write to the operand afterwards is not seen by the result; and
that moves needing a message (shifted blocks, partial terms) still make it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.core.layout import Layout
from dmesh.core.plan import local_crop
from dmesh.darray import DArray
from helpers import assert_all, assert_equal_all

R = Replicate()
SHAPES = [(7, 5), (3, 1), (1, 3), (2, 9)]


def hostile(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)
        values = rng.integers(-9, 9, shape).astype(dtype)
        values.flat[:: max(1, values.size // 3)] = info.max
        values.flat[1 :: max(2, values.size // 2)] = info.min
        return values
    values = rng.standard_normal(shape).astype(dtype)
    special = [np.nan, np.inf, -np.inf, -0.0]
    values.flat[: min(values.size, 4)] = special[: min(values.size, 4)]
    return values


def sharded_and_replicated(
    mesh: dmesh.DeviceMesh, a: np.ndarray, b: np.ndarray
) -> tuple[DArray, DArray]:
    shard = [Shard(i % a.ndim) for i in range(mesh.ndim)]
    return dmesh.distribute(a, mesh, shard), dmesh.distribute(b, mesh, [R] * mesh.ndim)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.int64])
def test_replicated_operand_against_sharded(
    comm: MPI.Intracomm,
    mesh: dmesh.DeviceMesh,
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, ...],
    dtype: Any,
) -> None:
    a, b = hostile(shape, dtype, 1), hostile(shape, dtype, 2)
    x, y = sharded_and_replicated(mesh, a, b)
    row = hostile((1, shape[1]), dtype, 3)
    r = dmesh.distribute(row, mesh, [R] * mesh.ndim)
    with np.errstate(all="ignore"):
        _ = x * y, y - x, r + x  # decided and cached
        moved: list[Any] = []
        real = DArray._moved
        monkeypatch.setattr(DArray, "_moved", lambda s, m, t: moved.append(t) or real(s, m, t))
        got = [x * y, y - x, r + x, np.add(y, x)]
        want = [a * b, b - a, row + a, np.add(b, a)]
    assert_all(comm, moved == [], f"redistributed {moved}")
    for g, w in zip(got, want):
        assert_equal_all(comm, g.full_array(), w)
    # The result holds no view of the operand: a later write is not seen.
    before = got[0].full_array().copy()
    y[...] = 0
    assert_equal_all(comm, got[0].full_array(), before)


def test_moves_with_messages_still_make_them(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    n = 9
    a = np.arange(n * 4, dtype=np.float64).reshape(n, 4)
    x = dmesh.distribute(a, mesh, [Shard(0)] * mesh.ndim)
    # Shifted slices: blocks of different cuts, cells cross ranks.
    assert_equal_all(comm, (x[1:] + x[:-1]).full_array(), a[1:] + a[:-1])
    # A partial operand (terms of a[0]): reduced, never read as a view of a term.
    s = dmesh.distribute(a[0], mesh, [Partial("sum")] * mesh.ndim)
    assert_equal_all(comm, (x * s).full_array(), a * a[0])


def test_local_crop_is_a_function_of_the_layouts() -> None:
    replicated = Layout.balanced((2,), (R,), (5, 4))
    sharded = Layout.balanced((2,), (Shard(0),), (5, 4))
    assert local_crop(replicated, sharded, (1,)) == (slice(3, 5), slice(0, 4))
    assert local_crop(sharded, replicated, (0,)) is None  # a gather needs messages
    partial = Layout.balanced((2,), (Partial("sum"),), (5, 4))
    assert local_crop(partial, sharded, (0,)) is None
    assert local_crop(replicated, partial, (0,)) is None


def test_partial_on_a_mesh_dim_of_one_rank_is_its_value() -> None:
    # One term: the block is the value, read as it lies (CG's rs / pAp at 1 rank).
    one = Layout.balanced((1,), (Partial("sum"),), (5, 4))
    assert local_crop(one, Layout.balanced((1,), (R,), (5, 4)), (0,)) == (slice(0, 5), slice(0, 4))
    mixed = Layout.balanced((1, 2), (Partial("max"), Shard(0)), (5, 4))
    target = Layout.balanced((1, 2), (R, Shard(0)), (5, 4))
    assert local_crop(mixed, target, (0, 1)) == (slice(0, 2), slice(0, 4))
    assert local_crop(Layout.balanced((2, 1), (Partial("max"), R), (5, 4)), target, (0, 0)) is None
