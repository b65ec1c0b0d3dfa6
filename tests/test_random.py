"""dmesh.random: for a seed, the global array is bit-for-bit what one rank draws, whatever
the mesh shape, rank count and placements (this suite runs at 1, 2, 3 and 4 ranks)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from helpers import assert_all, assert_equal_all, assert_raises_all

DRAWS: dict[str, Callable[..., dmesh.DArray]] = {
    "random": lambda size, **kw: dmesh.random.random(size, **kw),
    "uniform": lambda size, **kw: dmesh.random.uniform(-2.0, 3.0, size, **kw),
    "normal": lambda size, **kw: dmesh.random.normal(1.0, 2.0, size, **kw),
    "standard_normal": lambda size, **kw: dmesh.random.standard_normal(size, **kw),
    "integers": lambda size, **kw: dmesh.random.integers(-5, 50, size, **kw),
}


def one_rank_value(name: str, size: tuple[int, ...], draws_before: int) -> np.ndarray:
    """What a single rank draws: the same calls on a mesh of this rank alone."""
    with dmesh.init_mesh((1,), comm=MPI.COMM_SELF) as alone:
        dmesh.random.seed(7)
        for _ in range(draws_before):
            DRAWS[name]((1,), mesh=alone)
        return np.asarray(DRAWS[name](size, mesh=alone).full_array())


def mesh_shapes() -> list[tuple[int, ...]]:
    n = MPI.COMM_WORLD.Get_size()
    return [(n,), (1, n)] + ([(2, n // 2)] if n % 2 == 0 and n > 2 else [])


@pytest.mark.parametrize("name", list(DRAWS))
@pytest.mark.parametrize("shape", mesh_shapes(), ids=lambda s: "x".join(map(str, s)))
def test_same_values_for_any_distribution(comm: MPI.Intracomm, name: str, shape: tuple) -> None:
    size = (7, 5)
    expected = one_rank_value(name, size, draws_before=1)
    with dmesh.init_mesh(shape, comm=comm) as mesh:
        choices = [Replicate(), Shard(0), Shard(1)]
        for placements in itertools.product(choices, repeat=mesh.ndim):
            dmesh.random.seed(7)
            DRAWS[name]((1,), mesh=mesh)  # the sequence of draws matters, not the mesh
            x = DRAWS[name](size, mesh=mesh, placements=list(placements))
            full = x.full_array()
            assert_all(comm, full.dtype == expected.dtype, f"{full.dtype} != {expected.dtype}")
            assert_equal_all(comm, full, expected)  # bit for bit


def test_draws_differ_and_seed_restarts(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh(comm=comm) as mesh:
        dmesh.random.seed(3)
        first = dmesh.random.random((4, 4), mesh=mesh).full_array()
        second = dmesh.random.random((4, 4), mesh=mesh).full_array()
        dmesh.random.seed(3)
        again = dmesh.random.random((4, 4), mesh=mesh).full_array()
    assert_all(comm, not np.array_equal(first, second))
    assert_equal_all(comm, again, first)
    assert_all(comm, bool(((first >= 0) & (first < 1)).all()))


def test_bad_arguments(comm: MPI.Intracomm) -> None:
    assert_raises_all(comm, ValueError, dmesh.random.seed, -1)
    assert_raises_all(comm, TypeError, dmesh.random.seed, 1.5)
    assert_raises_all(comm, ValueError, dmesh.random.integers, 5, 5, (3,))
    assert_raises_all(comm, ValueError, dmesh.random.normal, 0.0, -1.0, (3,))
