"""DArray identity and copies: equal specs are one object, copy-module copies own their blocks."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from dmesh.core.layout import Layout
from helpers import assert_all, assert_equal_all


def test_equal_specs_are_one_object(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    # Specs key the caches: equal ones are the same object, so lookups never
    # compare fields (dmesh.core.spec.DArraySpec.__new__), whatever made them.
    from dmesh.core.spec import DArraySpec

    data = np.arange(12.0).reshape(4, 3)
    a = dmesh.distribute(data, mesh, [Shard(0)] * mesh.ndim)
    b = dmesh.distribute(data * 2, mesh, [Shard(0)] * mesh.ndim)
    ok = a.spec is b.spec and np.zeros_like(a).spec is a.spec and (a + b).spec is a.spec
    again = DArraySpec(mesh, a.spec.layout, np.float64)  # a type: the dtype is made of it
    ok = ok and again is a.spec and isinstance(again.dtype, np.dtype)
    other = DArraySpec(mesh, a.spec.layout, np.float32)
    ok = ok and other is not a.spec and other.dtype == np.float32 and a.spec.dtype == np.float64
    assert_all(comm, ok, "equal specs are distinct objects")


def test_copy_module_gives_independent_arrays(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    # copy.copy and copy.deepcopy of an ndarray copy its data; so must a DArray's
    # (copy.copy shared the block before: a write through the copy changed the original).
    import copy

    data = np.arange(10.0)
    a = dmesh.distribute(data, mesh, [Shard(0)] * mesh.ndim)
    for made in (copy.copy(a), copy.deepcopy(a)):
        made[...] = -1.0
        assert_all(comm, made.spec is a.spec and made.mesh is a.mesh, "a different layout")
        assert_equal_all(comm, a.full_array(), data)
        assert_equal_all(comm, made.full_array(), np.full(10, -1.0))


def test_specs_are_interned_while_alive(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """One live spec per (mesh, layout, dtype): made again it is the same object (and
    keeps its fields); once its last holder is gone its entry goes too, and a spec made
    after is a new, complete one."""
    import gc

    from dmesh.core import spec as spec_module
    from dmesh.core.spec import DArraySpec

    a = dmesh.distribute(np.arange(10.0), mesh, [Shard(0)] * mesh.ndim)
    layout = a.spec.layout
    again = DArraySpec(mesh, layout, np.float64)  # a dtype given as a type: one spec
    assert again is a.spec
    assert again.dtype == np.dtype(np.float64)
    odd = Layout(layout.mesh_shape, (Replicate(),) * mesh.ndim, (11,), (None,))
    key = (id(mesh), odd, np.dtype(np.int16))
    made = DArraySpec(mesh, odd, np.int16)
    assert spec_module._interned[key]() is made
    del made
    gc.collect()
    assert key not in spec_module._interned
    fresh = DArraySpec(mesh, odd, np.int16)
    assert fresh.layout is odd
    assert fresh.dtype == np.dtype(np.int16)
    assert fresh.mesh is mesh
