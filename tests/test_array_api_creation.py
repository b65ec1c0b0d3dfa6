"""Creation functions of dmesh.array_api (issue 15) against array_api_strict: values,
dtype, shape, the Sharding asked for as ``device``, blocks computed per rank."""

from __future__ import annotations

import math
from typing import Any

import array_api_strict as xs
import numpy as np
from mpi4py import MPI

import dmesh
import dmesh.array_api as xp
from dmesh import DArray, Replicate, Shard
from dmesh.array_api import Sharding
from helpers import Verdict, assert_all, assert_raises_all

xs.set_array_api_strict_flags(api_version="2024.12")


def _check(v: Verdict, got: DArray, want: Any, device: Sharding | None = None) -> None:
    expected = np.asarray(want)
    v.check(isinstance(got, DArray), f"not a DArray: {type(got)}")
    v.check(got.shape == expected.shape, f"shape {got.shape} != {expected.shape}")
    v.check(np.dtype(got.dtype) == expected.dtype, f"dtype {got.dtype} != {expected.dtype}")
    full = got.full_array()
    v.check(np.array_equal(full, expected, equal_nan=True), f"{full} != {expected}")
    if device is not None:
        v.check(got.device == device, f"device {got.device} != {device}")


def test_factories_match_strict(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    s0 = Sharding(mesh, [Shard(0)] * mesh.ndim)
    s1 = Sharding(mesh, [Replicate()] * (mesh.ndim - 1) + [Shard(1)])
    with Verdict(comm) as v:
        for device in (s0, s1):
            _check(v, xp.zeros((5, 3), device=device), xs.zeros((5, 3)), device)
            _check(
                v,
                xp.ones((2, 4), dtype=xp.int32, device=device),
                xs.ones((2, 4), dtype=xs.int32),
                device,
            )
            _check(v, xp.full((3, 2), 7, device=device), xs.full((3, 2), 7), device)
            _check(v, xp.full((3, 2), True, device=device), xs.full((3, 2), True), device)
            _check(v, xp.full((3, 2), -0.5 + 1j, device=device), xs.full((3, 2), -0.5 + 1j), device)
            _check(v, xp.eye(4, 6, k=2, device=device), xs.eye(4, 6, k=2), device)
            _check(
                v,
                xp.eye(5, k=-1, dtype=xp.int8, device=device),
                xs.eye(5, k=-1, dtype=xs.int8),
                device,
            )
            e = xp.empty((3, 4), device=device)
            v.check(e.shape == (3, 4) and e.dtype == np.float64 and e.device == device)
        for args in [(7,), (2, 9, 3), (5, -4, -2), (0.0, 1.0, 0.25), (3, 3), (-1.5, 2)]:
            _check(v, xp.arange(*args, device=s0), xs.arange(*args), s0)
        _check(v, xp.arange(10, dtype=xp.float32), xs.arange(10, dtype=xs.float32))
        for args, kw in [((0, 1, 5), {}), ((-3.0, 2.0, 4), {"endpoint": False}), ((2, 2, 1), {}),
                         ((0, 1, 0), {}), ((1, 0, 7), {"dtype": xs.float32})]:  # fmt: skip
            kw2 = {k: (xp.float32 if val is xs.float32 else val) for k, val in kw.items()}
            want = np.asarray(xs.linspace(*args, **kw))
            got = xp.linspace(*args, **kw2, device=s0)
            v.check(got.dtype == want.dtype and got.device == s0)
            v.equal(got.full_array(), want, rtol=1e-6)
        got = xp.linspace(1j, 3 - 2j, 5)
        v.equal(got.full_array(), np.asarray(xs.linspace(1j, 3 - 2j, 5)), rtol=1e-15)
        v.check(got.dtype == np.complex128)


def test_blocks_are_distributed(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    device = Sharding(mesh, [Shard(0)] * mesh.ndim)
    z = xp.zeros((4 * comm.Get_size(), 3), device=device)
    a = xp.arange(4 * comm.Get_size(), device=device)
    ok = z.local.shape == (
        4 * comm.Get_size() // math.prod(mesh.shape),
        3,
    ) and a.local.size == 4 * comm.Get_size() // math.prod(mesh.shape)
    assert_all(comm, ok, f"{z.local.shape} {a.local.shape}")
    assert_all(
        comm, np.array_equal(a.local, np.arange(a.size)[a.local[0] : a.local[0] + a.local.size])
    )


def test_default_device_and_replicated_dims(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = xp.zeros(6)
    info = xp.__array_namespace_info__()
    assert_all(comm, x.device == info.default_device() == xp.arange(3).device, repr(x.device))
    assert_all(
        comm,
        x.device.placements == (Shard(0),)
        and math.prod(x.device.mesh.shape) == MPI.COMM_WORLD.size,
    )
    s = xp.asarray(2.5)
    assert_all(comm, s.shape == () and s.device.placements == (Replicate(),), repr(s.device))
    # A Shard dim the array does not have is Replicate.
    y = xp.ones(5, device=Sharding(mesh, [Shard(1)] * mesh.ndim))
    assert_all(comm, y.device.placements == (Replicate(),) * mesh.ndim, repr(y.device))
    assert_all(comm, np.array_equal(y.full_array(), np.ones(5)))


def test_like_functions(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    data = np.arange(21, dtype=np.int16).reshape(7, 3)
    x = dmesh.distribute(np.concatenate([data[:1], data]), mesh, [Shard(0)] * mesh.ndim)[1:]
    r = Sharding(mesh, [Replicate()] * mesh.ndim)
    with Verdict(comm) as v:
        ref = xs.asarray(data)
        _check(v, xp.zeros_like(x), xs.zeros_like(ref), x.device)
        _check(v, xp.ones_like(x, dtype=xp.float32), xs.ones_like(ref, dtype=xs.float32), x.device)
        _check(v, xp.full_like(x, -3), xs.full_like(ref, -3), x.device)
        _check(v, xp.full_like(x, 2, device=r), xs.full_like(ref, 2), r)
        e = xp.empty_like(x, dtype=xp.complex64)
        v.check(e.shape == (7, 3) and e.dtype == np.complex64 and e.device == x.device)


def test_asarray_and_from_dlpack(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    device = Sharding(mesh, [Shard(0)] * mesh.ndim)
    r = Sharding(mesh, [Replicate()] * mesh.ndim)
    with Verdict(comm) as v:
        for obj in ([[1, 2], [3, 4]], [1.5, -0.0, np.inf], True, 3, -2.5, 1 + 2j, [[True], [False]],
                    np.arange(5, dtype=np.uint8), []):  # fmt: skip
            _check(v, xp.asarray(obj, device=device), xs.asarray(obj))
        _check(v, xp.asarray([1, 2, 3], dtype=xp.float32), xs.asarray([1, 2, 3], dtype=xs.float32))
        x = xp.asarray(np.arange(6.0), device=device)
        v.check(xp.asarray(x) is x and xp.asarray(x, copy=False) is x)
        c = xp.asarray(x, copy=True)
        v.check(c is not x and np.array_equal(c.full_array(), np.arange(6.0)))
        _check(v, xp.asarray(x, dtype=xp.int64), np.arange(6))
        _check(v, xp.asarray(x, device=r), np.arange(6.0), r)
        v.check(xp.from_dlpack(x) is x)
        _check(v, xp.from_dlpack(np.arange(4)), np.arange(4))
        _check(v, xp.from_dlpack(x, device=r), np.arange(6.0), r)
    x = xp.asarray(np.arange(6.0), device=device)
    assert_raises_all(comm, ValueError, xp.asarray, x, dtype=xp.int32, copy=False)
    assert_raises_all(comm, ValueError, xp.asarray, np.arange(3), dtype=xp.float64, copy=False)
    assert_raises_all(comm, TypeError, xp.asarray, [1], device="cpu")
    assert_raises_all(comm, TypeError, xp.from_dlpack, [1, 2])


def test_meshgrid_tril_triu(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    device = Sharding(mesh, [Shard(0)] * mesh.ndim)
    a, b = np.arange(3.0), np.array([-1.0, 0.5, 2.0, np.nan])
    da, db = xp.asarray(a, device=device), xp.asarray(b, device=device)
    with Verdict(comm) as v:
        for indexing in ("xy", "ij"):
            got = xp.meshgrid(da, db, indexing=indexing)
            want = xs.meshgrid(xs.asarray(a), xs.asarray(b), indexing=indexing)
            v.check(len(got) == 2)
            for g, w in zip(got, want):
                _check(v, g, w)
        m = np.arange(20).reshape(4, 5) - 7
        dm = dmesh.distribute(m, mesh, [Shard(0)] * mesh.ndim)
        for k in (-5, -1, 0, 2, 9):
            _check(v, xp.tril(dm, k=k), xs.tril(xs.asarray(m), k=k))
            _check(v, xp.triu(dm, k=k), xs.triu(xs.asarray(m), k=k))
    assert_raises_all(comm, ValueError, xp.meshgrid, da, db, indexing="yx")
    assert_raises_all(comm, TypeError, xp.meshgrid, da, xp.asarray([1, 2]))
    assert_raises_all(comm, ValueError, xp.tril, da)
    assert_raises_all(comm, TypeError, xp.triu, m)


def test_bad_arguments(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    assert_raises_all(comm, TypeError, xp.zeros, (2, 3), device="cpu", match="Sharding")
    assert_raises_all(comm, ValueError, xp.ones, (2, -1))
    assert_raises_all(comm, TypeError, xp.zeros, 2.5)
    assert_raises_all(comm, TypeError, xp.zeros, 3, dtype="float64")
    assert_raises_all(comm, ValueError, xp.arange, 0, 5, 0)
    assert_raises_all(comm, TypeError, xp.arange, 0, 1j)
    assert_raises_all(comm, TypeError, xp.full, 3, "a")
    assert_raises_all(comm, TypeError, xp.zeros_like, np.zeros(3), match="asarray")
    assert_raises_all(comm, ValueError, xp.linspace, 0, 1, -1)
