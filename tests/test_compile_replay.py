"""The code a compiled plan runs: temporaries' blocks reused, few locals, eager's bits.

A result no later op reads gives its block to the next elementwise op of its shape
and dtype (``out=``, as eager's and NumPy's temporary elision), never one a view,
a later op or the caller still reads; the plan's names are renamed onto as few
locals as are alive at once, so a trace of a long loop runs in a small frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI
from test_compile import _against_eager, _data, _same, _sharded, _uneven

import dmesh
from helpers import assert_all


def _chain(x: Any) -> Any:
    return ((x + 1.0) * 2.0 - x) / 3.0


def _kept_temporaries(x: Any) -> Any:
    t = x + 1.0
    view = t[1:]  # a view of t: t's block must stay t's
    y = t * 2.0  # t's last elementwise reader, yet the view reads it after
    u = x * 3.0
    w = u - 1.0  # u is returned: its block must stay u's
    return y, view * 1.0, u, w


def _stencil_chain(x: Any) -> Any:
    s = x[2:] + x[:-2]  # shifted slices: eager's pieces in the plan
    t = s * 2.0 - x[1:-1]  # s's block reused, then t's by a shifted op
    return t + x[1:-1] * 0.5, t * 3.0


def _long_loop(x: Any) -> Any:
    u = x.copy()
    for _ in range(300):
        u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    return u


def _source(compiled: Any) -> str:
    entry = next(iter(compiled.plans.values()))
    return str(entry.plan.source)


def test_temporaries_are_reused_where_nothing_else_reads_them(
    comm: MPI.Intracomm, mesh: Any
) -> None:
    data = _data(mesh, (9, 4), 21)
    data[0, 0], data[3, 1], data[5, 2] = np.nan, np.inf, -0.0
    problems: list[str] = []
    for make in (_sharded, _uneven):
        x = make(mesh, data)
        for fn in (_chain, _kept_temporaries, _stencil_chain):
            compiled = dmesh.compile(fn)
            problems += _against_eager(compiled, fn, (x,), f"{make.__name__} {fn.__name__}")
            if compiled.breaks:
                problems.append(f"{fn.__name__}: {compiled.breaks}")
        chain = _source(_compiled(_chain, x))
        if chain.count("out=") < 2:  # (x + 1.0) gives its block to * 2.0, then to - x...
            problems.append(f"no reuse in:\n{chain}")
    assert_all(comm, not problems, "\n".join(problems))


def _compiled(fn: Any, *args: Any) -> Any:
    compiled = dmesh.compile(fn)
    compiled(*args)
    return compiled


def test_a_long_trace_runs_in_a_small_frame(comm: MPI.Intracomm, mesh: Any) -> None:
    x = _uneven(mesh, _data(mesh, (40,), 22))
    compiled = _compiled(_long_loop, x)
    entry = next(iter(compiled.plans.values()))
    names = entry.plan.function.__code__.co_varnames
    message = _same(compiled(x), _long_loop(x)) or _same(compiled(x), _long_loop(x))
    if compiled.breaks or len(names) > 40:  # 300 steps of some 10 ops: 3000 names unrenamed
        message += f" {compiled.breaks} {len(names)} locals"
    assert_all(comm, not message, message)
