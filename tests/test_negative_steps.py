"""Negative steps along sharded dims: NumPy's values, blocks mirrored, nothing gathered.

``a[::-1]`` on a dim that mesh dims shard sends each block, reversed, to the
holder of its mirror block; the boundaries are mirrored, so an uneven layout
stays uneven. Reading and assigning are compared with NumPy on one process.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import Verdict, assert_equal_all, assert_raises_all

R = Replicate()
STEPS_1D = [
    np.s_[::-1], np.s_[::-2], np.s_[7:1:-3], np.s_[2:2:-1], np.s_[::-7], np.s_[-1:-12:-5],
    np.s_[5::-1], np.s_[:3:-1], np.s_[1::-100], np.s_[-2::-4], np.s_[100:-100:-3],
]  # fmt: skip


def placements_of(mesh: dmesh.DeviceMesh, choices: list[object]) -> list[list[object]]:
    return [list(p) for p in itertools.product(choices, repeat=mesh.ndim)]


@pytest.mark.parametrize("n", [0, 1, 3, 10, 11])
def test_negative_steps_1d(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, n: int) -> None:
    """Every step, uneven and empty blocks (3 elements over 4 ranks), a sliced (uneven) input."""
    data = np.arange(n) * 1.5 - 4.0
    with Verdict(comm) as verdict:
        for placements in placements_of(mesh, [R, Shard(0)]):
            a = dmesh.distribute(data, mesh, placements)
            for first in (np.s_[:], np.s_[1:], np.s_[:-2]):
                base, expected_base = a[first], data[first]
                for key in STEPS_1D:
                    got = base[key]
                    full = got.full_array()
                    where = f"{placements} [{first}][{key}]"
                    verdict.equal(full, expected_base[key])
                    verdict.check(got.placements == base.placements, f"{where}: {got.placements}")
                    own = got.spec.layout.slices(mesh.coordinate) if mesh.is_member else ...
                    verdict.equal(got.local, full[own])  # the block is where the layout says


def test_reversal_mirrors_block_boundaries(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``a[::-1]`` of an uneven layout has the mirrored boundaries: no element moves twice."""
    data = np.arange(11.0)
    with Verdict(comm) as verdict:
        for placements in placements_of(mesh, [R, Shard(0)]):
            a = dmesh.distribute(data, mesh, placements)[2:]
            got = a[::-1]
            before, after = a.spec.layout.bounds[0], got.spec.layout.bounds[0]
            mirrored = None if before is None else tuple(9 - b for b in reversed(before))
            verdict.check(after == mirrored, f"{placements}: {before} -> {after}")
            verdict.equal(got.full_array(), data[2:][::-1])


def test_negative_steps_2d(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Both dims, with ints (a Partial result where an int hits a sharded dim), None and ...."""
    data = np.arange(7 * 5, dtype=np.float32).reshape(7, 5) ** 2 - 100
    keys = [
        np.s_[:, ::-1], np.s_[::-1, ::-2], np.s_[5:0:-2, 4:1:-1], np.s_[3, ::-1], np.s_[::-3, 2],
        np.s_[None, ::-1, ..., ::-1], np.s_[..., 1:1:-1], np.s_[-1, -1:-6:-4], np.s_[-2:-8:-1, ::4],
    ]  # fmt: skip
    with Verdict(comm) as verdict:
        for placements in placements_of(mesh, [R, Shard(0), Shard(1)]):
            a = dmesh.distribute(data, mesh, placements)
            for key in keys:
                verdict.equal(a[key].full_array(), data[key])


def test_nested_sharding_keeps_placements(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Two mesh dims sharding one tensor dim: the blocks are mirrored over both, not gathered."""
    data = np.arange(13 * 2).reshape(13, 2)
    placements = [Shard(0)] * mesh.ndim
    a = dmesh.distribute(data, mesh, placements)[1:]
    with dmesh.debug.CommMode() as recorded:
        got = a[::-2]
    counts = recorded.counts()
    with Verdict(comm) as verdict:
        verdict.equal(got.full_array(), data[1:][::-2])
        verdict.check(got.placements == a.placements, f"{got.placements}")
        verdict.check(set(counts) <= {"permute"} and counts.get("permute", 0) <= 1, f"{counts}")
        flipped = np.flip(a, 0)
        verdict.equal(flipped.full_array(), data[1:][::-1])
        verdict.check(flipped.placements == a.placements, f"np.flip: {flipped.placements}")


def test_reversal_moves_each_block_once(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """One permute; each rank receives at most its new block's bytes."""
    data = np.arange(40.0).reshape(20, 2)
    a = dmesh.distribute(data, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    with dmesh.debug.CommMode() as recorded:
        got = a[::-1]
    received = sum(r.received_bytes for r in recorded.records)
    with Verdict(comm) as verdict:
        verdict.check(set(recorded.counts()) <= {"permute"}, f"{recorded.counts()}")
        verdict.check(received <= got.local.nbytes, f"received {received} > {got.local.nbytes}")
        verdict.equal(got.full_array(), data[::-1])


def test_partial_input_stays_partial(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Basic indexing keeps Partial placements; a negative step does too (terms move alike)."""
    row = np.array([1.0, -2.0, np.inf, 4.0, np.nan, 6.0, -7.0, 0.0, -np.inf])
    data = np.stack([row, -3 * row[::-1], np.arange(9.0)])  # integers: any sum order is exact
    data[1, 0] = data[1, -1] = 5.0  # one infinity per column
    sharded: list[object] = [Shard(0)] + [Shard(1)] * (mesh.ndim - 1)
    given: list[object] = [Partial("sum")] + [Shard(0)] * (mesh.ndim - 1)
    inputs = [
        (dmesh.distribute(row, mesh, given), row),
        (np.sum(dmesh.distribute(data, mesh, sharded), axis=0), data.sum(axis=0)),
    ]
    with Verdict(comm) as verdict:
        verdict.check(inputs[0][0].placements[0] == Partial("sum"), "distribute(..., P(sum))")
        for a, expected in inputs:  # the sum is Partial too, unless the mesh has one rank
            for key in (np.s_[::-1], np.s_[5:0:-2], np.s_[::-8], np.s_[-3], np.s_[None, ::-3]):
                got = a[key]
                verdict.check(got.placements[0] == a.placements[0], f"{key}: {got.placements}")
                verdict.equal(got.full_array(), expected[key])


def test_setitem_negative_steps(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``a[::-1] = b`` for scalars, replicated arrays and DArrays of any layout."""
    data = np.arange(9 * 4, dtype=np.int64).reshape(9, 4)
    keys = [np.s_[::-1], np.s_[7:1:-3], np.s_[:, ::-1], np.s_[::-2, 3:0:-1], np.s_[2:2:-1]]
    with Verdict(comm) as verdict:
        for placements in placements_of(mesh, [R, Shard(0), Shard(1)]):
            for key in keys:
                shape = data[key].shape
                value = -(np.arange(int(np.prod(shape))).reshape(shape) + 1)
                sources = [
                    -5,
                    value,
                    value[0] if shape[0] else value,  # broadcast along dim 0
                    dmesh.distribute(value, mesh, [R] * mesh.ndim),
                    dmesh.distribute(value, mesh, placements),
                ]
                for source in sources:
                    a = dmesh.distribute(data, mesh, placements)
                    expected = data.copy()
                    a[key] = source
                    expected[key] = source.full_array() if hasattr(source, "full_array") else source
                    verdict.equal(a.full_array(), expected)
            a = dmesh.distribute(data, mesh, placements)
            a[::-1] = a[::-1] * 2  # the value in the mirrored layout: one permute back
            verdict.equal(a.full_array(), data * 2)
            a = dmesh.distribute(data, mesh, placements)
            a[::-1] = a  # overlapping: NumPy reads the value first
            expected = data.copy()
            expected[::-1] = data.copy()
            verdict.equal(a.full_array(), expected)


def test_fancy_keys_with_negative_steps(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Reading works; assigning through a sharded negative step raises on every rank."""
    data = np.arange(6 * 5.0).reshape(6, 5)
    for placements in placements_of(mesh, [R, Shard(0), Shard(1)]):
        a = dmesh.distribute(data, mesh, placements)
        assert_equal_all(comm, a[::-1, [0, 3]].full_array(), data[::-1, [0, 3]])
        assert_equal_all(comm, a[[4, 0], ::-2].full_array(), data[[4, 0], ::-2])
        if Shard(0) in placements:
            assert_raises_all(
                comm, NotImplementedError, a.__setitem__, (np.s_[::-1], [1, 2]), 0.0,
                match="negative step",
            )  # fmt: skip
        else:
            a[::-1, [1, 2]] = 0.0
            expected = data.copy()
            expected[::-1, [1, 2]] = 0.0
            assert_equal_all(comm, a.full_array(), expected)


def test_bad_steps_and_axes_raise_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A zero step, and np.flip of an axis the array lacks (it used to wrap around)."""
    a = dmesh.distribute(np.arange(5.0), mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    assert_raises_all(comm, ValueError, a.__getitem__, np.s_[::0], match="zero")
    assert_raises_all(comm, np.exceptions.AxisError, np.flip, a, 1)
    assert_raises_all(comm, ValueError, np.flip, a, (0, 0))
