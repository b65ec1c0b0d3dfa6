"""DArray: distribute / full_array, redistribution between any placements, from_local,
rebalance, on 1-D and 2-D meshes (including meshes over part of the ranks)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.core.layout import Layout, sharding_mesh_dims
from helpers import Verdict, assert_all, assert_equal_all, assert_raises_all

WORLD = MPI.COMM_WORLD.Get_size()


def mesh_shapes() -> list[tuple[int, ...]]:
    """(1,), (2,), (3,), (4,), (2, 2) and (1, 4) where the rank count allows."""
    shapes = [(n,) for n in (1, 2, 3, 4) if n <= WORLD]
    if WORLD >= 4:
        shapes += [(2, 2), (1, 4)]
    return shapes


@pytest.fixture(params=mesh_shapes(), ids=lambda s: "x".join(map(str, s)))
def mesh(request: pytest.FixtureRequest, comm: MPI.Intracomm) -> Iterator[dmesh.DeviceMesh]:
    with dmesh.init_mesh(request.param, comm=comm) as m:
        yield m


def global_array(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """Small integer values, so that partial reductions (sum, avg, max) are exact."""
    values = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) % 7 + 1
    return values.astype(dtype)


def placement_choices(ndim: int, partial: bool) -> list[object]:
    choices: list[object] = [Replicate()] + [Shard(d) for d in range(ndim)]
    return [*choices, Partial("sum"), Partial("max")] if partial else choices


def check_full(
    comm: MPI.Intracomm, d: dmesh.DArray, expected: np.ndarray, verdict: Verdict | None = None
) -> None:
    """``full_array()`` is ``expected``: agreed at once, or recorded in ``verdict``."""
    full = d.full_array()
    check = verdict or Verdict(comm)
    if d.mesh.is_member:
        check.equal(full, expected)
    else:  # non-members hold empty blocks and never communicate
        check.check(full.shape == d.shape, f"non-member full_array shape {full.shape}")
    if verdict is None:
        check.agree()


def check_block(
    comm: MPI.Intracomm, d: dmesh.DArray, expected: np.ndarray, verdict: Verdict | None = None
) -> None:
    """This rank's block is its part of ``expected`` (empty on a non-member).

    Agreed at once, or recorded in ``verdict`` (then this communicates nothing).
    """
    coord = d.mesh.coordinate
    block = expected[d.spec.layout.slices(coord)] if coord is not None else None
    if block is None:  # a non-member: an empty block (0-d arrays cannot be empty)
        ok = d.to_local().shape == d.spec.local_shape() and (d.ndim == 0 or d.to_local().size == 0)
    else:
        ok = np.array_equal(d.to_local(), block)
    ok = ok and d.to_local().dtype == expected.dtype
    message = f"{d.spec}: block {d.to_local()!r} differs from {block!r}"
    if verdict is None:
        assert_all(comm, ok, message)
    else:
        verdict.check(ok, message)


SHAPES = [(), (5,), (3, 4), (1, 7), (2, 3, 5), (2, 1, 3, 2)]


@pytest.mark.parametrize("shape", SHAPES)
def test_distribute_then_full_array_is_exact(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: tuple[int, ...]
) -> None:
    with Verdict(comm) as verdict:
        for dtype in (np.float64, np.int32, np.bool_, np.complex64):
            a = global_array(shape, dtype)
            choices = placement_choices(len(shape), True)
            for placements in itertools.product(choices, repeat=mesh.ndim):
                if dtype == np.complex64 and Partial("max") in placements:
                    continue  # complex numbers are unordered: an error, tested below
                d = dmesh.distribute(a, mesh, list(placements))
                check_full(comm, d, a, verdict)
                if not any(p.is_partial() for p in placements):
                    check_block(comm, d, a, verdict)


def uneven_source(a: np.ndarray, mesh: dmesh.DeviceMesh, placements: tuple) -> dmesh.DArray:
    """``a`` with uneven blocks (the first block of each sharded dim is empty, the second
    holds the most), made with from_local, which must find those boundaries again."""
    bounds = []
    for d, n in enumerate(a.shape):
        mesh_dims = sharding_mesh_dims(placements, d)
        if not mesh_dims:
            bounds.append(None)
            continue
        blocks = int(np.prod([mesh.shape[m] for m in mesh_dims]))
        sizes = [0] + [n - n // 2] + [0] * max(0, blocks - 2) if blocks > 1 else [n]
        sizes = sizes[:blocks]
        sizes[-1] += n - sum(sizes)
        bounds.append(tuple(np.cumsum([0, *sizes])))
    layout = Layout.with_bounds(mesh.shape, placements, a.shape, bounds)
    coord = mesh.coordinate
    block = a[layout.slices(coord)] if coord is not None else a[(slice(0, 0),) * a.ndim]
    d = dmesh.from_local(np.ascontiguousarray(block), mesh, list(placements))
    assert d.spec.layout == layout or coord is None
    return d


@pytest.mark.parametrize(
    ("shape", "dtypes"),
    [
        ((), (np.float64,)),
        ((5,), (np.float64, np.int16)),
        ((3, 4), (np.float64, np.complex64, np.bool_)),
        ((1, 7), (np.float64,)),
        ((2, 3, 2), (np.float64,)),
        ((2, 1, 3, 2), (np.int32,)),
    ],
)
def test_redistribute_every_pair(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: tuple[int, ...], dtypes: tuple
) -> None:
    """Every source (balanced, uneven, partial) to every target placement, against NumPy."""
    for dtype in dtypes:
        check_every_pair(comm, mesh, global_array(shape, dtype))


def check_every_pair(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, a: np.ndarray) -> None:
    partial = a.dtype.kind != "c"  # Partial("max") of complex data is an error
    sources = list(itertools.product(placement_choices(a.ndim, partial), repeat=mesh.ndim))
    targets = list(itertools.product(placement_choices(a.ndim, False), repeat=mesh.ndim))
    targets += [(Partial("sum"),) * mesh.ndim]
    made = [dmesh.distribute(a, mesh, list(src)) for src in sources]
    made += [
        uneven_source(a, mesh, src)
        for src in sources
        if any(p.is_shard() for p in src) and not any(p.is_partial() for p in src)
    ]
    with Verdict(comm) as verdict:  # one agreement for the ~2000 moves of a 2-D mesh
        for d in made:
            for dst in targets:
                moved = d.redistribute(mesh, list(dst))
                verdict.check(moved.placements == tuple(dst), f"{d.spec} -> {dst}: {moved.spec}")
                if not any(p.is_partial() for p in dst):
                    check_block(comm, moved, a, verdict)
                check_full(comm, moved, a, verdict)


def test_redistribute_keeps_dtype_and_empty_blocks(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    for dtype in (np.int8, np.bool_, np.complex128, np.float16):
        a = global_array((2, 3), dtype)  # fewer rows than ranks: empty blocks
        d = dmesh.distribute(a, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
        e = d.redistribute(mesh, [Shard(1)] + [Shard(0)] * (mesh.ndim - 1))
        assert_all(comm, e.dtype == a.dtype and e.local.dtype == a.dtype)
        check_full(comm, e, a)


def test_distribute_from_one_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    if mesh.size() != WORLD:  # the same decision on every rank
        pytest.skip("src is a rank of the mesh: every rank must be a member here")
    nranks = mesh.size()
    with Verdict(comm) as verdict:
        for shape in [(), (4,), (5, 3), (2, 3, 4)]:
            a = global_array(shape, np.float64)
            for src in {0, nranks - 1}:
                for placements in itertools.product(
                    placement_choices(len(shape), True), repeat=mesh.ndim
                ):
                    mine = a if mesh.rank == src else None
                    d = dmesh.distribute(mine, mesh, list(placements), src=src)
                    check_full(comm, d, a, verdict)


def test_from_local_uneven_blocks_and_rebalance(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    if mesh.size() != WORLD or mesh.ndim != 1:
        pytest.skip("a 1-D mesh over every rank")
    n, rank = mesh.size(), mesh.rank
    lengths = [(r * 2) % 3 for r in range(n)]  # 0, 2, 1, 0: uneven and empty
    offsets = np.cumsum([0, *lengths])
    a = global_array((int(offsets[-1]), 3), np.int64)
    d = dmesh.from_local(a[offsets[rank] : offsets[rank + 1]], mesh, [Shard(0)])
    assert_all(comm, (d.shape == a.shape and not d.spec.layout.is_balanced) or n == 1)
    check_full(comm, d, a)
    balanced = d.rebalance()
    assert_all(comm, balanced.spec.layout.is_balanced)
    expected = np.array_split(a, n)[rank]
    assert_equal_all(comm, balanced.local, expected)
    for target in ([Shard(1)], [Replicate()]):
        check_full(comm, d.redistribute(mesh, target), a)


def test_redistribute_between_meshes_over_the_same_ranks(comm: MPI.Intracomm) -> None:
    if WORLD != 4:
        pytest.skip("needs 4 ranks for (4,) and (2, 2)")
    a = global_array((6, 5), np.float64)
    with dmesh.init_mesh((4,), comm=comm) as line, dmesh.init_mesh((2, 2), comm=comm) as square:
        d = dmesh.distribute(a, line, [Shard(0)])
        for placements in (
            [Shard(0), Shard(1)],
            [Shard(1), Replicate()],
            [Replicate(), Replicate()],
        ):
            e = d.redistribute(square, placements)
            check_block(comm, e, a)
            check_block(comm, e.redistribute(line, [Shard(1)]), a)


def test_bad_input_raises_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = np.ones((3, 4))
    k = mesh.ndim
    assert_raises_all(comm, ValueError, dmesh.distribute, a, mesh, [Shard(2)] * k, match="Shard")
    assert_raises_all(comm, ValueError, dmesh.distribute, a, mesh, [Shard(0)] * (k + 1))
    assert_raises_all(comm, ValueError, Partial, "median")
    assert_raises_all(comm, TypeError, dmesh.distribute, a, mesh, "S0")
    if mesh.size() == WORLD:
        block = np.ones((mesh.rank + 1, 4))  # never the balanced block on every rank
        bad = (mesh.size() + 5, 4)
        assert_raises_all(
            comm,
            ValueError,
            dmesh.from_local,
            block,
            mesh,
            [Shard(0)] + [Replicate()] * (k - 1),
            shape=bad,
        )


def test_distribute_from_src_on_the_default_mesh(comm: MPI.Intracomm) -> None:
    a = global_array((5, 2), np.int64)
    d = dmesh.distribute(a if MPI.COMM_WORLD.Get_rank() == 0 else None, src=0)
    assert_all(comm, d.placements == (Shard(0),))
    check_full(comm, d, a)


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
def test_redistributed_array_never_shares_the_source_block(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, op: str
) -> None:
    """R -> P(max/min/avg) keeps each block as its term: it must still be a new array.

    (``b = a.redistribute(mesh, [Partial("max")]); b += 1`` changed ``a`` too.)
    """
    x = np.arange(6.0)
    a = dmesh.distribute(x, mesh, [Replicate()] * mesh.ndim)
    b = a.redistribute(mesh, [Partial(op)] + [Replicate()] * (mesh.ndim - 1))
    ok = not np.shares_memory(a.local, b.local)
    b.local[...] = -1.0
    full = a.full_array()
    if mesh.is_member:  # (ranks outside a smaller mesh hold no data)
        ok = ok and np.array_equal(full, x)
    assert_all(comm, ok, "a redistributed block shares the source's memory")
