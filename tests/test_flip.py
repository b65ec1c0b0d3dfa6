"""np.flip along sharded axes: blocks swap ends, placements stay, nothing is gathered."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from helpers import assert_all, assert_equal_all


@pytest.mark.parametrize("rows", [0, 1, 5, 8])
def test_flip_keeps_placements(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, rows: int) -> None:
    data = np.arange(rows * 3).reshape(rows, 3)
    choices = [Replicate(), Shard(0), Shard(1)]
    for placements in itertools.product(choices, repeat=mesh.ndim):
        a = dmesh.distribute(data, mesh, list(placements))
        for axis in (0, 1, None, (0, 1)):
            got = np.flip(a, axis)
            nested = placements.count(Shard(0)) > 1 or placements.count(Shard(1)) > 1
            kept = nested or got.placements == a.placements
            assert_all(comm, kept, f"{placements} axis={axis}: {got.placements}")
            assert_equal_all(comm, got.full_array(), np.flip(data, axis))


def test_flip_uneven_blocks_are_mirrored(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    data = np.arange(11.0)
    a = dmesh.distribute(data, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))[2:]
    got = np.flip(a)
    before = a.spec.layout.bounds[0]
    after = got.spec.layout.bounds[0]
    n = a.shape[0]
    assert_all(comm, after == tuple(n - b for b in reversed(before)), f"{before} -> {after}")
    assert_equal_all(comm, got.full_array(), data[2:][::-1])
    assert_equal_all(comm, (got - np.flip(a)).full_array(), np.zeros(9))
