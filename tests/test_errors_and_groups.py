"""Bad input raises a clear error on every rank; every kind of group works."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import dmesh.collectives as C
from helpers import assert_all, assert_equal_all, assert_raises_all


def test_unknown_op_suggests_a_name(comm: MPI.Intracomm) -> None:
    exc = assert_raises_all(comm, ValueError, C.all_reduce, np.ones(3), "summ", comm)
    assert_all(comm, "did you mean 'sum'" in str(exc) and "allowed:" in str(exc), str(exc))
    assert_all(comm, isinstance(exc, C.DMeshError))
    assert_raises_all(comm, TypeError, C.all_reduce, np.ones(3), MPI.SUM, comm, match="op:")
    assert_raises_all(comm, ValueError, C.reduce_scatter, np.ones(3), "mean", 0, comm)


@pytest.mark.parametrize("op", ["min", "max"])
def test_complex_min_max_is_an_error(comm: MPI.Intracomm, op: str) -> None:
    x = np.ones(2, np.complex128)
    assert_raises_all(comm, TypeError, C.all_reduce, x, op, comm, match="not ordered")
    assert_raises_all(comm, TypeError, C.all_reduce_coalesced, [x], op, comm)


def test_bitwise_ops_need_integers(comm: MPI.Intracomm) -> None:
    for op in ("band", "lxor"):
        assert_raises_all(comm, TypeError, C.all_reduce, np.ones(2), op, comm, match="integer")


def test_axis_out_of_range(comm: MPI.Intracomm) -> None:
    x = np.ones((2, 3))
    assert_raises_all(comm, ValueError, C.all_gather, x, 2, comm, match=r"axis=2 .* -2 to 1")
    assert_raises_all(comm, ValueError, C.reduce_scatter, x, "sum", -3, comm, match="axis=-3")
    assert_raises_all(comm, ValueError, C.all_to_all, x, 0, 5, comm, match="concat_axis=5")
    assert_raises_all(comm, ValueError, C.reduce_scatter, np.float64(1), "sum", 0, comm)
    assert_raises_all(comm, TypeError, C.all_gather, x, 0.5, comm, match="axis")


def test_bad_group(comm: MPI.Intracomm) -> None:
    x = np.ones(2)
    for group in ("world", 3, (object(), 0), [0.5]):
        assert_raises_all(comm, TypeError, C.all_reduce, x, "sum", group, match="group")
    size = comm.Get_size()
    assert_raises_all(comm, ValueError, C.all_reduce, x, "sum", [0, 0], match="distinct")
    assert_raises_all(comm, ValueError, C.all_reduce, x, "sum", [size + 5], match="world ranks")


def test_bad_roots_sizes_and_pairs(comm: MPI.Intracomm) -> None:
    n = comm.Get_size()
    x = np.ones(4)
    assert_raises_all(comm, ValueError, C.broadcast, x, n, comm, match="src")
    assert_raises_all(comm, ValueError, C.gather, x, -1, 0, comm, match="dst")
    assert_raises_all(comm, ValueError, C.reduce_scatter, x, "sum", 0, comm, sizes=[5] * n)
    assert_raises_all(comm, ValueError, C.all_to_all, x, 0, 0, comm, split_sizes=[1])
    assert_raises_all(comm, ValueError, C.permute, x, [(0, n)], comm, match="pairs")
    assert_raises_all(comm, ValueError, C.permute, x, [(0, 0), (0, 0)], comm, match="pairs")
    assert_raises_all(comm, TypeError, C.all_reduce, np.array(["a"]), "sum", comm, match="dtype")
    assert_raises_all(comm, TypeError, C.all_reduce, None, "sum", comm)


def test_root_only_errors_reach_every_rank(comm: MPI.Intracomm) -> None:
    """scatter/broadcast read arguments on the root only; its verdict travels to all."""
    rank = comm.Get_rank()
    bad = np.ones((2, 2)) if rank == 0 else None
    assert_raises_all(comm, ValueError, C.scatter, bad, 0, 7, comm, match="axis=7 is out of range")
    strings = np.array(["x"]) if rank == 0 else None
    assert_raises_all(comm, TypeError, C.broadcast, strings, 0, comm, match="dtype <U1")


def test_shape_mismatch_between_ranks_raises_everywhere(comm: MPI.Intracomm) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    if n < 2:
        pytest.skip("needs two ranks to disagree")
    x = np.ones((2, 3 if rank == 0 else 4))
    assert_raises_all(comm, ValueError, C.all_gather, x, 0, comm, match="rank 1 has")
    y = np.ones(3, np.float32 if rank == 1 else np.float64)
    assert_raises_all(comm, ValueError, C.all_gather, y, 0, comm, match="dtype")
    assert_raises_all(comm, ValueError, C.all_to_all, x, 0, 0, comm, match="all_to_all")


def test_rank_list_groups(comm: MPI.Intracomm) -> None:
    n, rank = comm.Get_size(), MPI.COMM_WORLD.Get_rank()
    world = list(range(MPI.COMM_WORLD.Get_size()))
    # Reversed order: the group's rank p is world rank n-1-p, so gathers follow it.
    result = C.all_gather(np.array([rank]), 0, world[::-1])
    assert_equal_all(comm, result, np.array(world[::-1]))
    again = C.all_gather(np.array([rank]), 0, world[::-1])  # cached communicator
    assert_equal_all(comm, again, result)
    # A group of the even ranks: only they call it.
    evens = world[::2]
    if rank in evens:
        total = C.all_reduce(np.array([rank]), "sum", evens)
        ok = int(total[0]) == sum(evens)
    else:
        ok = True
    assert_all(comm, ok)
    del n


class _FakeMesh:
    """Any object with ``ndim`` and ``comm(mesh_dim)`` is a group: no dmesh import needed."""

    def __init__(self, comm: MPI.Intracomm, ndim: int = 1) -> None:
        self._comm = comm
        self.ndim = ndim

    def comm(self, mesh_dim: int | str | None = 0) -> MPI.Comm:
        return self._comm


def test_mesh_like_groups(comm: MPI.Intracomm) -> None:
    n = comm.Get_size()
    x = np.ones(2)
    assert_equal_all(comm, C.all_reduce(x, "sum", _FakeMesh(comm)), x * n)
    assert_equal_all(comm, C.all_reduce(x, "sum", (_FakeMesh(comm, 2), "y")), x * n)
    assert_raises_all(comm, ValueError, C.all_reduce, x, "sum", _FakeMesh(comm, 2), match="1-D")
    assert_raises_all(comm, ValueError, C.all_reduce, x, "sum", _FakeMesh(MPI.COMM_NULL))
