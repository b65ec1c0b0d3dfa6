"""The Array API array object on DArrays (issue 15): ``device`` is the placement
(a ``Sharding``), ``to_device`` redistributes, ``__array_namespace__`` returns
``dmesh.array_api`` for the revisions it serves, DLPack exports the local block."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from dmesh.array_api import Sharding
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from helpers import assert_all, assert_raises_all


def test_device_is_the_sharding(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(np.arange(10.0), mesh, [Shard(0)] * mesh.ndim)
    s = x.device
    assert_all(comm, isinstance(s, Sharding) and s.mesh is mesh, repr(s))
    assert_all(comm, s.placements == (Shard(0),) * mesh.ndim, repr(s))
    assert_all(comm, s == Sharding(mesh, [Shard(0)] * mesh.ndim) and hash(s) == hash(x.device))
    assert_all(comm, s != Sharding(mesh, [Replicate()] * mesh.ndim))


def test_to_device_redistributes(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    data = np.arange(14.0).reshape(7, 2) - 3
    x = dmesh.distribute(data, mesh, [Shard(0)] * mesh.ndim)
    target = Sharding(mesh, [Replicate()] * (mesh.ndim - 1) + [Shard(1)])
    y = x.to_device(target)
    assert_all(comm, y.device == target, repr(y.device))
    assert_all(comm, np.array_equal(y.full_array(), data))
    assert_raises_all(comm, ArgumentTypeError, x.to_device, "cpu", match="Sharding")
    assert_raises_all(comm, ArgumentError, x.to_device, target, stream=1, match="stream")


def test_sharding_checks_its_placements(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    assert_raises_all(comm, ArgumentError, Sharding, mesh, [Shard(0)] * (mesh.ndim + 1),
                      match="placements for a")  # fmt: skip
    assert_raises_all(comm, ArgumentTypeError, Sharding, mesh, ["shard"] * mesh.ndim)


def test_array_namespace(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(np.ones(3), mesh, [Shard(0)] * mesh.ndim)
    for version in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
        assert_all(comm, x.__array_namespace__(api_version=version) is dmesh.array_api)
    assert_all(comm, dmesh.array_api.__array_api_version__ == "2024.12")
    assert_raises_all(comm, ValueError, x.__array_namespace__, api_version="2030.12")
    xp = x.__array_namespace__()
    assert_all(comm, xp.pi == np.pi and xp.e == np.e and xp.newaxis is None)
    assert_all(comm, np.isnan(xp.nan) and xp.inf == np.inf)


def test_dlpack_exports_the_local_block(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(np.arange(9.0), mesh, [Shard(0)] * mesh.ndim)
    local = np.from_dlpack(x)
    assert_all(comm, np.array_equal(local, x.local), f"{local} {x.local}")
    assert_all(comm, x.__dlpack_device__() == x.local.__dlpack_device__())


def test_moving_between_meshes_is_refused(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with dmesh.init_mesh(comm=comm) as other:
        x = dmesh.distribute(np.ones(4), mesh, [Replicate()] * mesh.ndim)
        s = Sharding(other, [Replicate()])
        assert_raises_all(comm, UnsupportedError, x.to_device, s, match="mesh")


def test_in_place_operators_keep_dtype_and_shape(comm: MPI.Intracomm) -> None:
    """The standard's in-place rule: ``x1 op= x2`` keeps ``x1``'s dtype and shape and
    writes into it; a promotion or broadcast that would change them raises on every rank."""
    xp = dmesh.array_api
    ints = xp.arange(5)
    floats = xp.ones(5)
    alias = floats
    floats += xp.astype(ints, xp.float32)
    floats *= 2
    assert_all(comm, alias is floats and floats.dtype == np.float64)
    assert_all(comm, np.array_equal(floats.full_array(), 2 * (1 + np.arange(5.0))))
    ints -= 1
    assert_all(comm, ints.dtype == np.int64 and np.array_equal(ints.full_array(), np.arange(-1, 4)))
    assert_raises_all(comm, TypeError, ints.__iadd__, xp.ones(5))
    assert_raises_all(comm, TypeError, ints.__imul__, 1.5)
    row = xp.ones((1, 5))
    assert_raises_all(comm, Exception, row.__iadd__, xp.ones((3, 5)))
