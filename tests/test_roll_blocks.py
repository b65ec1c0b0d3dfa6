"""``np.roll`` along a sharded axis keeps the input's blocks and moves only the rows that
change holder, in one message (ops/kernels/roll.py): NumPy's values at 1-4 ranks, for
generated shapes, shifts, axes and placements, uneven and empty blocks included."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from helpers import assert_all, assert_equal_all

HOSTILE = np.array([np.nan, -np.inf, np.inf, -0.0, 2.0**60, -1.5])


def _placements(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    return [list(p) for p in itertools.product([Replicate(), Shard(0), Shard(1)], repeat=mesh.ndim)]


@given(
    rows=st.integers(1, 9),
    cols=st.integers(1, 5),
    head=st.integers(0, 3),
    shift=st.integers(-20, 20),
    axis=st.sampled_from([0, 1, -1]),
)
def test_roll_matches_numpy(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, rows: int, cols: int, head: int, shift: int,
    axis: int,
) -> None:  # fmt: skip
    whole = np.arange((rows + head) * cols, dtype=np.float64).reshape(rows + head, cols)
    whole.flat[: min(whole.size, HOSTILE.size)] = HOSTILE[: whole.size]
    want = np.roll(whole[head:], shift, axis)
    for placements in _placements(mesh):
        # A slice of a distributed array: blocks cut unevenly, some empty at 3-4 ranks.
        a = dmesh.distribute(whole, mesh, placements)[head:]
        got = np.roll(a, shift, axis)
        assert_all(comm, got.placements == a.placements, f"{placements}: {got.placements}")
        assert_equal_all(comm, got.full_array(), want)
        assert_equal_all(comm, a.full_array(), whole[head:])  # the input is untouched


def test_roll_by_one_sends_the_boundary_rows_once(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    n = 16
    a = dmesh.distribute(np.arange(n * 3.0).reshape(n, 3), mesh, [Shard(0)]
                         + [Replicate()] * (mesh.ndim - 1))  # fmt: skip
    np.roll(a, 1, 0)  # planned once
    with dmesh.debug.CommMode() as record:
        got = np.roll(a, 1, 0)
    assert_equal_all(comm, got.full_array(), np.roll(np.arange(n * 3.0).reshape(n, 3), 1, 0))
    blocks = mesh.shape[0]
    assert_all(comm, record.total_count == (blocks > 1), f"{record.total_count} collectives")
    sent = sum(r.sent_bytes for r in record.records)
    assert_all(comm, sent <= 3 * 8, f"sent {sent} bytes: more than one row")


def test_roll_of_partial_terms(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    # Each rank rolls its own terms (a permutation commutes with their sum, min or max).
    data = np.arange(20.0).reshape(5, 4) - 7.0
    for op in ("sum", "max"):
        a = dmesh.distribute(data, mesh, [dmesh.Partial(op)] + [Shard(1)] * (mesh.ndim - 1))
        for shift, axis in [(2, 0), (-1, 1), (7, 0)]:
            got = np.roll(a, shift, axis)
            assert_equal_all(comm, got.full_array(), np.roll(data, shift, axis))


def test_roll_moves_every_dtype_as_bytes(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """The crossing rows travel as bytes: float16, bool, int8 and complex alike."""
    base = np.arange(7 * 3).reshape(7, 3)
    for whole in (
        base.astype(np.float16),
        base % 2 == 0,
        base.astype(np.int8) - 9,
        base * (1 + 2j),
    ):
        a = dmesh.distribute(whole, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
        for shift in (1, -2):
            assert_equal_all(comm, np.roll(a, shift, 0).full_array(), np.roll(whole, shift, 0))


def test_large_rolls_are_placed_away_from_their_source(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """Blocks from ``roll.PLACED_BYTES`` on: NumPy's values along every axis and placement,
    and each result block starts half a page (mod 4 KiB) after its source block, where
    the shifted copy runs at full speed (no 4K aliasing of its loads and stores)."""
    from dmesh.ops.kernels import roll

    rows = 8 * comm.size + 3  # uneven blocks
    cols = roll.PLACED_BYTES // 8 // 4 + 5  # each rank's block over the threshold
    whole = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
    whole[0, :3] = HOSTILE[:3]
    found: list[str] = []
    for placements in _placements(mesh):
        x = dmesh.distribute(whole, mesh, placements)
        for shift, axis in ((1, 1), (-1, 1), (3, 0), (-1, 0), (cols + 2, 1)):
            got = np.roll(x, shift, axis)
            if not np.array_equal(got.full_array(), np.roll(whole, shift, axis), equal_nan=True):
                found.append(f"{placements} shift {shift} axis {axis}: values")
            source, block = x.local, got.local
            if block.nbytes >= roll.PLACED_BYTES:
                gap = (block.ctypes.data - source.ctypes.data) % 4096
                if gap != 2048:
                    found.append(f"{placements} shift {shift} axis {axis}: gap {gap}")
    assert_all(comm, not found, "; ".join(found[:3]))
    block = np.ones((300, 300))
    placed = roll.roll_whole(block, 7, 1)
    assert_all(comm, np.array_equal(placed, np.roll(block, 7, 1)), "roll_whole")
