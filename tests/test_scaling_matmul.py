"""The contraction formulas of ``dmesh.scaling.contractions`` against ``CommMode`` and NumPy.

On every 1-D and 2-D mesh of the world size: ``matmul`` of every pair of
layouts built from ``R``, ``S(0)`` and ``S(1)`` per mesh dim (matrix-matrix
and matrix-vector), the result made replicated so that a partial result's
reduction is in the traffic, and the strategy dispatch chose checked against
:func:`contraction_strategy`; then ``dot``, ``inner``, ``outer``, ``vdot``,
``tensordot`` and ``einsum`` on a few layouts, and the size-dependent choice
for ``S(0) @ S(0)``. Shapes give even, uneven and empty blocks at 1-4 ranks;
dtypes float64, int32 (with float64: each operand moves in its own dtype)
and complex128.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
from traffic_checks import check_traffic, recorded

import dmesh
from dmesh import Replicate, Shard
from dmesh.core.placement import Placement
from dmesh.scaling.contractions import (
    contraction,
    contraction_strategy,
    matmul,
    product_subscripts,
    tensordot_subscripts,
)

R = Replicate()


def layouts(mesh_ndim: int, ndim: int) -> list[tuple[Placement, ...]]:
    """Every layout of an ``ndim``-D operand from R and S(d) on each mesh dim."""
    options: list[Placement] = [R, *(Shard(d) for d in range(ndim))]
    return list(itertools.product(options, repeat=mesh_ndim))


def data(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    full = (np.arange(np.prod(shape)).reshape(shape) * (seed + 2)) % 5 - 2
    if np.dtype(dtype).kind == "c":
        return (full + 1j * (full % 3)).astype(dtype)
    return full.astype(dtype)


def check(m: dmesh.DeviceMesh, label: str, subscripts: str, func: Callable[..., Any],
          operands: list[np.ndarray], placements: list[tuple[Placement, ...]]) -> None:  # fmt: skip
    """``func`` of the distributed operands, made replicated: its traffic, strategy and value."""
    xs = [dmesh.distribute(a, m, list(p)) for a, p in zip(operands, placements)]
    want = np.asarray(func(*operands))
    every_r = [R] * m.ndim
    shapes = [a.shape for a in operands]
    sizes = [a.dtype.itemsize for a in operands]
    result, _, _ = contraction_strategy(m.shape, subscripts, shapes, sizes, placements)
    predicted = contraction(m.shape, subscripts, shapes, sizes, placements,
                            want.dtype.itemsize, every_r)  # fmt: skip
    out = func(*xs)
    assert out.placements == result.placements, (label, out.placements, result.placements)
    value, got = recorded(lambda: func(*xs).redistribute(m, every_r))
    check_traffic(m, predicted, got, label)
    np.testing.assert_allclose(value.full_array(), want, rtol=1e-12, err_msg=label)


def test_matmul_every_layout(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    cases = [((5, 3), (3, 4), np.float64, np.float64), ((3, 2), (2, 5), np.int32, np.float64),
             ((4, 6), (6,), np.complex128, np.complex128)]  # fmt: skip
    for a_shape, b_shape, a_type, b_type in cases:
        a, b = data(a_shape, a_type, 0), data(b_shape, b_type, 1)
        subscripts = product_subscripts("matmul", (a.ndim, b.ndim))
        for pa, pb in itertools.product(layouts(m.ndim, a.ndim), layouts(m.ndim, b.ndim)):
            label = f"{a_shape} {a_type.__name__} {pa} @ {b_shape} {b_type.__name__} {pb}"
            check(m, label, subscripts, np.matmul, [a, b], [pa, pb])


def test_products(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    s0 = (Shard(0),) + (R,) * (m.ndim - 1)
    s1 = (Shard(1),) + (R,) * (m.ndim - 1)
    two = (Shard(0), Shard(1)) if m.ndim == 2 else s0
    a, b = data((5, 3), np.float64, 0), data((4, 3), np.float64, 1)
    v, w = data((7,), np.complex128, 2), data((7,), np.complex128, 3)
    for pa, pb in [(s0, s0), (s1, s1), (two, s1), (s1, two)]:
        check(m, f"dot {pa} {pb}", product_subscripts("dot", (2, 2)), np.dot, [a, b.T.copy()],
              [pa, pb])  # fmt: skip
        check(m, f"inner {pa} {pb}", product_subscripts("inner", (2, 2)), np.inner, [a, b],
              [pa, pb])  # fmt: skip
        subscripts = tensordot_subscripts((2, 2), [1], [1])
        check(m, f"tensordot {pa} {pb}", subscripts,
              lambda x, y: np.tensordot(x, y, axes=([1], [1])), [a, b], [pa, pb])  # fmt: skip
        check(m, f"einsum {pa} {pb}", "ij,kj->ik", lambda x, y: np.einsum("ij,kj->ik", x, y),
              [a, b], [pa, pb])  # fmt: skip
    for pv, pw in [(s0, s0), (s0, (R,) * m.ndim), ((R,) * m.ndim, s0)]:
        check(m, f"outer {pv} {pw}", "a,b->ab", np.outer, [v, w], [pv, pw])
        check(m, f"vdot {pv} {pw}", "i,i->", np.vdot, [v, w], [pv, pw])
        check(m, f"inner 1-D {pv} {pw}", "a,a->", np.inner, [v, w], [pv, pw])


def test_row_sharded_operands_choice(traffic_mesh: dmesh.DeviceMesh) -> None:
    """``S(0) @ S(0)``: a short-wide ``A`` moves (all_to_all, partial result), a tall one
    makes ``B`` gather (row-sharded result); the bytes decide, with 10 kB per message."""
    m = traffic_mesh
    s0 = (Shard(0),) + (R,) * (m.ndim - 1)
    for a_shape, b_shape in [((4, 8), (8, 40)), ((400, 8), (8, 2))]:
        a, b = data(a_shape, np.float64, 0), data(b_shape, np.float64, 1)
        check(m, f"{a_shape} S(0) @ {b_shape} S(0)", "iz,zk->ik", np.matmul, [a, b], [s0, s0])
        predicted = matmul(m.shape, a_shape, b_shape, 8, s0, s0)
        xa, xb = dmesh.distribute(a, m, list(s0)), dmesh.distribute(b, m, list(s0))
        _, got = recorded(functools.partial(np.matmul, xa, xb))
        check_traffic(m, predicted, got, f"{a_shape} @ {b_shape} without its value")
