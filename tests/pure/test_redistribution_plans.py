"""Redistribution plans, checked in one process: the transition table picks the expected
collective for each single-dim move, and moves it cannot express become one transfer."""

from __future__ import annotations

import pytest

from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Replicate, Shard
from dmesh.core.plan import plan_redistribution
from dmesh.core.transfers import transfer_crosses, transfer_plan

R, S0, S1, P = Replicate(), Shard(0), Shard(1), Partial("sum")


def kinds(
    mesh: tuple[int, ...], src: tuple, dst: tuple, shape: tuple[int, ...] = (8, 6)
) -> list[str]:
    a = Layout.balanced(mesh, src, shape)
    b = Layout.balanced(mesh, dst, shape)
    return [step[0] for step in plan_redistribution(a, b, True)]


@pytest.mark.parametrize(
    ("src", "dst", "expected"),
    [
        ((S0,), (R,), ["all_gather"]),
        ((R,), (S1,), ["slice"]),
        ((S0,), (S1,), ["all_to_all"]),  # never a full gather
        ((P,), (R,), ["all_reduce"]),
        ((P,), (S0,), ["reduce_scatter"]),
        ((R,), (P,), ["make_partial"]),
        ((P,), (Partial("max"),), ["all_reduce", "make_partial"]),
        ((S0,), (S0,), []),
    ],
)
def test_one_mesh_dim(src: tuple, dst: tuple, expected: list[str]) -> None:
    assert kinds((4,), src, dst) == expected


def test_two_mesh_dims_slice_first_gather_last() -> None:
    assert kinds((2, 2), (S0, R), (R, S1)) == ["slice", "all_gather"]
    assert kinds((2, 2), (S0, S1), (R, R)) == ["all_gather", "all_gather"]
    assert kinds((2, 2), (S0, S1), (S1, S0)) == ["transfer"]  # both dims move at once


def test_nested_and_uneven_moves_are_one_transfer() -> None:
    assert kinds((2, 2), (S0, R), (R, S0)) == ["transfer"]
    assert kinds((2, 2), (S0, S0), (S0, R)) == ["transfer"]
    uneven = Layout.with_bounds((4,), (S0,), (8, 6), [(0, 0, 5, 7, 8), None])
    balanced = Layout.balanced((4,), (S0,), (8, 6))
    assert [s[0] for s in plan_redistribution(uneven, balanced, True)] == ["transfer"]


def test_transfer_moves_only_misplaced_rows() -> None:
    """Uneven (0, 5, 7, 8) to balanced (2, 2, 2, 2) rows: rank 1 keeps rows 2-4 and
    sends rows 0-1 to rank 0 and rows 4-5 to rank 2; nobody sends what it keeps."""
    uneven = Layout.with_bounds((4,), (S0,), (8, 6), [(0, 0, 5, 7, 8), None])
    balanced = Layout.balanced((4,), (S0,), (8, 6))
    ranks = (0, 1, 2, 3)
    sends, _ = transfer_plan(uneven, balanced, ranks, ranks, 1)
    rows = {dest: (index[0].start, index[0].stop) for dest, index in sends}
    assert rows == {0: (0, 2), 1: (2, 4), 2: (4, 5)}
    _, receives = transfer_plan(uneven, balanced, ranks, ranks, 0)
    assert [(src, (i[0].start, i[0].stop)) for src, i in receives] == [(1, (0, 2))]


def test_replicated_sources_share_the_load() -> None:
    """(R,) to (S(0),) on another mesh over the same ranks: each rank keeps its own rows."""
    line = Layout.balanced((4,), (R,), (8, 2))
    square = Layout.balanced((2, 2), (S0, S1), (8, 2))
    for me in range(4):
        sends, receives = transfer_plan(line, square, (0, 1, 2, 3), (0, 1, 2, 3), me)
        assert [dest for dest, _ in sends] == [me]
        assert [src for src, _ in receives] == [me]
    # Nothing crosses ranks: every rank knows it from the layouts, and none makes the Alltoallv.
    assert not transfer_crosses(line, square, (0, 1, 2, 3), (0, 1, 2, 3))
    assert transfer_crosses(line, square, (0, 1, 2, 3), (3, 2, 1, 0)) is False
    split = Layout.balanced((4,), (S0,), (8, 2))
    assert transfer_crosses(split, split, (0, 1, 2, 3), (1, 0, 2, 3))
