"""Segments of a compiled function whose trace breaks: what their plans hand back, and the
writes between them, against eager calls bit for bit.

A segment's plan hands back only the results the Python code still refers to when it
runs (an expression's temporaries are gone by then), with one plan per set of such
results; a write after a segment writes into the blocks the segment computed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI
from test_compile import _data, _same, _sharded, _uneven

import dmesh
from helpers import assert_all

_kept: list[Any] = []  # where ``_keeps`` puts a temporary when asked to
_keep = [False]


def _temporaries(x: Any) -> Any:
    total = float(np.sum(x))  # a graph break: what follows is a segment
    y = ((x + 1.0) * 2.0 - x) / (3.0 + abs(total))
    return y, total


def _keeps(x: Any) -> Any:
    total = float(np.max(x))  # a graph break
    t = np.exp(x) - 1.0
    if _keep[0]:
        _kept.append(t)  # t is alive when the segment runs: handed back too
    return t * 2.0 + total


def _writes(x: Any) -> Any:
    p = x.copy()
    s = float(np.sum(p))  # a graph break
    q = p[1:] * 2.0 - s
    p[:-1] = q  # a write of a segment's result into a segment's result
    p[-1] = np.sqrt(s * s)
    r = p[::2] + 1.0
    p[::2] = r  # the written array read again, then written
    return p


def test_segments_hand_back_live_results(comm: MPI.Intracomm, mesh: Any) -> None:
    """The expression after a break hands back its result only (its temporaries died),
    with eager's bits on every call, on even, uneven and empty blocks."""
    problems: list[str] = []
    for make in (_sharded, _uneven):
        for rows in (7, 1, 0):
            x = make(mesh, _data(mesh, (rows, 3), 3))
            compiled = dmesh.compile(_temporaries)
            want = _temporaries(x)
            for call in range(3):
                got = compiled(x)
                message = _same(got[0], want[0]) or ("" if got[1] == want[1] else "total")
                if message:
                    problems.append(f"{make.__name__} {rows} call {call}: {message}")
            plans = next(iter(compiled.plans.values())).segments.plans()  # type: ignore[union-attr]
            outputs = sorted(len(p.outputs) for p in plans)
            if rows and outputs != [1, 1]:  # the sum read, then y (no temporary)
                problems.append(f"{make.__name__} {rows}: plan outputs {outputs}")
    assert_all(comm, not problems, "\n".join(problems))


def test_a_result_kept_between_calls_gets_its_block(comm: MPI.Intracomm, mesh: Any) -> None:
    """The same signature, once with a temporary kept by the code and once not: each run
    hands back what is alive then (a plan per set), and the kept array holds its values."""
    x = _sharded(mesh, _data(mesh, (9, 2), 4))
    compiled = dmesh.compile(_keeps)
    problems: list[str] = []
    for call, keep in enumerate((False, False, True, False, True)):
        _keep[0] = keep
        _kept.clear()
        got = compiled(x)
        if keep:
            kept = dmesh.DArray(_kept[0].local, _kept[0].spec)  # (kept as the lazy array)
            _keep[0] = False
            message = _same(kept, np.exp(x) - 1.0) or _same(got, _keeps(x))
        else:
            message = _same(got, _keeps(x))
        if message:
            problems.append(f"call {call} (keep {keep}): {message}")
    _kept.clear()
    assert_all(comm, not problems, "\n".join(problems))


def test_writes_between_segments(comm: MPI.Intracomm, mesh: Any) -> None:
    """Slice and int-index writes of arrays segments computed, reads of them after, on even,
    uneven and empty blocks, NaN and inf among the values: eager's bits on every call."""
    data = _data(mesh, (8, 3), 5)
    data[0, 0], data[3, 1], data[5, 2] = np.nan, np.inf, -0.0
    problems: list[str] = []
    with np.errstate(all="ignore"):
        for make in (_sharded, _uneven):
            for rows in (8, 2):
                x = make(mesh, data[:rows])
                compiled = dmesh.compile(_writes)
                want = _writes(x)
                for call in range(3):
                    message = _same(compiled(x), want)
                    if message:
                        problems.append(f"{make.__name__} {rows} call {call}: {message}")
    assert_all(comm, not problems, "\n".join(problems))
