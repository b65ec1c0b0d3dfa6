"""Calls a compiled function records as nodes instead of breaking at (issue 29, item 4).

``np.roll`` (a node on the block: the rows changing holder sent as eagerly, its result
placed away from its source), ``argmax``/``argmin`` (a node running the kernel's plan,
made from the spec: NumPy's answer on the blocks, the candidates gathered where the
axis is sharded), ``astype``
(a cast of each block), ``np.zeros_like``, ``ones_like``, ``full_like`` and
``empty_like`` with a scalar fill (a block made like the argument's) and ``np.power``
with a constant exponent (its integer error decided from the constant, as eagerly)
no longer break a trace. Each
is checked against eager's bits on row-, column- and 2-D-sharded, replicated and
uneven (even empty) blocks, with hostile values; a DArray exponent of integers still
breaks (its error check reads values), a negative constant exponent of integers
raises NumPy's error at once. Game of Life written with ``np.roll`` traces whole.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI
from test_compile import _against_eager, _placements, _uneven, _whole_against_eager

import dmesh
from dmesh import Shard, compile
from helpers import assert_all, assert_raises_all


def _life(Z: Any) -> Any:
    for _ in range(2):  # (the board shrinks by its edge each generation)
        N = Z[:-2, :-2] + Z[:-2, 1:-1] + Z[:-2, 2:] + Z[1:-1, :-2] + Z[1:-1, 2:]
        N = N + Z[2:, :-2] + Z[2:, 1:-1] + Z[2:, 2:]
        Z = ((N == 3) | (Z[1:-1, 1:-1] & (N == 2))).astype(Z.dtype)
    return Z


def _casts(x: Any) -> Any:
    a = (x * 2.0).astype(np.float32) - x.astype(np.complex64)
    return a, (x**3 + x**-1.0).astype(np.int8, copy=False), x.astype(np.float64, copy=False)


def _likes(x: Any) -> Any:
    e = np.empty_like(x, dtype=np.float32)
    e[...] = 2.5  # (a write node: its values are the write's)
    z = np.zeros_like(x) + x
    return z, np.ones_like(x, dtype=np.int16) * 3, np.full_like(x, np.nan) - x, e


def _extremes(x: Any) -> Any:
    d2 = (x * x)[:, :, None] - x[:, None, :]  # (k-means' distances, roughly)
    return (
        d2.argmin(axis=1) * 2,
        np.argmax(x, axis=0) + 1,
        np.argmin(x, axis=1, keepdims=True),
        x.argmax() + 0,
        np.argmax(x * 0.0),  # ties: the first
    )


def _rolls(x: Any) -> Any:
    a = np.roll(x * 2.0, 7, 0) - np.roll(x, -1, 1)
    return np.roll(a, (1, -9), (0, 1)), np.roll(x, 3, 1) + np.roll(x, x.shape[0] * 2 + 1, 0)


def _life_roll(Z: Any) -> Any:
    for _ in range(2):
        N = sum(np.roll(np.roll(Z, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1) if i or j)
        Z = ((N == 3) | (Z & (N == 2))).astype(Z.dtype)
    return Z


@pytest.mark.parametrize("shape", [(9, 6), (4, 5)], ids=str)
def test_kernels_trace_whole(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: tuple[int, int]
) -> None:
    rng = np.random.default_rng(5)
    life = (rng.random(shape) < 0.4).astype(np.int64)
    values = rng.standard_normal(shape)
    values[0, 0], values[-1, 1] = np.nan, -np.inf
    found: list[str] = []
    for placements in _placements(mesh):
        for fn, data in (
            (_life, life), (_life_roll, life), (_casts, values), (_likes, values),
            (_extremes, values), (_rolls, values),
        ):  # fmt: skip
            x = dmesh.distribute(data, mesh, placements)
            found += _whole_against_eager(fn, (x,), f"{fn.__name__} {placements}")
    assert_all(comm, not found, "; ".join(found[:3]))


def test_uneven_and_empty_blocks(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    grid = np.random.default_rng(6).standard_normal((4, 3))
    x = _uneven(mesh, grid)
    compiled = compile(_casts, segments="always")
    found = _against_eager(compiled, _casts, (x,), "uneven")
    assert_all(comm, not found and not compiled.breaks, f"{found[:2]} {compiled.breaks}")
    compiled = compile(_rolls, segments="always")
    found = _against_eager(compiled, _rolls, (x,), "roll")
    assert_all(comm, not found and not compiled.breaks, f"{found[:2]} {compiled.breaks}")


def test_integer_powers(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    n = dmesh.distribute(np.arange(-3, 5 * comm.size), mesh, [Shard(0)] * mesh.ndim)

    def squares(n: Any) -> Any:
        return np.power(n, 3) + n**2

    compiled = compile(squares, segments="always")
    found = _against_eager(compiled, squares, (n,), "constant exponent")
    assert_all(comm, not found and not compiled.breaks, f"{found[:2]} {compiled.breaks}")

    def by_array(n: Any) -> Any:
        return np.power(n, n * 0 + 2)

    compiled = compile(by_array, segments="always")
    found = _against_eager(compiled, by_array, (n,), "array exponent")
    assert_all(comm, not found and bool(compiled.breaks), f"{found[:2]} {compiled.breaks}")
    assert_raises_all(comm, ValueError, lambda: compile(lambda n: np.power(n, -1))(n))


def _kernel_program(seed: int) -> Any:
    """A generated program of six ops drawn from the kernels recorded as nodes (every rank
    draws the same: the seed), with arithmetic between them."""
    rng = np.random.default_rng(seed)
    menu = ["roll0", "roll1", "fft", "argmax", "cast", "like", "mask_mean", "arith"]
    ops = [str(rng.choice(menu)) for _ in range(6)]
    values = [int(v) for v in rng.integers(-9, 10, 6)]

    def program(u: Any, v: Any) -> Any:
        kept: list[Any] = []
        for op, value in zip(ops, values):
            if op == "roll0":
                u = np.roll(u, value, 0) - u
            elif op == "roll1":
                u = np.roll(u, value, 1) * 0.5
            elif op == "fft":
                u = np.fft.irfft2(np.fft.rfft2(u) * (1 + value * 1j), s=u.shape)
            elif op == "argmax":
                kept.append(np.argmax(u, axis=value % 2) + value)
            elif op == "cast":
                u = u.astype(np.float32).astype(np.float64) + value
            elif op == "like":
                u = u + np.full_like(u, value) - np.zeros_like(u)
            elif op == "mask_mean":
                kept.append(u[v > value / 10].mean(axis=0))
            else:
                u = u * value + 1.0
        return u, kept

    program.__name__ = f"kernels_{seed}_{'_'.join(ops)}"
    return program


def test_generated_kernel_programs(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Twelve generated programs, each compiled against eager's bits on every placement;
    on row-sharded blocks each traces whole."""
    rng = np.random.default_rng(9)
    data, weights = rng.standard_normal((8, 6)), rng.standard_normal(8)
    data[0, 1], data[3, 2] = np.nan, -np.inf
    rows = [Shard(0), *[dmesh.Replicate()] * (mesh.ndim - 1)]
    found: list[str] = []
    with np.errstate(all="ignore"):
        for seed in range(12):
            fn = _kernel_program(seed)
            for placements in _placements(mesh):
                u = dmesh.distribute(data, mesh, placements)
                v = dmesh.distribute(weights, mesh, rows)
                compiled = compile(fn, segments="always")
                label = f"{fn.__name__} {placements}"
                found += _against_eager(compiled, fn, (u, v), label)
                if placements == rows and compiled.breaks:
                    found.append(f"{label}: broke at {compiled.breaks}")
    assert_all(comm, not found, "; ".join(found[:3]))


def _on_partials(x: Any) -> Any:
    top = x.max(axis=0)  # Partial("max") where x's rows are sharded
    total = np.sum(x, axis=0)  # Partial("sum")
    spectrum = np.fft.rfft2(x * 0.0 + total)  # a partial broadcast into a full array
    return (
        np.roll(top, 1) + np.roll(total, -2),
        np.argmax(top),
        top.astype(np.float32),
        np.zeros_like(total) + total,
        np.abs(spectrum),
    )


def test_kernels_on_partial_operands(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Partial(max) and Partial(sum) operands (reduced where a kernel needs values): the
    compiled function answers as eagerly, bit for bit, traced whole or not."""
    X = np.random.default_rng(11).standard_normal((9, 6))
    X[0, 1], X[4, 2], X[7, 3] = np.nan, np.inf, -np.inf
    found: list[str] = []
    with np.errstate(all="ignore"):
        for x in (dmesh.distribute(X, mesh, [Shard(0)] * mesh.ndim), _uneven(mesh, X)):
            compiled = compile(_on_partials, segments="always")
            found += _against_eager(compiled, _on_partials, (x,), f"{x.spec!r}")
    assert_all(comm, not found, "; ".join(found[:3]))
