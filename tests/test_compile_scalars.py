"""Scalars read in one compiled function are reduced together (``dmesh.ops.compiler.scalars``).

``float(np.sum(a))`` is a graph break; a later call with the same signature
reduces the reads that its last call made next, whose inputs are ready, in the
first read's MPI calls: one per reduce op (``min`` shares ``max``'s). The
values equal eager's bit for bit (NaN, inf, -0.0, wrapping integer sums,
uneven and empty blocks), a branch on a value that changes between calls
still gives eager's answers, a write between two reads is seen, and every
rank makes the same calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI
from test_compile import _sharded, _uneven

import dmesh
from dmesh.debug import CommMode
from helpers import assert_all

I64 = np.iinfo(np.int64)


def _bits(got: Any, want: Any) -> str:
    """Empty when ``got`` and ``want`` (scalars, arrays, lists of them) have the same types
    and bytes (a NaN equals itself; 0.0 is not -0.0)."""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{got!r} and {want!r}"
        return next((m for m in map(_bits, got, want) if m), "")
    same = type(got) is type(want) and np.asarray(got).tobytes() == np.asarray(want).tobytes()
    if isinstance(want, np.ndarray):
        same = same and got.dtype == want.dtype and got.shape == want.shape
    return "" if same else f"{got!r} and {want!r}"


def _calls(fn: Callable[..., Any], *args: Any) -> tuple[Any, dict[str, int]]:
    """``fn(*args)`` and the MPI calls it made, by kind."""
    with CommMode() as cm:
        result = fn(*args)
    return result, dict(cm.counts())


def _same_calls(comm: MPI.Intracomm, calls: Any) -> str:
    """Empty when every rank made the same calls (no rank waits for a call others skip)."""
    every = comm.allgather(repr(calls))
    return "" if len(set(every)) == 1 else f"ranks made different calls: {every}"


def diag(a: Any, b: Any, c: Any, d: Any) -> list[float]:
    return [float(x) for x in (np.sum(a), np.sum(b), np.max(c), np.min(d))]


def test_independent_reads_make_one_call_per_op(comm: MPI.Intracomm, mesh: Any) -> None:
    """Four reads (two sums, a max, a min) make at most two calls compiled, where eager
    makes four (one a read, at more than one rank), with eager's bits; a third call too."""
    rng = np.random.default_rng(0)
    a, b, c, d = (_sharded(mesh, rng.random(1000)) for _ in range(4))
    f = dmesh.compile(diag)
    problems = [_bits(f(a, b, c, d), diag(a, b, c, d))]
    want, eager = _calls(diag, a, b, c, d)
    for _ in range(2):
        got, compiled = _calls(f, a, b, c, d)
        problems += [_bits(got, want), _same_calls(comm, compiled)]
        if comm.size > 1 and sum(compiled.values()) > 2:
            problems.append(f"compiled made {compiled}, eager {eager}")
    if comm.size > 1 and sum(eager.values()) != 4:
        problems.append(f"eager made {eager}")
    problems = [p for p in problems if p]
    assert_all(comm, not problems, "\n".join(problems))


def branches(a: Any, b: Any, c: Any) -> float:
    s = float(np.sum(a))
    return float(np.max(b)) if s > 0 else float(np.min(c))


def test_branch_on_a_value_follows_the_data(comm: MPI.Intracomm, mesh: Any) -> None:
    """Python branches on the first value, whose sign changes between calls: each call gives
    eager's answer (a value read ahead for the other branch is dropped) and every rank
    makes the same calls."""
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(50) for _ in range(3))
    a += 0.5 - a.mean()  # a positive sum, made negative below
    f = dmesh.compile(branches)
    problems = []
    for sign in (1, 1, -1, -1, 1, -1, 1, 1):
        args = [_sharded(mesh, x) for x in (sign * a, b, c)]
        want = branches(*args)
        got, calls = _calls(f, *args)
        problems += [_bits(got, want), _same_calls(comm, calls)]
    problems = [p for p in problems if p]
    assert_all(comm, not problems, "\n".join(problems))


def hostile(a: Any, b: Any, c: Any, i: Any, j: Any, m: Any) -> list[Any]:
    values = [float(np.sum(a)), float(np.max(a)), float(np.min(b)), np.sum(c).item()]
    values += [int(np.sum(i)), int(np.min(i)), int(np.max(j)), np.min(j).item()]
    values += [bool(np.max(m)), bool(np.min(m)), np.sum(b).full_array(), np.min(c).full_array()]
    return values


def _hostile_data(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n)
    b = rng.standard_normal(n)
    c = rng.standard_normal(n).astype(np.float32)
    if n >= 6:
        a[1], a[3] = np.nan, -np.inf
        b[0], b[2], b[4] = -0.0, np.inf, 0.0
        c[5] = np.nan
    i = rng.integers(I64.min, I64.max, n, dtype=np.int64)  # sums that wrap, as NumPy's do
    i[0] = I64.min
    j = rng.integers(0, 2**63, n, dtype=np.uint64)
    m = rng.random(n) > 0.5
    return [a, b, c, i, j, m]


def test_hostile_values_uneven_and_empty_blocks(comm: MPI.Intracomm, mesh: Any) -> None:
    """NaN, inf, -0.0, float32, wrapping int64 sums, int64 and uint64 extremes, bools, read
    as float/int/bool/item/full_array, on even, uneven and (3 elements over 4 ranks) empty
    blocks: compiled equals eager bit for bit on the traced call and those after."""
    problems = []
    with np.errstate(all="ignore"):
        for n, seed in ((40, 2), (9, 3), (3, 4)):
            for place in (_sharded, _uneven):
                args = [place(mesh, x) for x in _hostile_data(n, seed)]
                f = dmesh.compile(hostile)
                want, eager = _calls(hostile, *args)
                for _ in range(3):
                    got, calls = _calls(f, *args)
                    problems += [_bits(got, want), _same_calls(comm, calls)]
                # One call per (op, dtype): f64, f32 sum and max (min); i64 sum and max (min);
                # u64 and bool max (min). Eager: one per read, 12.
                if comm.size > 1 and sum(calls.values()) > 8:
                    problems.append(f"n={n}: compiled made {calls}, eager {eager}")
    problems = [p for p in problems if p]
    assert_all(comm, not problems, "\n".join(problems))


def write_between(a: Any, b: Any) -> list[float]:
    s = float(np.sum(a))
    a[0] = s + 1e6  # a write: the next sum of a reads the new block
    x = a * 2.0
    return [s, float(np.sum(a)), float(np.max(x)), float(np.sum(b * s)), float(np.min(x))]


def test_writes_and_dependent_reads(comm: MPI.Intracomm, mesh: Any) -> None:
    """A write between reads is seen (nothing is read ahead across it); reads of a computed
    array, and an op whose constant is a value read (it changes with the data), equal eager."""
    rng = np.random.default_rng(5)
    problems = []
    f = dmesh.compile(write_between)
    for k in range(4):
        a, b = rng.standard_normal(30) * (k + 1), rng.standard_normal(30)
        scale = 1.0 if k < 2 else 3.0  # the same data twice, then new data
        want = write_between(_sharded(mesh, a * scale), _sharded(mesh, b))
        got, calls = _calls(f, _sharded(mesh, a * scale), _sharded(mesh, b))
        problems += [_bits(got, want), _same_calls(comm, calls)]
    problems = [p for p in problems if p]
    assert_all(comm, not problems, "\n".join(problems))
