"""dmesh.visualize: the block table, exact text where the mesh allows it."""

from __future__ import annotations

import io

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import assert_all, assert_raises_all

WORLD = MPI.COMM_WORLD.Get_size()
needs_4 = pytest.mark.skipif(WORLD != 4, reason="needs a (2, 2) mesh: 4 ranks")
needs_3 = pytest.mark.skipif(WORLD != 3, reason="needs 3 ranks")


def check_text(comm: MPI.Intracomm, actual: str, expected: str) -> None:
    assert_all(comm, actual == expected, f"\n{actual}\n!=\n{expected}")


@needs_4
def test_2x2_sharded_matrix(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh((2, 2), comm=comm) as mesh:
        a = dmesh.distribute(np.arange(30.0).reshape(5, 6), mesh, [Shard(0), Shard(1)])
        text = dmesh.visualize(a, file=False, use_rich=False)
    expected = (
        "f64[5,6] (S(0), S(1)) on mesh dim0=2,dim1=2\n"
        "+----------------+----------------+\n"
        "| (0, 0)         | (0, 1)         |\n"
        "| [0:3, 0:3] 3x3 | [0:3, 3:6] 3x3 |\n"
        "+----------------+----------------+\n"
        "| (1, 0)         | (1, 1)         |\n"
        "| [3:5, 0:3] 2x3 | [3:5, 3:6] 2x3 |\n"
        "+----------------+----------------+\n"
    )
    check_text(comm, text, expected)


@needs_4
def test_shard_replicate_lists_two_coordinates(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh((2, 2), names=("x", "y"), comm=comm) as mesh:
        a = dmesh.distribute(np.zeros((4, 6), np.int32), mesh, [Shard(0), Replicate()])
        text = dmesh.visualize(a, file=False, use_rich=False)
    expected = (
        "i32[4,6] (S(0), R) on mesh x=2,y=2\n"
        "+----------------+\n"
        "| (0, 0)         |\n"
        "| (0, 1)         |\n"
        "| [0:2, 0:6] 2x6 |\n"
        "+----------------+\n"
        "| (1, 0)         |\n"
        "| (1, 1)         |\n"
        "| [2:4, 0:6] 2x6 |\n"
        "+----------------+\n"
    )
    check_text(comm, text, expected)


@needs_4
def test_3d_summary(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh((2, 2), names=("x", "y"), comm=comm) as mesh:
        a = dmesh.distribute(np.zeros((4, 6, 8)), mesh, [Shard(0), Shard(2)])
        text = dmesh.visualize(a, file=False, use_rich=False)
    expected = (
        "f64[4,6,8] (S(0), S(2)) on mesh x=2,y=2\n"
        "dim  length  sharded by  block boundaries\n"
        "0    4       0 (x)       0, 2, 4\n"
        "1    6       -           0, 6\n"
        "2    8       1 (y)       0, 4, 8\n"
    )
    check_text(comm, text, expected)


@needs_4
def test_partial_footer(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh((2, 2), names=("x", "y"), comm=comm) as mesh:
        a = dmesh.distribute(np.zeros((4, 6)), mesh, [Shard(0), Partial()])
        text = dmesh.visualize(a, file=False, use_rich=False)
    expected = (
        "f64[4,6] (S(0), P(sum)) on mesh x=2,y=2\n"
        "+----------------+\n"
        "| (0, 0)         |\n"
        "| (0, 1)         |\n"
        "| [0:2, 0:6] 2x6 |\n"
        "+----------------+\n"
        "| (1, 0)         |\n"
        "| (1, 1)         |\n"
        "| [2:4, 0:6] 2x6 |\n"
        "+----------------+\n"
        "partial sum over mesh dim 1 (y)\n"
    )
    check_text(comm, text, expected)


@needs_3
def test_1d_uneven_exact(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh((3,), comm=comm) as mesh:
        a = dmesh.distribute(np.arange(7.0), mesh, [Shard(0)])
        text = dmesh.visualize(a, file=False, use_rich=False)
    expected = (
        "f64[7] (S(0),) on mesh dim0=3\n"
        "+---------+---------+---------+\n"
        "| (0)     | (1)     | (2)     |\n"
        "| [0:3] 3 | [3:5] 2 | [5:7] 2 |\n"
        "+---------+---------+---------+\n"
    )
    check_text(comm, text, expected)


def test_1d_every_block_listed(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh((WORLD,), comm=comm) as mesh:
        a = dmesh.distribute(np.arange(7.0), mesh, [Shard(0)])
        text = dmesh.visualize(a, file=False, use_rich=False)
    lines = text.splitlines()
    starts = np.cumsum([0] + [len(p) for p in np.array_split(np.arange(7), WORLD)])
    ok = len(lines) == 5
    for r in range(WORLD):
        lo, hi = starts[r], starts[r + 1]
        ok = ok and f"({r})" in lines[2] and f"[{lo}:{hi}] {hi - lo}" in lines[3]
    assert_all(comm, ok, text)


def test_replicated_one_cell(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh((WORLD,), comm=comm) as mesh:
        a = dmesh.distribute(np.zeros(5), mesh, [Replicate()])
        text = dmesh.visualize(a, file=False, use_rich=False)
    expected = (
        f"f64[5] (R,) on mesh dim0={WORLD}\n"
        "+---------+\n" + "".join(f"| ({r})     |\n" for r in range(WORLD)) + "| [0:5] 5 |\n"
        "+---------+\n"
    )
    check_text(comm, text, expected)


def test_partial_1d_footer(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh((WORLD,), comm=comm) as mesh:
        a = dmesh.distribute(np.zeros(3), mesh, [Partial("max")])
        text = dmesh.visualize(a, file=False, use_rich=False)
    assert_all(comm, text.endswith("+\npartial max over mesh dim 0 (dim0)\n"), text)


def test_prints_on_mesh_rank_0_only(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh((WORLD,), comm=comm) as mesh:
        a = dmesh.distribute(np.zeros((2, 3)), mesh, [Shard(1)])
        out = io.StringIO()
        text = dmesh.visualize(a, file=out, use_rich=False)
        rank = mesh.rank
    printed = out.getvalue()
    ok = printed == (text if rank == 0 else "")
    assert_all(comm, ok, f"rank {rank} printed {printed!r}")
    assert_all(comm, len(set(comm.allgather(text))) == 1, "ranks disagree on the text")


def test_rich_rendering(comm: MPI.Intracomm) -> None:
    pytest.importorskip("rich")
    with dmesh.init_mesh((WORLD,), comm=comm) as mesh:
        a = dmesh.distribute(np.zeros((4, 2)), mesh, [Shard(0)])
        text = dmesh.visualize(a, file=False, use_rich=True)
    ok = "(0)" in text and f"({WORLD - 1})" in text and "[0:" in text and "\x1b" not in text
    assert_all(comm, ok, text)


def test_rejects_non_darray(comm: MPI.Intracomm) -> None:
    assert_raises_all(
        comm, dmesh.ArgumentTypeError, dmesh.visualize, np.zeros(3), match="expected a DArray"
    )
