"""dmesh.halo, map_blocks and map_overlap against np.pad and NumPy on one process."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.halo import normalize_widths
from helpers import assert_all, assert_equal_all, assert_raises_all

DATA = np.arange(42.0).reshape(7, 6)


def padded_reference(
    a: dmesh.DArray, data: np.ndarray, width: Any, periodic: Any, mode: str
) -> np.ndarray:
    """np.pad of the global array, cut to this rank's block plus its halo."""
    widths = normalize_widths(width, data.ndim)
    flags = (periodic,) * data.ndim if isinstance(periodic, bool) else periodic
    full = data
    for d in range(data.ndim):
        pad = [(0, 0)] * data.ndim
        pad[d] = widths[d]
        full = np.pad(full, pad, mode="wrap" if flags[d] else mode)
    block = a.spec.layout.block(a.mesh.coordinate)
    return full[tuple(slice(lo, hi + b + e) for (lo, hi), (b, e) in zip(block, widths))]


CASES = [
    (1, False, "constant"),
    (1, True, "constant"),
    ((1, 2), False, "edge"),
    (((0, 1), (2, 1)), (True, False), "edge"),
    ((1, 0), (False, True), "constant"),
    (2, True, "constant"),  # thin periodic blocks at 4 ranks: 7 rows as 2, 2, 2, 1
    (((3, 0), (0, 0)), True, "edge"),
]


def too_thin(a: dmesh.DArray, width: Any, periodic: Any, mode: str) -> bool:
    """Whether some block cannot supply the cells its neighbour's halo needs (halo must raise).

    Along a sharded dim, block ``i`` needs ``before`` cells from the block
    before it and ``after`` from the block after it (across the ends where
    the dim is periodic); ``mode="edge"`` needs a cell at each global edge.
    Along an unsharded dim, a periodic width cannot exceed the dim.
    """
    widths = normalize_widths(width, a.ndim)
    flags = (periodic,) * a.ndim if isinstance(periodic, bool) else periodic
    for d, ((before, after), wrap) in enumerate(zip(widths, flags)):
        cut = a.spec.layout.bounds[d]
        sizes = [a.shape[d]] if cut is None else [hi - lo for lo, hi in itertools.pairwise(cut)]
        k = len(sizes)
        if k == 1 and wrap and max(before, after) > sizes[0]:
            return True
        for i in range(k) if k > 1 else ():
            previous = i - 1 if i > 0 else (k - 1 if wrap else None)
            following = i + 1 if i < k - 1 else (0 if wrap else None)
            if before and previous is not None and sizes[previous] < before:
                return True
            if after and following is not None and sizes[following] < after:
                return True
        edge_cells = (sizes[0], sizes[-1])
        if mode == "edge" and not wrap and (before or after) and 0 in edge_cells:
            return True
    return False


@pytest.mark.parametrize("async_op", [False, True])
def test_halo_matches_np_pad(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, async_op: bool) -> None:
    # Uneven blocks (7 and 6 cells on 2-4 blocks), corners on the (2, 2) mesh,
    # nested sharding (Shard(0) on both mesh dims), widths of 0, 1 and 2.
    for placements in itertools.product([Replicate(), Shard(0), Shard(1)], repeat=mesh.ndim):
        a = dmesh.distribute(DATA, mesh, list(placements))
        for width, periodic, mode in CASES:
            if too_thin(a, width, periodic, mode):  # raised on every rank, before any message
                assert_raises_all(
                    comm, dmesh.ArgumentError, dmesh.halo, a, width,
                    periodic=periodic, mode=mode, async_op=async_op,
                )  # fmt: skip
                continue
            got = dmesh.halo(a, width, periodic=periodic, mode=mode, async_op=async_op)
            if async_op:
                assert_equal_all(comm, got.interior, a.local)
                got = got.wait()
            want = padded_reference(a, DATA, width, periodic, mode)
            assert_equal_all(comm, got, want)


def test_periodic_halo_on_thin_blocks_raises(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    # Two rows wrap from the other end, but at 2-4 ranks a block holds one row
    # (or none): halo must raise on every rank instead of sending cells it lacks.
    a = dmesh.distribute(np.zeros((3, 2)), mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    width = ((2, 0), (0, 0))
    assert too_thin(a, width, True, "constant") == (mesh.shape[0] > 1)
    if mesh.shape[0] > 1:
        assert_raises_all(comm, dmesh.ArgumentError, dmesh.halo, a, width, periodic=True)
    else:
        got = dmesh.halo(a, width, periodic=True)
        assert_equal_all(comm, got, padded_reference(a, np.zeros((3, 2)), width, True, "constant"))


def test_halo_3d_corners_and_partial(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    data = np.arange(4 * 5 * 6, dtype=np.int64).reshape(4, 5, 6)
    placements = [Shard(2), Shard(0)][: mesh.ndim]
    a = dmesh.distribute(data, mesh, placements)
    got = dmesh.halo(a, 1, periodic=True)
    assert_equal_all(comm, got, padded_reference(a, data, 1, True, "constant"))
    partial = dmesh.distribute(data, mesh, [Partial("sum")] + [Shard(1)] * (mesh.ndim - 1))
    got = dmesh.halo(partial, (1, 0, 2), mode="edge")
    reduced = partial.reduce_partials()
    assert_equal_all(comm, got, padded_reference(reduced, data, (1, 0, 2), False, "edge"))
    got = dmesh.halo(a, 1, constant_values=-7)
    block = a.spec.layout.block(a.mesh.coordinate)
    full = np.pad(data, 1, constant_values=-7)
    want = full[tuple(slice(lo, hi + 2) for lo, hi in block)]
    assert_equal_all(comm, got, want)


def test_halo_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(DATA, mesh, [Shard(0)] * mesh.ndim)
    assert_raises_all(comm, ValueError, dmesh.halo, a, 1, mode="reflect", match="mode")
    assert_raises_all(comm, ValueError, dmesh.halo, a, (1, 2, 3), match="entries")
    assert_raises_all(comm, ValueError, dmesh.halo, a, -1, match="non-negative")
    assert_raises_all(comm, TypeError, dmesh.halo, a, 1.5, match="ints")
    if mesh.size() > 1:
        # 7 rows on 2-4 blocks: a block holds 1-4 rows, fewer than 5.
        assert_raises_all(comm, ValueError, dmesh.halo, a, 5, match="supply")
    tiny = dmesh.distribute(np.arange(3.0), mesh, [Shard(0)] * mesh.ndim)
    if mesh.size() > 3:  # an empty block cannot supply a cell
        assert_raises_all(comm, ValueError, dmesh.halo, tiny, 1, periodic=True, match="supply")
    assert_equal_all(comm, dmesh.halo(tiny, 0), tiny.local)


def laplacian(padded: np.ndarray) -> np.ndarray:
    out = np.zeros_like(padded)
    out[1:-1, 1:-1] = (
        padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
        - 4 * padded[1:-1, 1:-1]
    )  # fmt: skip
    return out


@pytest.mark.parametrize("boundary", ["periodic", "constant", "edge", 2.5])
def test_map_overlap_stencil(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, boundary: Any) -> None:
    mode = {"periodic": "wrap", "constant": "constant", "edge": "edge"}.get(str(boundary))
    if mode is None:
        want = laplacian(np.pad(DATA, 1, constant_values=boundary))[1:-1, 1:-1]
    else:
        want = laplacian(np.pad(DATA, 1, mode=mode))[1:-1, 1:-1]
    for placements in ([Shard(0)] * mesh.ndim, [Shard(1), Shard(0)][: mesh.ndim]):
        a = dmesh.distribute(DATA, mesh, placements)
        got = dmesh.map_overlap(laplacian, a, 1, boundary=boundary)
        assert_all(comm, got.spec.layout == a.spec.layout, "the layout changed")
        assert_equal_all(comm, got.full_array(), want)


def test_map_overlap_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(DATA, mesh, [Shard(0)] * mesh.ndim)
    rank = comm.Get_rank()

    def wrong_on_last_rank(padded: np.ndarray) -> np.ndarray:
        return padded[1:] if rank == comm.Get_size() - 1 else padded

    assert_raises_all(comm, ValueError, dmesh.map_overlap, wrong_on_last_rank, a, 1, match="shape")
    assert_raises_all(comm, ValueError, dmesh.map_overlap, np.copy, a, 1, "reflect")
    assert_raises_all(comm, TypeError, dmesh.map_overlap, np.copy, a, 1, [1])


def test_map_blocks(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(DATA, mesh, [Shard(0)] * mesh.ndim)
    b = dmesh.distribute(DATA * 2, mesh, [Shard(0)] * mesh.ndim)
    got = dmesh.map_blocks(lambda x, y, k: x * y + k, a, b, 1.0)
    assert_equal_all(comm, got.full_array(), DATA * DATA * 2 + 1.0)
    assert_all(comm, got.placements == a.placements, "placements")
    # A block-shaped change: each rank keeps the first column of its block.
    col = dmesh.distribute(DATA, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    firsts = dmesh.map_blocks(lambda x: x[:, :1] * 10, col)
    assert_equal_all(comm, firsts.full_array(), DATA[:, :1] * 10)
    summed = dmesh.map_blocks(
        lambda x: x.sum(axis=0, keepdims=True), col, placements=[Partial("sum")] * mesh.ndim
    )
    scale = mesh.size() // mesh.shape[0]  # replicated copies along the other mesh dim
    assert_equal_all(comm, summed.full_array(), DATA.sum(axis=0, keepdims=True) * scale)
    assert_raises_all(comm, TypeError, dmesh.map_blocks, np.copy, DATA, match="DArray")
