"""Compiled plans and segments against eager calls bit for bit: what a segment's plan hands
back, the writes between segments, and shifted slices in a plan.

A segment's plan hands back only the results the Python code still refers to when it
runs (an expression's temporaries are gone by then), with one plan per set of such
results; a write after a segment writes into the blocks the segment computed; a plan
computes shifted slices (``u[2:] - u[:-2]``) as eager does, in pieces, sending only the
cells that cross ranks, not whole blocks redistributed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI
from test_compile import _against_eager, _data, _same, _sharded, _uneven

import dmesh
from dmesh import Replicate
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
            compiled = dmesh.compile(_temporaries, segments="always")  # (plans read below)
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
    compiled = dmesh.compile(_keeps, segments="always")
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
                label = f"{make.__name__} {rows}"
                problems += _against_eager(dmesh.compile(_writes), _writes, (x,), label)
    assert_all(comm, not problems, "\n".join(problems))


def _stencil(u: Any, w: Any) -> Any:
    lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1]
    return lap * w[1:-1, 1:-1], u[1:, :] - u[:-1, :]


def test_shifted_slices_in_a_plan(comm: MPI.Intracomm, mesh: Any) -> None:
    """A 5-point stencil of shifted slices times a replicated weight (cropped to the
    blocks), traced whole: eager's bits on every call, on even, uneven and thin blocks,
    and the plan makes no whole-block redistribution for them."""
    data = _data(mesh, (9, 5), 6)
    data[2, 2], data[4, 1] = np.nan, -np.inf
    weight = dmesh.distribute(_data(mesh, (9, 5), 7), mesh, [Replicate()] * mesh.ndim)
    problems: list[str] = []
    with np.errstate(all="ignore"):
        for make in (_sharded, _uneven):
            for rows in (9, 3):
                u = make(mesh, data[:rows])
                w = weight[:rows]
                compiled = dmesh.compile(_stencil)
                want = _stencil(u, w)
                for call in range(3):
                    message = _same(compiled(u, w), want)
                    if message:
                        problems.append(f"{make.__name__} {rows} call {call}: {message}")
                plan = compiled.describe_plan(u, w)
                if compiled.breaks or "_run_steps" in plan:
                    problems.append(f"{make.__name__} {rows}: {compiled.breaks}\n{plan}")
    assert_all(comm, not problems, "\n".join(problems))


def _reads_four(a: Any, b: Any) -> Any:
    return [float(x) for x in (np.sum(a), np.sum(b * 2.0), np.max(a), np.min(b))]


def test_segments_kept_only_where_faster(comm: MPI.Intracomm, mesh: Any) -> None:
    """``segments="auto"``: three calls in segments, two eager, then the faster way for
    good, the same on every rank (eager's bits throughout); the timings are set here, so
    the test does not depend on this machine's speed. A signature whose scalars were read
    together keeps its segments; a bad policy raises a ValueError naming the ones there
    are."""
    x = _sharded(mesh, _data(mesh, (9, 3), 8))
    y = _uneven(mesh, _data(mesh, (9, 3), 9))
    slow, fast = dmesh.compile(_temporaries), dmesh.compile(_temporaries)
    reads = dmesh.compile(_reads_four)
    problems: list[str] = []
    want, want_reads = _temporaries(x), _reads_four(x, y)
    for call in range(8):
        for compiled in (slow, fast):
            got = compiled(x)
            if _same(got[0], want[0]) or got[1] != want[1]:
                problems.append(f"call {call}: {got} != {want}")
        if reads(x, y) != want_reads:
            problems.append(f"reads call {call}: {reads(x, y)} != {want_reads}")
        if call == 2:  # segmented calls as if they took a second, or no time at all
            for compiled, seconds in ((slow, 1.0), (fast, 0.0)):
                entry = next(iter(compiled.plans.values()))
                if entry.trial is None:
                    problems.append(f"call {call}: no trial")
                else:
                    entry.trial[0] = seconds
    described = [c.describe_plan(x) for c in (slow, fast)] + [reads.describe_plan(x, y)]
    if "runs eagerly" not in described[0] or "runs in segments" not in described[1]:
        problems.append("\n".join(described[:2]))
    if comm.Get_size() > 1 and "runs in segments" not in described[2]:
        problems.append(f"reads: {described[2]}")
    runs = slow.segment_runs
    slow(x)
    if slow.segment_runs != runs:
        problems.append("ran in segments after it was decided eager")
    assert_all(comm, not problems, "\n".join(problems))
    try:
        dmesh.compile(_temporaries, segments="never")
        message = "no error"
    except ValueError as exc:
        message = "" if "'auto'" in str(exc) and "'always'" in str(exc) else str(exc)
    assert_all(comm, not message, message)


def _writes_through_a_row(u: Any) -> Any:
    u = u.copy()
    total = float(np.sum(u))  # a graph break: what follows runs in segments
    row = u[1]  # an int on the sharded dim: a detached view, made eagerly
    row += total  # written through to u, as NumPy's view is
    row[0] = -1.0
    return u, row * 1.0


def test_writes_through_a_detached_row_in_segments(comm: MPI.Intracomm, mesh: Any) -> None:
    """A row read after a break and written through (``row = a[1]; row += s``) changes the
    array and the row as eagerly (and as NumPy), on every call."""
    problems: list[str] = []
    for make in (_sharded, _uneven):
        x = make(mesh, _data(mesh, (5, 3), 23))
        compiled = dmesh.compile(_writes_through_a_row)
        problems += _against_eager(compiled, _writes_through_a_row, (x,), make.__name__)
    assert_all(comm, not problems, "\n".join(problems))
