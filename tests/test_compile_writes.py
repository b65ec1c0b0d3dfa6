"""Writes inside a compiled trace (``a[key] = value`` as write nodes): eager's bits.

Slice writes of scalars and of expressions of shifted slices, int-index writes of
scalars on sharded dims, writes into the arguments (the caller sees them), views
taken before a write and read after it, reductions on either side of a write, a
redistribution before a write used after it, and generated programs mixing them, on
even, uneven, empty and replicated blocks, with NaN, inf and -0.0 among the values.
Each compiled function is checked to trace whole (no graph break) where its writes
are recordable, and its calls to equal eager calls bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI
from test_compile import _against_eager, _data, _same, _sharded, _uneven

import dmesh
from dmesh import Replicate, Shard
from helpers import assert_all


def _stencil_steps(u: Any) -> Any:
    u = u.copy()
    for _ in range(3):
        un = u.copy()
        u[1:-1, 1:-1] = 0.25 * (un[:-2, 1:-1] + un[2:, 1:-1] + un[1:-1, :-2] + un[1:-1, 2:])
        u[0, :] = 1.0  # an int row on the sharded dim: each rank writes its part
        u[:, -1] = -0.0
    return u


def _into_argument(u: Any) -> Any:
    u[1:, :] = u[:-1, :] * 2.0  # the argument itself, from a shifted slice of itself
    u[0] = np.nan
    return np.sum(u, axis=0)


def _views_across_writes(u: Any) -> Any:
    row = u[2:4]  # a view, read after the write below
    total = np.sum(u * u)  # a reduction before the write
    u[...] = 3.0
    after = np.sum(u)  # and one after it
    return row * 1.0, total, after, u[1:] - u[:-1]


def _moved_before_a_write(u: Any) -> Any:
    v = u.copy()
    r = v.redistribute(v.mesh, [Replicate()] * v.mesh.ndim)  # moved before the write
    v[:] = -1.0
    s = np.max(r)  # r keeps the values from before the write
    v[1::2] = r[1::2] + s
    return v, r


def _started_after_writes(u: Any) -> Any:
    v = u * 2.0
    w = v[1:]  # a view of v: written through by the writes into v
    v[0:3] = 7.0  # after w exists, before its gather and max are needed
    whole = w.redistribute(w.mesh, [Replicate()] * w.mesh.ndim)
    top = np.max(w, axis=0)
    v[2:4] = -7.0
    return whole, top, np.min(w, axis=0)


def _moves_across_writes(u: Any) -> Any:
    n = min(u.shape)
    v = u[:n, :n].copy()  # square
    x = np.sum(v, axis=1) * 1.0  # laid out as v's rows (reduced, where partial)
    first = np.dot(v, x)  # x moved for the product
    r = x.redistribute(x.mesh, [Replicate()] * x.mesh.ndim)  # the values before the write
    x[0:2] = 5.0
    return first, np.dot(v, x), np.dot(r, v)  # x moved again; r's not taken from x


def _fresh(make: Callable[[], Any], fn: Callable[[Any], Any]) -> Any:
    return fn(make())


def _check(fn: Callable[[Any], Any], make: Callable[[], Any], label: str) -> list[str]:
    compiled = dmesh.compile(fn)
    want = _fresh(make, fn)
    found = []
    for call in range(3):
        message = _same(_fresh(make, compiled), want)
        if message:
            found.append(f"{label} {fn.__name__} call {call}: {message}")
    if compiled.breaks:
        found.append(f"{label} {fn.__name__}: broke: {compiled.breaks}")
    return found


def _makers(mesh: Any, data: np.ndarray) -> list[tuple[str, Callable[[], Any]]]:
    replicated = [Replicate()] * mesh.ndim
    return [
        ("sharded", lambda: _sharded(mesh, data)),
        ("uneven", lambda: _uneven(mesh, data)),
        ("few rows", lambda: _sharded(mesh, data[:3])),
        ("replicated", lambda: dmesh.distribute(data, mesh, replicated)),
        ("columns", lambda: dmesh.distribute(data, mesh, [Shard(1)] * mesh.ndim)),
    ]


def test_writes_trace_whole_with_eagers_bits(comm: MPI.Intracomm, mesh: Any) -> None:
    data = _data(mesh, (8, 5), 11)
    data[1, 1], data[2, 3], data[5, 0], data[6, 4] = np.nan, np.inf, -0.0, -np.inf
    problems: list[str] = []
    with np.errstate(all="ignore"):
        for label, make in _makers(mesh, data):
            for fn in (_stencil_steps, _into_argument, _views_across_writes,
                       _moved_before_a_write, _started_after_writes,
                       _moves_across_writes):  # fmt: skip
                problems += _check(fn, make, label)
    assert_all(comm, not problems, "\n".join(problems))


def _program(seed: int) -> Callable[[Any], Any]:
    """A generated program: a copy of its argument, then six ops drawn (every rank draws
    the same: the seed), writes among them, returning what it computed."""
    rng = np.random.default_rng(seed)
    menu = ["slice_scalar", "slice_shifted", "row_scalar", "view", "sum", "copy", "arith"]
    ops = [str(rng.choice(menu)) for _ in range(6)]
    values = [float(v) for v in rng.integers(-3, 4, 6)]

    def program(u: Any) -> Any:
        u = u.copy()
        kept: list[Any] = []
        for op, value in zip(ops, values):
            if op == "slice_scalar":
                u[1:-1] = value
            elif op == "slice_shifted":
                u[1:-1] = u[2:] - u[:-2] * value
            elif op == "row_scalar":
                u[-1] = value
            elif op == "view":
                kept.append(u[::2])  # read at the end, after later writes
            elif op == "sum":
                kept.append(np.sum(u, axis=0) + value)
            elif op == "copy":
                kept.append(u.copy())
            else:
                u = u * value + 1.0
        return u, [k * 1.0 for k in kept]

    program.__name__ = f"program_{seed}_{'_'.join(ops)}"
    return program


def test_generated_programs_with_writes(comm: MPI.Intracomm, mesh: Any) -> None:
    data = _data(mesh, (7, 3), 12)
    data[0, 1], data[3, 2] = np.nan, -0.0
    problems: list[str] = []
    with np.errstate(all="ignore"):
        for seed in range(12):
            fn = _program(seed)
            for label, make in _makers(mesh, data)[:3]:
                problems += _check(fn, make, label)
    assert_all(comm, not problems, "\n".join(problems))


def _boundary_copies(u: Any) -> Any:
    u = u.copy()
    u[0] = u[1]  # rows of one owner: its owner copies (on a sharded dim)
    u[-1] = u[-2]
    u[:, 0] = u[:, 1]
    top = u[2] * 2.0  # a detached read used in arithmetic: its terms reduced
    return u, top, u[1:3] - u[0]


def test_boundary_copies_trace_whole(comm: MPI.Intracomm, mesh: Any) -> None:
    """``h[0] = h[1]`` (cavity flow's and shallow water's boundary rows): traced whole
    where both rows have one owner, in segments where they do not, eager's bits in both,
    on even, uneven, thin, replicated and column-sharded blocks."""
    data = _data(mesh, (8, 5), 14)
    data[1, 1], data[6, 2] = np.nan, -np.inf
    problems: list[str] = []
    with np.errstate(all="ignore"):
        for label, make in _makers(mesh, data):
            found = _check(_boundary_copies, make, label)
            if label in ("uneven", "few rows"):  # (owners may differ: a break is fine)
                found = [f for f in found if "broke" not in f]
            problems += found
    assert_all(comm, not problems, "\n".join(problems))


def _mask_writes(u: Any) -> Any:
    u = u.copy()
    u[u > 0] = -0.0  # a scalar where a mask of u's shape is True: each rank its block
    inner = u[1:-1]
    inner[(inner < -1.0) | np.isnan(inner)] = 7  # through a view, an int into floats
    whole = (u > 1.0).redistribute(u.mesh, [Replicate()] * u.mesh.ndim)
    u[whole] = 5.0  # a mask laid out otherwise: moved to u's layout first
    return u, u * 2.0


def test_scalar_mask_writes_trace_whole(comm: MPI.Intracomm, mesh: Any) -> None:
    """``Z[birth | survive] = 1`` (Game of Life): a scalar through a boolean mask of the
    array's shape is a write node on row-sharded and replicated blocks, eager's bits; on
    blocks sharded on other dims (eager gathers the True positions there) a break."""
    data = _data(mesh, (8, 5), 15)
    data[1, 1], data[4, 2], data[6, 0] = np.nan, -np.inf, -3.0
    problems: list[str] = []
    with np.errstate(all="ignore"):
        for label, make in _makers(mesh, data):
            found = _check(_mask_writes, make, label)
            if label == "columns":
                found = [f for f in found if "broke" not in f]
            problems += found
    assert_all(comm, not problems, "\n".join(problems))


def test_writes_that_cannot_be_recorded_break(comm: MPI.Intracomm, mesh: Any) -> None:
    """An array written into a detached selection (its owners copy), a broadcast value and
    a mask: graph breaks, run eagerly in segments, with eager's bits."""

    def detached(u: Any) -> Any:
        u = u.copy()
        u[0] = u[-1]  # rows on the sharded dim, held by different ranks
        return u

    def broadcast(u: Any) -> Any:
        u = u.copy()
        u[1:3] = u[0, :]
        return u

    def masked(u: Any) -> Any:
        u = u.copy()
        u[u > 0] = u[u > 0] * 2.0  # values through a mask: the counts are exchanged
        return u

    x = _sharded(mesh, _data(mesh, (6, 4), 13))
    problems: list[str] = []
    for fn in (detached, broadcast, masked):
        compiled = dmesh.compile(fn)
        problems += _against_eager(compiled, fn, (x,), fn.__name__, calls=2)
        if (fn is not detached or comm.Get_size() > 1) and not compiled.breaks:
            problems.append(f"{fn.__name__}: no graph break")
    assert_all(comm, not problems, "\n".join(problems))
