"""Reshapes whose blocks do not fit a view move only what must move (issue 14 follow-up).

``np.reshape``/``ravel``/``squeeze``/``expand_dims`` of DArrays: NumPy's values
bit for bit at 1-4 ranks and on the (2, 2) mesh, for balanced, uneven and
empty blocks, every placement (Partial stays partial), and never a gather:
the bytes each rank receives stay below what an all-gather would bring.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from helpers import BitVerdict, Verdict, assert_all, assert_raises_all, hostile_values

# (source shape, target shape): views, splits, merges, and reshapes that cut rows.
RESHAPES = [
    ((6, 4), (4, 6)),
    ((6, 4), (24,)),
    ((6, 4), (2, 3, 4)),
    ((6, 4), (3, 8)),
    ((6, 4), (8, 3)),
    ((12,), (3, 4)),
    ((12,), (4, 3)),
    ((12,), (2, 2, 3)),
    ((3, 4), (12,)),
    ((3, 4), (2, 6)),
    ((2, 3, 4), (4, 6)),
    ((2, 3, 4), (6, 4)),
    ((2, 3, 4), (24,)),
    ((2, 3, 4), (3, 2, 4)),
    ((1, 12), (3, 4)),
    ((12, 1), (1, 12)),
    ((5, 7), (7, 5)),
    ((5, 7), (35, 1)),
    ((7,), (7, 1, 1)),
    ((1,), ()),
]


def _layouts(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[Any]]:
    """Every Shard/Replicate combination over the mesh dims, and one Partial."""
    choices: list[Any] = [Replicate()] + [Shard(d) for d in range(ndim)]
    out = [list(p) for p in itertools.product(choices, repeat=mesh.ndim)]
    return [*out, [Partial("sum")] + [Shard(0) if ndim else Replicate()] * (mesh.ndim - 1)]


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def _check(verdict: BitVerdict, a: dmesh.DArray, x: np.ndarray, shape: Any, label: str) -> None:
    got = np.reshape(a, shape)
    want = np.reshape(x, shape)
    full = got.full_array()
    verdict.check(_same_bits(full, want), f"{label} -> {shape}: {full!r} != {want!r}")
    verdict.check(got.spec.local_shape() == got.local.shape, f"{label}: block {got.spec}")
    verdict.bits(label, full)


def test_reshapes_balanced(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for old, new in RESHAPES:
            x = hostile_values(old)
            for placements in _layouts(mesh, len(old)):
                a = dmesh.distribute(x, mesh, placements)
                _check(verdict, a, x, new, f"{old} {placements}")


def test_reshapes_uneven_and_empty_blocks(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Slices give uneven blocks (and empty ones at 4 ranks); a Partial input stays partial."""
    cases = [((7, 4), (slice(1, None),), (4, 6)), ((7, 4), (slice(1, None),), (3, 8)),
             ((6, 5), (slice(None), slice(1, None)), (4, 6)), ((13,), (slice(1, None),), (3, 4)),
             ((4, 4), (slice(1, None),), (12,)), ((13,), (slice(0, 12),), (2, 2, 3)),
             ((3, 5), (slice(None), slice(1, None)), (12,)), ((8, 3), (slice(6, None),), (3, 2)),
             ((8, 3), (slice(7, None),), (3,))]  # fmt: skip
    with BitVerdict(comm) as verdict:
        for big, key, new in cases:
            x = hostile_values(big)
            for placements in _layouts(mesh, len(big)):
                a = dmesh.distribute(x, mesh, placements)[key]
                _check(verdict, a, x[key], new, f"{big}[{key}] {placements}")


def test_int_and_complexhostile_values(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        for dtype in (np.int64, np.int8, np.complex128, np.bool_):
            x = hostile_values((6, 4), dtype)
            for placements in ([Shard(0), *rest], [Shard(1), *rest]):
                a = dmesh.distribute(x, mesh, placements)
                for new in ((4, 6), (3, 8), (24,)):
                    _check(verdict, a, x, new, f"{dtype.__name__} {placements}")


def test_partial_stays_partial(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Reshaping is linear: the terms move with their blocks and are not reduced."""
    x = hostile_values((6, 4))
    shards = [Shard(1)] * (mesh.ndim - 1)
    with Verdict(comm) as verdict:
        for op in ("sum", "max"):
            a = dmesh.distribute(x, mesh, [Partial(op), *shards])
            for new in ((4, 6), (24,), (3, 8)):
                got = np.reshape(a, new)
                verdict.check(got.placements[0] == Partial(op), f"{op} {new}: {got.placements}")
                verdict.check(_same_bits(got.full_array(), x.reshape(new)), f"{op} {new}")


def test_views_move_nothing_and_write_through(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    n = mesh.shape[0]
    x = np.arange(n * 6.0).reshape(n * 2, 3)
    a = dmesh.distribute(x, mesh, [Shard(0), *rest])
    with debug.CommMode() as mode:
        views = [np.reshape(a, (n, 6)), np.ravel(a), np.expand_dims(a, (0, 2)),
                 np.squeeze(np.expand_dims(a, 1)), np.reshape(a, (n * 2, 1, 3, 1))]  # fmt: skip
    assert_all(comm, mode.counts() == {}, f"communicated: {mode.counts()}")
    views[1][...] = -1.0  # a view of each block: a sees it
    assert_all(comm, np.all(a.full_array() == -1.0), "ravel did not write through")


@pytest.mark.parametrize(
    ("old", "new", "dim"),
    [((60, 40), (40, 60), 0), ((60, 40), (40, 60), 1), ((120,), (30, 4), 0),
     ((30, 40), (1200,), 1), ((30, 40), (8, 150), 1), ((13, 40), (40, 13), 0),
     ((2, 3, 40), (40, 6), 2)],
)  # fmt: skip
def test_moves_less_than_a_gather(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, old: Any, new: Any, dim: int
) -> None:
    """Each rank receives less than the whole array, which an all-gather would bring it.

    CommMode counts a rank's result buffers, its own part included: an
    all-to-all's is the rank's new block, an all-gather's the whole array.
    """
    x = hostile_values(old)
    layouts = [[Shard(dim)] + [Replicate()] * (mesh.ndim - 1)]
    if mesh.ndim == 2:
        layouts += [[Shard(dim), Shard(dim)], [Shard(dim), Shard(0)], [Shard(0), Shard(dim)]]
    with Verdict(comm) as verdict:
        for placements in layouts:
            a = dmesh.distribute(x, mesh, placements)
            with debug.CommMode() as mode:
                got = np.reshape(a, new)
            received = sum(r for _, r in mode.bytes().values())
            verdict.check(received < x.nbytes, f"{placements}: {received} of {x.nbytes} B")
            verdict.check("all_gather" not in mode.counts(), f"{placements}: {mode.counts()}")
            verdict.check(_same_bits(got.full_array(), x.reshape(new)), f"{placements}")


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(hostile_values((6, 4)), mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, ArgumentError, np.reshape, a, (5, 5))
    assert_raises_all(comm, UnsupportedError, np.reshape, a, (4, 6), order="F", match="C order")
    assert_raises_all(comm, UnsupportedError, np.ravel, a, order="F", match="C order")
    assert_raises_all(comm, ArgumentError, np.squeeze, a, 0, match="size not equal to one")
