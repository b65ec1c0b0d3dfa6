"""Placements and block layouts: pure values and arithmetic, checked in one process."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.core.layout import Layout, balanced_bounds
from dmesh.core.placement import normalize_placements, shorts


def test_placements_are_values_with_round_trip_reprs() -> None:
    for p in (Shard(0), Shard(-1), Replicate(), Partial(), Partial("max")):
        assert eval(repr(p), {"Shard": Shard, "Replicate": Replicate, "Partial": Partial}) == p
        assert hash(p) == hash(eval(repr(p), vars(dmesh)))
    assert repr(Shard(2)) == "Shard(2)"
    assert repr(Partial("avg")) == "Partial('avg')"
    assert Shard(1).is_shard()
    assert Shard(1).is_shard(1)
    assert not Shard(1).is_shard(0)
    assert Replicate().is_replicate()
    assert Partial().is_partial()
    assert not Replicate().is_shard()
    assert shorts((Shard(0), Replicate(), Partial("max"))) == "(S(0), R, P(max))"
    assert len({Shard(0), Shard(0), Replicate(), Replicate()}) == 2
    with pytest.raises(AttributeError):
        Shard(0).dim = 1  # type: ignore[misc]


def test_placement_validation() -> None:
    with pytest.raises(ValueError, match="did you mean 'max'"):
        Partial("maxx")
    with pytest.raises(ValueError, match="bitwise"):
        Partial("band")
    with pytest.raises(TypeError, match="int"):
        Shard(0.5)  # type: ignore[arg-type]
    assert normalize_placements([Shard(-1), Replicate()], 2, 3) == (Shard(2), Replicate())
    assert normalize_placements(Shard(0), 1, 1) == (Shard(0),)
    with pytest.raises(ValueError, match="one placement per mesh dimension"):
        normalize_placements([Shard(0)], 2, 2)
    with pytest.raises(ValueError, match=r"Shard\(3\): dim out of range"):
        normalize_placements([Shard(3)], 1, 2)
    with pytest.raises(TypeError, match="placements"):
        normalize_placements(["S0"], 1, 2)


def test_nested_balanced_bounds() -> None:
    # 10 rows over mesh dims (2, 3): split in 2 (5, 5), then each in 3 (2, 2, 1).
    assert balanced_bounds(10, (2, 3)) == (0, 2, 4, 5, 7, 9, 10)
    assert balanced_bounds(10, (6,)) == (0, 2, 4, 6, 8, 9, 10)
    assert balanced_bounds(2, (4,)) == (0, 1, 2, 2, 2)  # empty blocks at the end
    layout = Layout.balanced((2, 3), (Shard(0), Shard(0)), (10, 4))
    assert layout.local_shape((1, 2)) == (1, 4)
    assert layout.offsets((1, 0)) == (5, 0)
    assert layout.block_number((1, 2), 0) == 5


@pytest.mark.parametrize("mesh", [(1,), (3,), (2, 2), (2, 3), (1, 4)])
@pytest.mark.parametrize("shape", [(), (5,), (3, 7), (2, 0, 3)])
def test_blocks_tile_the_array(mesh: tuple[int, ...], shape: tuple[int, ...]) -> None:
    """For every placement, the distinct blocks cover each element exactly once."""
    choices = [Replicate()] + [Shard(d) for d in range(len(shape))]

    for placements in itertools.product(choices, repeat=len(mesh)):
        layout = Layout.balanced(mesh, placements, shape)
        count = np.zeros(shape, dtype=int)
        for block in {layout.block(c) for c in np.ndindex(*mesh)}:
            count[tuple(slice(a, b) for a, b in block)] += 1
        assert (count == 1).all(), placements
        assert layout.is_balanced


def test_explicit_bounds_are_checked() -> None:
    layout = Layout.with_bounds((3,), (Shard(1),), (2, 6), [None, (0, 0, 5, 6)])
    assert layout.sizes(1) == (0, 5, 1)
    assert not layout.is_balanced
    with pytest.raises(ValueError, match="4 non-decreasing offsets from 0 to 6"):
        Layout.with_bounds((3,), (Shard(1),), (2, 6), [None, (0, 4, 3, 6)])
    with pytest.raises(ValueError, match="not sharded"):
        Layout.with_bounds((3,), (Shard(1),), (2, 6), [(0, 2), (0, 2, 4, 6)])
