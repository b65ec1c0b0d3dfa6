"""The halo formulas of ``dmesh.scaling.halo`` against ``CommMode``'s records and ``np.pad``.

On every 1-D and 2-D mesh of the world size: ``dmesh.halo`` (eager and
``async_op=True``) and ``dmesh.map_overlap`` (trimmed and not) of 2-D arrays
sharded along one dim, along both, and along one dim over both mesh dims,
with zero and periodic boundaries and symmetric and one-sided widths. The
shapes give even, uneven and empty blocks at 1-4 ranks; a case whose blocks
are thinner than the width must raise in dmesh and in the formula alike.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
import pytest
from traffic_checks import check_traffic, recorded

import dmesh
from dmesh import Replicate, Shard
from dmesh.core.placement import Placement
from dmesh.scaling.halo import halo_exchange, halo_widths, map_overlap
from helpers import Verdict

# 8 rows split evenly at 1, 2 and 4 ranks, 5 unevenly, 3 leave an empty block at 4.
CASES = [((8, 6), np.float64), ((5, 4), np.int32), ((3, 5), np.complex128)]
WIDTHS = [1, ((1, 0), (0, 2)), 2]


def layouts(mesh_ndim: int) -> list[tuple[Placement, ...]]:
    if mesh_ndim == 1:
        return [(Shard(0),), (Shard(1),), (Replicate(),)]
    return [(Shard(0), Shard(1)), (Shard(1), Shard(0)), (Replicate(), Shard(0)),
            (Shard(0), Shard(0))]  # fmt: skip


def padded_block(full: np.ndarray, a: dmesh.DArray, widths: tuple[tuple[int, int], ...],
                 periodic: bool) -> np.ndarray:  # fmt: skip
    """``np.pad`` of the whole array, cut to this rank's padded block."""
    padded = np.pad(full, widths, mode="wrap" if periodic else "constant")
    block = a.spec.layout.block(a.mesh.coordinate)
    return padded[tuple(slice(lo, hi + b + e) for (lo, hi), (b, e) in zip(block, widths))]


def exchanged(a: dmesh.DArray, width: Any, periodic: bool, async_op: bool) -> Any:
    """``dmesh.halo``'s padded block, waited for when asynchronous."""
    out = dmesh.halo(a, width, periodic=periodic, async_op=async_op)
    return out.wait() if async_op else out


def test_halo(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        for (shape, dtype), placements in itertools.product(CASES, layouts(m.ndim)):
            full = (np.arange(1, 1 + np.prod(shape)).reshape(shape)).astype(dtype)
            a = dmesh.distribute(full, m, list(placements))
            s = np.dtype(dtype).itemsize
            for width, periodic, async_op in itertools.product(WIDTHS, (False, True),
                                                               (False, True)):  # fmt: skip
                label = f"halo {shape} {placements} width={width} periodic={periodic}"
                try:
                    predicted = halo_exchange(m.shape, shape, s, placements, width, periodic)
                except ValueError:  # blocks thinner than the width: dmesh raises too
                    with pytest.raises(ValueError, match="must supply"):
                        dmesh.halo(a, width, periodic=periodic)
                    continue

                run = functools.partial(exchanged, a, width, periodic, async_op)
                out, got = recorded(run)
                check_traffic(m, predicted, got, f"{label} async_op={async_op}")
                widths = halo_widths(width, 2)
                v.equal(out, padded_block(full, a, widths, periodic))


def test_map_overlap(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        for (shape, dtype), placements in itertools.product(CASES, layouts(m.ndim)):
            full = (np.arange(1, 1 + np.prod(shape)).reshape(shape)).astype(dtype)
            a = dmesh.distribute(full, m, list(placements))
            s = np.dtype(dtype).itemsize
            # A 5-point stencil, NumPy's on the padded whole array.
            padded = np.pad(full, 1, mode="wrap")
            want = (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
                    - 4 * full)  # fmt: skip

            def stencil(b: np.ndarray) -> np.ndarray:
                out = np.zeros_like(b)
                out[1:-1, 1:-1] = (
                    b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:] - 4 * (b[1:-1, 1:-1])
                )
                return out

            for trim in (True, False):
                label = f"map_overlap {shape} {placements} trim={trim}"
                try:
                    predicted = map_overlap(m.shape, shape, s, placements, 1, True, trim)
                except ValueError:
                    with pytest.raises(ValueError, match="must supply"):
                        dmesh.map_overlap(stencil, a, 1, boundary="periodic", trim=trim)
                    continue
                run = functools.partial(dmesh.map_overlap, stencil, a, 1, "periodic", trim=trim)
                out, got = recorded(run)
                check_traffic(m, predicted, got, label)
                if trim:
                    v.equal(out.local, want[a.spec.layout.slices(m.coordinate)])
