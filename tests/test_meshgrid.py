"""np.meshgrid of DArray coordinates (issue 14, item 2): views of the vectors, broadcast, with
no communication; each grid sharded along its own vector's dim; at 1-4 ranks."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard, debug
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from helpers import BitVerdict, assert_all, assert_raises_all

X = np.array([np.nan, -0.0, 0.5, np.inf, -2.0])
Y = np.arange(7.0) - 3
Z = np.array([2.0, -1.0])


@pytest.mark.parametrize("keywords", [{}, {"indexing": "ij"}, {"sparse": True}, {"copy": False}])
def test_meshgrid_of_darrays(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, keywords: dict[str, object]
) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        for placements in ([Shard(0), *rest], [Replicate(), *rest]):
            longer = np.concatenate([Y, Y])
            vectors = {
                "x": dmesh.distribute(X, mesh, placements),
                "y": dmesh.distribute(longer, mesh, placements)[7:],  # uneven, maybe empty
                "z": dmesh.distribute(Z, mesh, placements),
            }
            plain = {"x": X, "y": Y, "z": Z}
            for names in ("xy", "xyz", "y", "yx"):
                with debug.CommMode() as mode:
                    got = np.meshgrid(*[vectors[n] for n in names], **keywords)
                verdict.check(mode.counts() == {}, f"{names}: communicated {mode.counts()}")
                want = np.meshgrid(*[plain[n] for n in names], **keywords)
                verdict.check(isinstance(got, tuple) and len(got) == len(want), f"{names}")
                for i, (g, w) in enumerate(zip(got, want)):
                    full = g.full_array()
                    ok = full.shape == w.shape and np.array_equal(full, w, equal_nan=True)
                    verdict.check(ok, f"{names}[{i}] {keywords} {placements}: {full!r}")
                    verdict.bits(f"{names}[{i}]", full)


def test_meshgrid_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(X, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, ArgumentTypeError, np.meshgrid, x, Y, match="make it a DArray")
    assert_raises_all(comm, ArgumentError, np.meshgrid, x, x, indexing="yx", match="indexing")
    grid = np.meshgrid(x, x)
    assert_all(comm, grid[0].placements[0] == Shard(1), f"{grid[0].placements}")
