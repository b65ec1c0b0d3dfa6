"""Elementwise ops on shifted slices of one array (stencils) equal NumPy's, and only the
cells that cross ranks travel (issue 28, item 3; ``dmesh.ops.aligned``)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from helpers import assert_all, assert_equal_all

HOSTILE = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -1.5, 2.0**60, -(2.0**-60)])


def layouts(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    return [list(p) for p in itertools.product([Replicate(), Shard(0), Shard(1)], repeat=mesh.ndim)]


def field(shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    rng = np.random.default_rng(28)
    data = rng.standard_normal(shape)
    data.flat[: min(data.size, HOSTILE.size)] = HOSTILE[: data.size]
    return data.astype(dtype)


def stencil(z: Any) -> Any:
    return z[2:, 1:-1] + z[:-2, 1:-1] + z[1:-1, 2:] + z[1:-1, :-2] - 4 * z[1:-1, 1:-1]


def life_neighbours(z: Any) -> Any:
    return (
        z[0:-2, 0:-2] + z[0:-2, 1:-1] + z[0:-2, 2:] + z[1:-1, 0:-2] + z[1:-1, 2:]
        + z[2:, 0:-2] + z[2:, 1:-1] + z[2:, 2:]
    )  # fmt: skip


def test_stencils_match_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    # 9 x 7 cut into uneven blocks; at 3-4 ranks some blocks of the slices are empty.
    for shape in [(9, 7), (4, 5), (3, 3)]:
        data = field(shape)
        cells = (data > 0).astype(np.int64)
        for placements in layouts(mesh):
            z = dmesh.distribute(data, mesh, placements)
            assert_equal_all(comm, stencil(z).full_array(), stencil(data))
            assert_equal_all(comm, (z[1:] - z[:-1]).full_array(), data[1:] - data[:-1])
            assert_equal_all(
                comm, np.maximum(z[2:], z[:-2]).full_array(), np.maximum(data[2:], data[:-2])
            )
            c = dmesh.distribute(cells, mesh, placements)
            assert_equal_all(comm, life_neighbours(c).full_array(), life_neighbours(cells))


def test_large_moves_make_their_buffers_per_call(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exchanges over KEPT_BYTES keep no buffers with the step: each call makes its own
    (forced here with a bound of 0), and repeated calls still equal NumPy."""
    from dmesh.ops import aligned, halo_messages

    monkeypatch.setattr(halo_messages, "KEPT_BYTES", 0)
    aligned._prepared.clear()
    data = field((9, 7))
    for placements in layouts(mesh):
        z = dmesh.distribute(data, mesh, placements)
        for _ in range(2):  # the second call runs the cached step
            assert_equal_all(comm, stencil(z).full_array(), stencil(data))
    kept = [entry[1].kept for entry in aligned._prepared.values() if entry[1] is not None]
    # (a rank that sends and receives nothing keeps its empty message lists)
    moving = [k for k in kept if k is not None and (k.sends or k.receives)]
    assert_all(comm, not moving, "a step kept its buffers")
    aligned._prepared.clear()


def test_mixed_dtypes_scalars_and_broadcasts(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    data = field((8, 6), np.float32)
    ints = np.arange(48, dtype=np.int16).reshape(8, 6)
    row = np.linspace(-1.0, 1.0, 5)
    for placements in layouts(mesh):
        z = dmesh.distribute(data, mesh, placements)
        k = dmesh.distribute(ints, mesh, placements)
        r = dmesh.distribute(row, mesh, [Replicate()] * mesh.ndim)
        got = (z[1:, 1:] * 2.5 + k[:-1, :-1] - r).full_array()
        want = data[1:, 1:] * 2.5 + ints[:-1, :-1] - row
        assert_equal_all(comm, got, want)
        assert_equal_all(comm, (z[2:] > z[:-2]).full_array(), data[2:] > data[:-2])
        assert_equal_all(comm, np.add(k[3:], np.int64(7)).full_array(), ints[3:] + np.int64(7))


@given(
    offsets=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=4),
    ops=st.lists(st.sampled_from(["add", "subtract", "multiply", "fmax"]), min_size=3, max_size=3),
)
def test_generated_shift_combinations(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, offsets: list[tuple[int, int]], ops: list[str]
) -> None:
    data = field((11, 6))
    z = dmesh.distribute(data, mesh, [Shard(0)] + [Shard(1)] * (mesh.ndim - 1))

    def combine(x: Any) -> Any:
        views = [x[a : x.shape[0] - 3 + a, b : x.shape[1] - 3 + b] for a, b in offsets]
        total = views[0]
        for view, name in zip(views[1:], ops):
            total = getattr(np, name)(total, view)
        return total

    assert_equal_all(comm, combine(z).full_array(), combine(data))


def test_only_crossing_cells_travel(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    n = 64
    z = dmesh.distribute(field((n, n)), mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    (z[2:, 1:-1] + z[:-2, 1:-1])  # plan once
    with dmesh.debug.CommMode() as record:
        z[2:, 1:-1] + z[:-2, 1:-1]
    sent = sum(r.sent_bytes for r in record.records)
    # Both operands are cut at most 2 rows from the result's (balanced) cut: each block
    # gives its neighbours at most 2 rows of each operand (62 cells of 8 bytes).
    assert_all(comm, sent <= 2 * 2 * 62 * 8, f"sent {sent} bytes for a 2-row shift")
    assert_all(comm, record.total_count <= 1, f"{record.total_count} collectives")


def _watch_donations(monkeypatch: Any) -> list[bool]:
    """Every block offered for reuse; the returned list records whether a
    piecewise call wrote into a temporary's block."""
    monkeypatch.setattr(dmesh._elision, "ELIDE_BYTES", 0)
    donated: list[bool] = []
    original = dmesh.ops.aligned._donated

    def watched(*args: Any) -> Any:
        block = original(*args)
        donated.append(block is not None)
        return block

    monkeypatch.setattr(dmesh.ops.aligned, "_donated", watched)
    return donated


@given(
    offsets=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=3, max_size=5),
    operators=st.lists(st.sampled_from(["+", "-", "*"]), min_size=4, max_size=4),
)
def test_shifted_sums_into_donated_temporaries(
    comm: MPI.Intracomm,
    mesh: dmesh.DeviceMesh,
    monkeypatch: Any,
    offsets: list[tuple[int, int]],
    operators: list[str],
) -> None:
    # ``(z[..] + z[..]) - z[..] ...`` from source, every block offered for
    # reuse: where a temporary stays in place its block holds the piecewise
    # result (the shifted operands read the base's blocks and crossing cells);
    # the base is never written.
    _watch_donations(monkeypatch)
    terms = [f"z[{a}:{a - 2 or None}, {b}:{b - 2 or None}]" for a, b in offsets]
    text = terms[0]
    for op, term in zip(operators, terms[1:]):
        text = f"({text} {op} {term})"
    code = compile(text, "<stencil>", "eval")
    data = field((13, 7))
    z = dmesh.distribute(data, mesh, [Shard(0)] + [Shard(1)] * (mesh.ndim - 1))
    with np.errstate(all="ignore"):
        want = eval(code, {}, {"z": data})
        for _ in range(2):  # the first call plans, the second may donate
            assert_equal_all(comm, eval(code, {}, {"z": z}).full_array(), want)
    assert_equal_all(comm, z.full_array(), data)


def test_life_neighbours_reuse_their_temporaries(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, monkeypatch: Any
) -> None:
    donated = _watch_donations(monkeypatch)
    code = compile(
        "z[:-2, :-2] + z[:-2, 1:-1] + z[:-2, 2:] + z[1:-1, :-2] + z[1:-1, 2:]"
        " + z[2:, :-2] + z[2:, 1:-1] + z[2:, 2:]",
        "<life>",
        "eval",
    )
    cells = (field((40, 9)) > 0).astype(np.int64)
    z = dmesh.distribute(cells, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    for _ in range(2):
        assert_equal_all(comm, eval(code, {}, {"z": z}).full_array(), life_neighbours(cells))
    assert_equal_all(comm, z.full_array(), cells)
    if mesh.size() > 1:  # (the neighbours' operands are cut where the first's is)
        assert_all(comm, any(donated), "no temporary's block held a piecewise sum")


@given(
    shift=st.tuples(st.integers(-2, 2), st.integers(-2, 2)),
    ufunc=st.sampled_from([np.add, np.subtract, np.multiply, np.fmax]),
    aliased=st.booleans(),
    at=st.integers(-2, 2),
)
def test_out_and_in_place_with_shifted_operands(
    comm: MPI.Intracomm,
    mesh: dmesh.DeviceMesh,
    shift: tuple[int, int],
    ufunc: np.ufunc,
    aliased: bool,
    at: int,
) -> None:
    # np.add(w[1:-1, 1:-1], z[1+i:.., 1+j:..], out=w[1:-1, 1:-1]) and its in-place form,
    # computed in pieces straight into out's block; ``aliased``: w is z, so the shifted
    # operand overlaps out (NumPy reads it as it was before the write); ``at``: out's
    # own rows shifted too (its blocks then are not the balanced cut).
    data = field((12, 7))
    placements = [Shard(0)] + [Shard(1)] * (mesh.ndim - 1)
    z = dmesh.distribute(data, mesh, placements)
    w = z if aliased else dmesh.distribute(data[::-1].copy(), mesh, placements)
    zn = data.copy()
    wn = zn if aliased else data[::-1].copy()
    i, j = shift

    def shifted(x: Any) -> Any:
        return x[2 + i : x.shape[0] - 2 + i, 2 + j : x.shape[1] - 2 + j]

    def centre(x: Any) -> Any:
        return x[2 + at : x.shape[0] - 2 + at, 2:-2]

    with np.errstate(all="ignore"):
        for _ in range(2):  # planned, then from the step cache
            ufunc(centre(wn), shifted(zn), out=centre(wn))
            ufunc(centre(w), shifted(z), out=centre(w))
            assert_equal_all(comm, w.full_array(), wn)
            assert_equal_all(comm, z.full_array(), zn)
        target = centre(w)
        target -= shifted(z)
        target_n = centre(wn)
        target_n -= shifted(zn)
    assert_equal_all(comm, w.full_array(), wn)


def test_in_place_casting_error_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    # ints += shifted floats: NumPy's same_kind casting error, on every rank (ranks whose
    # block of the result is empty included), and the ints unchanged.
    ints = np.arange(12, dtype=np.int64).reshape(6, 2)
    placements = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    k = dmesh.distribute(ints, mesh, placements)
    f = dmesh.distribute(ints * 0.5, mesh, placements)
    target = k[:2]  # 2 rows: at 3-4 ranks some ranks hold none of them
    for _ in range(2):
        with pytest.raises(TypeError):  # (NumPy's UFuncTypeError is one)
            target += f[1:3]
    assert_equal_all(comm, k.full_array(), ints)
