"""Factories build only each rank's block and agree with NumPy; DArray's local methods."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import assert_all, assert_equal_all, assert_raises_all


@pytest.fixture
def mesh(comm: MPI.Intracomm):  # type: ignore[no-untyped-def]
    n = comm.Get_size()
    shape = (2, n // 2) if n % 2 == 0 and n > 2 else (n,)
    with dmesh.init_mesh(shape, comm=comm) as m:
        yield m


def placements_for(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[object]]:
    first = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    out = [first, [Replicate()] * mesh.ndim]
    if ndim >= 2:
        out.append([Shard(1)] + [Shard(0)] * (mesh.ndim - 1))
    return out


def check(comm: MPI.Intracomm, d: dmesh.DArray, expected: np.ndarray) -> None:
    full = d.full_array()
    assert_equal_all(comm, full, expected)
    block = expected[d.spec.layout.slices(d.mesh.coordinate)]
    assert_all(comm, np.array_equal(d.local, block) and d.local.dtype == expected.dtype)


@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 3, 4)])
def test_constant_factories(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: tuple) -> None:
    for placements in placements_for(mesh, len(shape)) if shape else [[Replicate()] * mesh.ndim]:
        kw = {"mesh": mesh, "placements": placements}
        check(comm, dmesh.zeros(shape, **kw), np.zeros(shape))
        check(comm, dmesh.ones(shape, dtype=np.int16, **kw), np.ones(shape, np.int16))
        check(comm, dmesh.full(shape, 2.5, **kw), np.full(shape, 2.5))
        check(comm, dmesh.full(shape, True, **kw), np.full(shape, True))
        e = dmesh.empty(shape, dtype=np.complex64, **kw)
        assert_all(comm, e.shape == shape and e.local.shape == e.spec.local_shape())
        like = dmesh.ones_like(e)
        assert_all(comm, like.placements == e.placements and like.dtype == np.complex64)
        check(comm, dmesh.zeros_like(e, dtype=np.float32), np.zeros(shape, np.float32))
        check(comm, dmesh.full_like(e, 3), np.full(shape, 3, np.complex64))
        assert_all(comm, dmesh.empty_like(e).spec == e.spec)


@pytest.mark.parametrize(
    "args", [(10,), (2, 11), (3, 20, 4), (0.5, 3.0, 0.25), (5, 1, -1), (1, 1), (-3, 4, 0.7)]
)
def test_arange(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, args: tuple) -> None:
    check(comm, dmesh.arange(*args, mesh=mesh), np.arange(*args))


@pytest.mark.parametrize(
    "args", [(0, 1, 7), (2.0, -3.0, 10), (0, 1, 1), (0, 1, 0), (1, 2, 9, False)]
)
def test_linspace(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, args: tuple) -> None:
    check(comm, dmesh.linspace(*args, mesh=mesh), np.linspace(*args))


@pytest.mark.parametrize("args", [(5,), (4, 6), (6, 4, 1), (5, 5, -2), (3, 3, 4)])
def test_eye(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, args: tuple) -> None:
    for placements in placements_for(mesh, 2):
        check(comm, dmesh.eye(*args, mesh=mesh, placements=placements), np.eye(*args))


def test_default_mesh_and_placements(comm: MPI.Intracomm) -> None:
    d = dmesh.zeros((5, 2))
    assert_all(comm, d.placements == (Shard(0),) and d.mesh.size() == MPI.COMM_WORLD.Get_size())
    check(comm, d, np.zeros((5, 2)))


def test_partial_factories_reduce_to_the_value(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    for op in ("sum", "prod", "max"):
        placements = [Partial(op)] + [Replicate()] * (mesh.ndim - 1)
        check_value = dmesh.full((3,), 2.0, mesh=mesh, placements=placements).full_array()
        assert_equal_all(comm, check_value, np.full(3, 2.0))


def test_darray_methods(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = np.arange(12.0).reshape(4, 3)
    d = dmesh.distribute(a, mesh, placements_for(mesh, 2)[-1])
    assert_all(comm, len(d) == 4 and d.ndim == 2 and d.size == 12 and d.shape == (4, 3))
    assert_all(comm, "f64[4,3]" in repr(d) and "on mesh" in repr(d), repr(d))
    assert_equal_all(comm, np.asarray(d), a)  # __array__ gathers (collective)
    assert_all(comm, d.tolist() == a.tolist())
    as_int = d.astype(np.int32)
    assert_all(comm, as_int.dtype == np.int32 and as_int.placements == d.placements)
    copy = d.copy()
    copy.local[...] = -1
    assert_equal_all(comm, d.full_array(), a)  # the copy owns its block
    one = dmesh.full((1, 1), 4.5, mesh=mesh, placements=[Replicate()] * mesh.ndim)
    assert_all(comm, one.item() == 4.5)
    assert_raises_all(comm, ValueError, d.item, match="12 elements")
    assert_raises_all(
        comm, TypeError, len, dmesh.zeros((), mesh=mesh, placements=[Replicate()] * mesh.ndim)
    )


def test_factory_argument_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    assert_raises_all(comm, ValueError, dmesh.zeros, (-1, 2), mesh=mesh)
    assert_raises_all(comm, TypeError, dmesh.zeros, "3", mesh=mesh)
    assert_raises_all(comm, TypeError, dmesh.zeros, (3,), mesh="mesh")
    assert_raises_all(comm, TypeError, dmesh.zeros, (3,), mesh=mesh, dtype=object)
    assert_raises_all(comm, ValueError, dmesh.arange, 0, 5, 0, mesh=mesh)
    assert_raises_all(
        comm, ValueError, dmesh.zeros, (3,), mesh=mesh, placements=[Partial("max")] * mesh.ndim,
        dtype=np.complex64,
    )  # fmt: skip
