"""The formulas of ``dmesh.scaling.redistribution`` against ``CommMode``'s records and NumPy.

On every 1-D and 2-D mesh of the world size: each transition of
``dmesh.core.plan``'s table (``S->R``, ``R->S``, ``S(i)->S(j)``, ``P->R``,
``P->S``, ``R->P``, ``P(a)->P(b)``), several mesh dims changed one by one,
the general transfer (nested shardings, uneven -> balanced bounds with
``rebalance`` and after slicing, ``with_layout``, partial terms kept), and moves
to another mesh over the same ranks (same shape, another shape, ranks in
reverse order). Shapes give even, uneven and empty blocks at 1-4 ranks; two
item sizes. Every result block is checked against NumPy.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from mpi4py import MPI
from traffic_checks import check_traffic, recorded

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement
from dmesh.core.plan import plan_redistribution
from dmesh.redistribution import run_steps
from dmesh.scaling.redistribution import redistribute
from helpers import Verdict

# 8 rows split evenly at 1, 2 and 4 ranks, 5 unevenly, 3 leave an empty block at 4.
SHAPES = [(8, 6), (5, 4), (3, 5)]
DTYPES = [np.float64, np.int32]

ONE_D = [("S0", "R"), ("S1", "R"), ("R", "S0"), ("R", "S1"), ("S0", "S1"), ("S1", "S0"),
         ("P", "R"), ("P", "S0"), ("P", "S1"), ("R", "P"), ("R", "Pmax"), ("P", "Pmax"),
         ("Pmax", "P"), ("Pmax", "R"), ("S0", "S0")]  # fmt: skip
TWO_D = [
    # one mesh dim at a time
    ("S0 R", "R R"), ("R S1", "R R"), ("R R", "S0 S1"), ("S1 R", "S0 R"), ("R S0", "R S1"),
    ("P R", "R R"), ("R P", "R S1"), ("R R", "P Pmax"), ("P R", "Pmax R"), ("P S0", "P S1"),
    # several mesh dims, and the transfers
    ("S0 S1", "R R"), ("S0 R", "R S0"), ("S0 S0", "R R"), ("P S0", "R R"), ("P P", "R R"),
    ("P P", "S0 S1"), ("S0 S1", "S1 S0"), ("S0 S1", "S0 S0"), ("R S0", "S0 S0"),
    ("S0 S0", "S1 S1"), ("Pmax P", "R S0"), ("P Pmax", "R R"),
]  # fmt: skip
UNEVEN_ONE_D = [("S0", "balanced"), ("S0", "R"), ("S0", "S1"), ("S1", "S0")]
UNEVEN_TWO_D = [("S0 S1", "balanced"), ("S0 S0", "balanced"), ("P S0", "balanced"),
                ("S0 R", "R R"), ("S0 S1", "S1 S0"), ("S1 S0", "R R")]  # fmt: skip


def parse(text: str) -> tuple[Placement, ...]:
    """``"S0 P"`` -> ``(Shard(0), Partial())``; ``"Pmax"`` is ``Partial("max")``."""
    out: list[Placement] = []
    for word in text.split():
        if word == "R":
            out.append(Replicate())
        elif word.startswith("S"):
            out.append(Shard(int(word[1:])))
        else:
            out.append(Partial(word[1:] or "sum"))
    return tuple(out)


def full_of(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    return np.arange(1, 1 + int(np.prod(shape))).reshape(shape).astype(dtype)


def expected_block(full: np.ndarray, out: dmesh.DArray) -> np.ndarray:
    """This rank's block of ``out`` from NumPy."""
    return expected_at(full, out.spec.layout, out.mesh.coordinate)


def expected_at(full: np.ndarray, layout: Layout, coord: tuple[int, ...]) -> np.ndarray:
    """The block at ``coord`` of ``full`` in ``layout``: the value, or a zero term of ``P(sum)``."""
    block = full[layout.slices(coord)]
    zero = any(
        isinstance(p, Partial) and p.op == "sum" and coord[m] > 0
        for m, p in enumerate(layout.placements)
    )
    return np.zeros_like(block) if zero else block


def skewed(n: int, parts: int) -> tuple[int, ...]:
    """Uneven boundaries of ``n`` over ``parts`` blocks, the first ones small or empty."""
    return tuple(round(n * (j / parts) ** 2) for j in range(parts + 1))


def skewed_bounds(mesh_shape: tuple[int, ...], placements: tuple[Placement, ...],
                  shape: tuple[int, ...]) -> list[tuple[int, ...] | None]:  # fmt: skip
    bounds: list[tuple[int, ...] | None] = []
    for d, n in enumerate(shape):
        mesh_dims = sharding_mesh_dims(placements, d)
        parts = int(np.prod([mesh_shape[m] for m in mesh_dims]))
        bounds.append(skewed(n, parts) if mesh_dims else None)
    return bounds


def check_moves(m: dmesh.DeviceMesh, v: Verdict, pairs: Sequence[tuple[str, str]]) -> None:
    """Each ``src -> dst`` of ``pairs`` on every shape and dtype: traffic and values."""
    for (src, dst), shape, dtype in itertools.product(pairs, SHAPES, DTYPES):
        full = full_of(shape, dtype)
        a = dmesh.distribute(full, m, list(parse(src)))
        out, got = recorded(functools.partial(a.redistribute, m, list(parse(dst))))
        s = np.dtype(dtype).itemsize
        predicted = redistribute(m.shape, shape, s, parse(src), parse(dst))
        check_traffic(m, predicted, got, f"{src} -> {dst} {shape} {dtype.__name__}")
        v.equal(out.to_local(), expected_block(full, out))


def test_transitions(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        if m.ndim == 1:
            check_moves(m, v, ONE_D)
        else:
            check_moves(m, v, [(f"{a} R", f"{b} R") for a, b in ONE_D[:6]])
            check_moves(m, v, TWO_D)


def test_uneven(traffic_mesh: dmesh.DeviceMesh) -> None:
    """Skewed source bounds to balanced ones (``rebalance``) and to other placements."""
    m = traffic_mesh
    pairs = UNEVEN_ONE_D if m.ndim == 1 else UNEVEN_TWO_D
    with Verdict(m.comm()) as v:
        for (src, dst), shape, dtype in itertools.product(pairs, SHAPES, DTYPES):
            full, s = full_of(shape, dtype), np.dtype(dtype).itemsize
            placements = parse(src)
            bounds = skewed_bounds(m.shape, placements, shape)
            layout = Layout.with_bounds(m.shape, placements, shape, bounds)
            a = dmesh.distribute(full, m, list(placements)).with_layout(layout)
            if dst == "balanced":
                out, got = recorded(a.rebalance)
                predicted = redistribute(m.shape, shape, s, placements, placements, bounds)
            else:
                out, got = recorded(functools.partial(a.redistribute, m, list(parse(dst))))
                predicted = redistribute(m.shape, shape, s, placements, parse(dst), bounds)
            check_traffic(m, predicted, got, f"{src} {bounds} -> {dst} {dtype.__name__}")
            v.equal(out.to_local(), expected_block(full, out))


def test_with_layout(traffic_mesh: dmesh.DeviceMesh) -> None:
    """Balanced blocks to skewed ones (``with_layout``): a slice, an all_to_all, a transfer."""
    m = traffic_mesh
    pairs = [("R", "S0"), ("S0", "S0"), ("S1", "S0"), ("S0", "S1")]
    if m.ndim == 2:
        pairs = [("R R", "S0 S1"), ("S0 S1", "S0 S1"), ("S0 R", "S0 S0"), ("S0 R", "R S1")]
    with Verdict(m.comm()) as v:
        for (src, dst), shape, dtype in itertools.product(pairs, SHAPES, DTYPES):
            full, s = full_of(shape, dtype), np.dtype(dtype).itemsize
            placements = parse(dst)
            bounds = skewed_bounds(m.shape, placements, shape)
            layout = Layout.with_bounds(m.shape, placements, shape, bounds)
            a = dmesh.distribute(full, m, list(parse(src)))
            out, got = recorded(functools.partial(a.with_layout, layout))
            predicted = redistribute(m.shape, shape, s, parse(src), placements, None, bounds)
            check_traffic(m, predicted, got, f"{src} -> {dst} {bounds} {dtype.__name__}")
            v.equal(out.to_local(), expected_block(full, out))


def test_after_slicing(traffic_mesh: dmesh.DeviceMesh) -> None:
    """``a[2:]`` keeps the cut (shifted, the first blocks shrunk); ``rebalance`` moves it."""
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        for shape, dtype in itertools.product(SHAPES, DTYPES):
            full, s = full_of(shape, dtype), np.dtype(dtype).itemsize
            placements = parse("S0" if m.ndim == 1 else "S0 S1")
            a = dmesh.distribute(full, m, list(placements))[2:]
            balanced = Layout.balanced(m.shape, placements, shape)
            cut = balanced.bounds[0]
            assert cut is not None
            bounds = [tuple(max(0, b - 2) for b in cut), *balanced.bounds[1:]]
            sliced = (shape[0] - 2, *shape[1:])
            out, got = recorded(a.rebalance)
            predicted = redistribute(m.shape, sliced, s, placements, placements, bounds)
            check_traffic(m, predicted, got, f"{shape}[2:] rebalance {dtype.__name__}")
            v.equal(out.to_local(), expected_block(full[2:], out))


def test_shifted_slices_move_only_the_rows_that_cross(comm: MPI.Intracomm) -> None:
    """``z[2:]`` aligned to ``z[:-2]``'s blocks (a stencil): the transfer sent every
    rank's whole block through the Alltoallv, the rows it keeps included. Now a rank
    sends and receives only the rows that change rank: 2 at most, none on one rank."""
    full = full_of((16, 5), np.float64)
    with dmesh.init_mesh((comm.Get_size(),), comm=comm) as mesh:
        z = dmesh.distribute(full, mesh, [Shard(0)])
        layout = z[:-2].spec.layout
        shifted = z[2:]
        out, got = recorded(functools.partial(shifted.with_layout, layout))
        bounds = shifted.spec.layout.bounds
        row = 5 * full.itemsize
        predicted = redistribute(
            mesh.shape, (14, 5), full.itemsize, [Shard(0)], [Shard(0)], bounds, layout.bounds
        )
        check_traffic(mesh, predicted, got, "z[2:] with z[:-2]'s layout")
        with Verdict(mesh.comm()) as v:
            v.equal(out.to_local(), full[2:][layout.slices(mesh.coordinate)])
            v.check(all(c.received_bytes <= 2 * row for c in got), f"received {got}")
            v.check(all(c.sent_bytes <= 2 * row for c in got), f"sent {got}")
            v.check(mesh.size() > 1 or not got, f"one rank made calls: {got}")


def other_meshes(m: dmesh.DeviceMesh) -> list[tuple[tuple[int, ...], bool]]:
    """Target mesh shapes over the same ranks, and whether their ranks run in reverse."""
    p = m.size()
    shapes = {m.shape, (p,), *([(p, 1), (1, p)] if p > 1 else []), *([(2, 2)] if p == 4 else [])}
    return [(shape, False) for shape in sorted(shapes)] + [(m.shape, True)]


def moved(a: dmesh.DArray, t: dmesh.DeviceMesh, placements: tuple[Placement, ...]) -> Any:
    """``a.redistribute(t, placements)``'s block; for a target of another shape, its steps.

    Under ``CommMode`` (any debug hook) ``DArray._moved`` prices a move with
    ``estimate_cost``, which plans it as one on a single mesh and raises
    ``IndexError`` when the target mesh has another shape; so such a move
    runs ``plan_redistribution(..., same_mesh=False)`` with ``run_steps``, as
    ``_moved`` does after the estimate.
    """
    if t.shape == a.mesh.shape:
        return a.redistribute(t, list(placements)).to_local()
    target = Layout.balanced(t.shape, placements, a.shape)
    steps = plan_redistribution(a.spec.layout, target, False)
    return run_steps(a.to_local(), steps, a.mesh, t)


def test_other_mesh(traffic_mesh: dmesh.DeviceMesh, comm: MPI.Intracomm) -> None:
    """A move to another mesh over the same ranks: reductions, then one transfer over all."""
    m = traffic_mesh
    p = m.size()
    for target_shape, reverse in other_meshes(m):
        order = comm.Split(0, p - 1 - comm.Get_rank()) if reverse else comm
        assert isinstance(order, MPI.Intracomm)
        ranks = list(range(p))[::-1] if reverse else None
        with dmesh.init_mesh(target_shape, comm=order) as t, Verdict(m.comm()) as v:
            rest, rest_t = " R" * (m.ndim - 1), " R" * (t.ndim - 1)
            pairs = [("S0" + rest, "S0" + rest_t), ("S1" + rest, " ".join(["S0"] * t.ndim)),
                     (" ".join(["P"] * m.ndim), "S1" + rest_t), ("R" + rest, "P" + rest_t),
                     ("S0" + " S1" * (m.ndim - 1), "S1" + " S0" * (t.ndim - 1))]  # fmt: skip
            for (src, dst), shape, dtype in itertools.product(pairs, SHAPES, DTYPES):
                full, s = full_of(shape, dtype), np.dtype(dtype).itemsize
                a = dmesh.distribute(full, m, list(parse(src)))
                local, got = recorded(functools.partial(moved, a, t, parse(dst)))
                predicted = redistribute(
                    m.shape, shape, s, parse(src), parse(dst), dst_mesh_shape=t.shape,
                    dst_ranks=ranks,
                )  # fmt: skip
                label = f"{src} on {m.shape} -> {dst} on {t.shape} reverse={reverse} {shape}"
                check_traffic(m, predicted, got, label)
                target = Layout.balanced(t.shape, parse(dst), shape)
                assert t.coordinate is not None
                v.equal(local, expected_at(full, target, t.coordinate))
        if reverse:
            order.Free()
