"""Basic indexing and assignment on DArrays agree with NumPy; slicing moves no data."""

from __future__ import annotations

import itertools

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from helpers import assert_all, assert_equal_all, assert_raises_all

KEYS = [
    np.s_[1:], np.s_[:-1], np.s_[2:9:3], np.s_[::2], np.s_[3], np.s_[-1, 1], np.s_[..., 0],
    np.s_[None, 1:4], np.s_[:, None, 0], np.s_[4:4], np.s_[1:8, 1:], np.s_[::-1, 0],
]  # fmt: skip


def layouts(mesh: dmesh.DeviceMesh) -> list[list[object]]:
    return [list(p) for p in itertools.product([Replicate(), Shard(0), Shard(1)], repeat=mesh.ndim)]


def test_getitem(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = np.arange(20.0).reshape(10, 2) ** 2
    for placements in layouts(mesh):
        d = dmesh.distribute(a, mesh, placements)
        for key in KEYS:  # negative steps on sharded dims: see test_negative_steps.py
            got = d[key]
            assert_equal_all(comm, got.full_array(), a[key])


def test_slicing_moves_no_data_and_stencils_align(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    a = np.arange(30.0).reshape(15, 2) ** 2
    d = dmesh.distribute(a, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    tail = d[1:]
    same = mesh.coordinate is None or np.shares_memory(tail.local, d.local) or tail.local.size == 0
    assert_all(comm, same, "a[1:] is a view of each block")
    assert_equal_all(comm, (d[1:] - d[:-1]).full_array(), a[1:] - a[:-1])
    assert_equal_all(
        comm, (d[2:] - 2 * d[1:-1] + d[:-2]).full_array(), a[2:] - 2 * a[1:-1] + a[:-2]
    )


def test_setitem(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = np.arange(24.0).reshape(8, 3)
    for placements in layouts(mesh):
        d = dmesh.distribute(a, mesh, placements)
        b = a.copy()
        d[2:5] = -1.0
        b[2:5] = -1.0
        d[7, 1] = 100.0
        b[7, 1] = 100.0
        d[:, 0] = np.arange(8.0)  # a value every rank holds
        b[:, 0] = np.arange(8.0)
        d[1:3] = dmesh.distribute(np.full((2, 3), 5.0), mesh, [Replicate()] * mesh.ndim)
        b[1:3] = 5.0
        assert_equal_all(comm, d.full_array(), b)


def test_index_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    d = dmesh.distribute(np.zeros((4, 3)), mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, IndexError, d.__getitem__, np.s_[4], match="out of bounds")
    assert_raises_all(comm, IndexError, d.__getitem__, np.s_[0, 0, 0], match="too many")
    # Integer arrays are supported now: see test_fancy_indexing.py.


def test_boolean_masks_and_nonzero(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = np.arange(24.0).reshape(6, 4) % 5 - 2
    for placements in layouts(mesh):
        d = dmesh.distribute(a, mesh, placements)
        selected = d[d > 0]
        assert_all(comm, selected.ndim == 1 and selected.shape == a[a > 0].shape)
        assert_equal_all(comm, selected.full_array(), a[a > 0])
        for got, want in zip(np.nonzero(d), np.nonzero(a), strict=True):
            assert_equal_all(comm, got.full_array(), want)
    rows = dmesh.distribute(a, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    kept = rows[rows > 0]  # only dim 0 sharded: no element moves
    assert_all(comm, kept.placements[0] == Shard(0))
    assert_raises_all(comm, IndexError, rows.__getitem__, rows)  # a float index, as NumPy


def test_masks_of_leading_dims(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    # k-means' X[labels == j]: a mask of the leading dims selects whole rows, and with
    # the rows sharded nothing moves but one count per block (no nonzero(), no exchange).
    data = np.arange(13 * 4 * 3, dtype=np.float64).reshape(13, 4, 3) - 70
    labels = np.random.default_rng(28).integers(0, 4, 13)
    for placements in layouts(mesh):
        x = dmesh.distribute(data, mesh, placements)
        lab = dmesh.distribute(labels, mesh, [Shard(0)] * mesh.ndim)
        for j in range(5):  # cluster 4 is empty
            assert_equal_all(comm, x[lab == j].full_array(), data[labels == j])
        two = dmesh.distribute(data[..., 0] > 0, mesh, placements)
        assert_equal_all(comm, x[two].full_array(), data[data[..., 0] > 0])
    rows = dmesh.distribute(data, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    lab = dmesh.distribute(labels, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    with dmesh.debug.CommMode() as record:
        rows[lab == 1]
    assert_all(comm, set(record.counts()) <= {"all_gather"}, f"{record.counts()}")
