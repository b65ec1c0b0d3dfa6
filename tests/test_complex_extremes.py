"""np.max/np.min (and maximum.reduce/minimum.reduce, a.max()) of complex DArrays (issue 14,
item 7): NumPy's lexicographic order and NaN first, at 1-4 ranks on every layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import UnsupportedError
from helpers import BitVerdict, assert_raises_all

Z = np.array([[1 + 2j, 3 - 1j, 3 + 0j, -0.0j], [complex(np.nan, 0), 0j, -1j, 3 + 1j],
              [3 + 5j, 2 + 9j, 1j, complex(np.inf, -1)], [-4 + 0j, 3 + 5j, 2j, 3 - 5j],
              [3 + 5j, -2 + 0j, 7j, 0j]])  # fmt: skip


@pytest.mark.parametrize("func", [np.max, np.min], ids=["max", "min"])
def test_complex_extremes(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, func: object) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    layouts = [[Shard(0), *rest], [Shard(1), *rest], [Replicate(), *rest], [Partial("sum"), *rest]]
    if mesh.ndim == 2:
        layouts.append([Shard(0), Shard(1)])
    ufunc = np.maximum if func is np.max else np.minimum
    with BitVerdict(comm) as verdict:
        for placements in layouts:
            whole = np.concatenate([Z, Z[::-1]])
            for a, z in ((dmesh.distribute(Z, mesh, placements), Z),
                         (dmesh.distribute(whole, mesh, placements)[4:], whole[4:])):  # fmt: skip
                extreme: Any = func
                method = "max" if func is np.max else "min"
                calls = [
                    ("all", extreme(a), extreme(z)),
                    ("axis 0", extreme(a, axis=0), extreme(z, axis=0)),
                    ("axis 1 keep", extreme(a, axis=1, keepdims=True),
                     extreme(z, axis=1, keepdims=True)),
                    ("reduce", ufunc.reduce(a, 0), ufunc.reduce(z, 0)),
                    ("method", getattr(a, method)(), getattr(z, method)()),
                ]  # fmt: skip
                for label, got, want in calls:
                    full = np.asarray(got.full_array())
                    ok = full.dtype == want.dtype and np.array_equal(full, want, equal_nan=True)
                    verdict.check(ok, f"{label} {placements}: {full!r} != {want!r}")
                    verdict.bits(label, full)


def test_unsupported_forms_raise_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(Z, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, UnsupportedError, np.max, a, axis=(0, 1), match="one axis")
