"""``dmesh.compile`` at its edges: compiled calls still equal eager ones bit for bit.

Bound methods and the attributes they read, closures whose DArray is rebound,
constants that are equal but have different bits (0.0 and -0.0, NaNs), a mesh
over part of the world, graph breaks followed by hostile values (NaN, inf,
negative square roots, division by zero, int64 overflow) on uneven and empty
blocks, user errors raised on every rank, and the bound on cached plans.
Each compiled function is compared with the eager call on its first (tracing)
call and on a second one (a replay, or a run of the recorded segments).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI
from test_compile import _data, _same, _sharded, _uneven

import dmesh
from dmesh import Replicate
from dmesh.ops.compiler import Compiled, PlanMismatchError
from helpers import assert_all, assert_raises_all

IMAX = np.iinfo(np.int64).max


def _bits(got: Any, want: Any) -> str:
    """``_same``, with scalars (Python or NumPy floats and complexes) compared by type and
    bits (a NaN equals itself, 0.0 is not -0.0); empty when equal."""
    if isinstance(want, (tuple, list)) and type(got) is type(want) and len(got) == len(want):
        return next((m for m in map(_bits, got, want) if m), "")
    if isinstance(want, (float, complex, np.generic)):
        same = type(got) is type(want) and np.asarray(got).tobytes() == np.asarray(want).tobytes()
        return "" if same else f"scalars {got!r} and {want!r}"
    return _same(got, want)


def _compare(compiled: Compiled[Any], fn: Callable[..., Any], *args: Any) -> list[str]:
    """What differs between ``fn(*args)`` and two calls of ``compiled`` (no communication)."""
    want = fn(*args)
    found = [_bits(compiled(*args), want) for _ in range(2)]
    return [f"{getattr(fn, '__name__', fn)} call {k}: {m}" for k, m in enumerate(found) if m]


class Scaled:
    """A model whose step reads float attributes of ``self``."""

    def __init__(self, scale: float, shift: float) -> None:
        self.scale, self.shift = scale, shift
        self.step = dmesh.compile(self._step)

    def _step(self, x: Any) -> Any:
        return np.exp(x * self.scale) - self.shift * np.sum(x, axis=0)

    def broken(self, x: Any) -> Any:
        total = float(np.sum(x))  # a graph break: the method's Python runs on every call
        return x * self.scale + total * self.shift


def test_bound_methods_equal_eager(comm: MPI.Intracomm, mesh: Any) -> None:
    """``self.step = compile(self._step)`` and ``compile(obj.method)`` use ``self``'s floats
    as constants: compiled equals eager, one trace each; a method that breaks the graph
    follows changes of the attributes (a changed constant is a new signature)."""
    problems: list[str] = []
    for x in (_sharded(mesh, _data(mesh, (7, 3))), _uneven(mesh, _data(mesh, (7, 3), 1))):
        obj = Scaled(0.5, 1.25)
        method = dmesh.compile(obj._step)
        problems += _compare(obj.step, obj._step, x) + _compare(method, obj._step, x)
        broken = dmesh.compile(obj.broken)
        for scale, shift in ((0.5, 1.25), (-0.0, 1.25), (2.0, -3.0), (0.5, 1.25)):
            obj.scale, obj.shift = scale, shift
            problems += _compare(broken, obj.broken, x)
        # Three distinct (scale, shift) settings: three signatures, each traced once.
        traced = (obj.step.traces, method.traces, broken.traces, len(broken.breaks))
        if traced != (1, 1, 3, 3) or obj.step.breaks or method.breaks:
            problems.append(f"traces/breaks {traced} {obj.step.breaks} {method.breaks}")
    assert_all(comm, not problems, "\n".join(problems))


def test_changed_attribute_retraces(comm: MPI.Intracomm, mesh: Any) -> None:
    """A float attribute of ``self`` changed between calls retraces the compiled method,
    whose results still equal eager's."""
    x = _sharded(mesh, _data(mesh, (6, 3)))
    obj = Scaled(0.5, 1.0)
    obj.step(x)
    obj.scale = 2.0
    problems = _compare(obj.step, obj._step, x)
    ok = not problems and obj.step.traces == 2
    assert_all(comm, ok, f"{obj.step.traces} traces; " + "\n".join(problems))


class Decorated:
    """A method decorated in the class body."""

    scale = 0.5

    @dmesh.compile
    def step(self, x: Any) -> Any:
        return x * self.scale + 1.0


def test_method_decorated_in_the_class_body(comm: MPI.Intracomm, mesh: Any) -> None:
    """``@dmesh.compile`` on a method binds like a function: ``obj.step(x)`` equals eager."""
    x = _sharded(mesh, _data(mesh, (6, 3)))
    try:
        message = _bits(Decorated().step(x), x * 0.5 + 1.0)
    except TypeError as exc:
        message = f"TypeError: {exc}"
    assert_all(comm, not message, message)


def test_closure_arrays_follow_rebinding(comm: MPI.Intracomm, mesh: Any) -> None:
    """A DArray read from an enclosing scope (a graph break: the call runs in segments, the
    closure's array an input) rebound between calls: the results follow its new values,
    layout and blocks, as eager's do."""
    data = _data(mesh, (7, 3))
    hostile = _data(mesh, (7, 3), 4)
    hostile[1, 1], hostile[2, 0], hostile[3, 2] = np.nan, -np.inf, -0.0
    captured = _sharded(mesh, data * 2)

    def reads_closure(x: Any) -> Any:
        y = np.sqrt(np.abs(x + captured)) * captured
        return y - np.sum(captured, axis=0), np.sum(y * x)

    compiled = dmesh.compile(reads_closure, segments="always")  # (segments on every call)
    x, uneven = _sharded(mesh, data), _uneven(mesh, hostile)
    replicated = dmesh.distribute(hostile, mesh, [Replicate()] * mesh.ndim)
    news = (_sharded(mesh, data * -3), _sharded(mesh, hostile), replicated, _uneven(mesh, data))
    with np.errstate(all="ignore"):
        problems = _compare(compiled, reads_closure, x)
        runs = [compiled.segment_runs]
        for new in news:
            captured = new  # the closure reads the new binding
            problems += _compare(compiled, reads_closure, x)
            runs.append(compiled.segment_runs)
        problems += _compare(compiled, reads_closure, uneven)  # a new signature (not at 1 rank)
    grew = all(b > a for a, b in itertools.pairwise(runs))
    signatures = len({x.spec, uneven.spec})
    if compiled.traces != signatures or len(compiled.breaks) != signatures or not grew:
        problems.append(f"{compiled.traces} traces, {compiled.breaks}, segment runs {runs}")
    assert_all(comm, not problems, "\n".join(problems))


def _add(x: Any, c: Any) -> Any:
    return x + c


def _add_after_a_break(x: Any, c: Any) -> Any:
    top = float(np.max(np.abs(x)))  # a graph break: the rest runs in a segment
    return x + c, c * x - c, top + c


def test_equal_constants_with_different_bits(comm: MPI.Intracomm, mesh: Any) -> None:
    """``x + c`` with c = 0.0, -0.0, np.float64(+-0.0), NaNs of either sign and complex
    zeros, on an ``x`` holding -0.0 and NaN: each constant keys its own plan (0.0 == -0.0,
    yet the sums' bits differ), compiled and in segments, replays included."""
    column = np.array([0.0, -0.0, np.nan, -np.nan, 1.0, -0.0, 0.0, -2.5, np.inf])
    x = _sharded(mesh, np.stack([column, -column[::-1]], axis=1))
    nan = float("nan")
    constants = [0.0, -0.0, np.float64(-0.0), np.float64(0.0), nan, -nan, -0.0j, complex(-0.0)]
    problems: list[str] = []
    plain, segmented = dmesh.compile(_add), dmesh.compile(_add_after_a_break)
    with np.errstate(all="ignore"):
        for c in constants + constants:  # the second round replays every plan
            problems += _compare(plain, _add, x, c) + _compare(segmented, _add_after_a_break, x, c)
    counts = (plain.traces, segmented.traces, len(segmented.breaks))
    if counts != (len(constants),) * 3:  # a trace (and a break) per constant
        problems.append(f"traces (plain, segmented) and breaks {counts}")
    assert_all(comm, not problems, "\n".join(problems))


def test_mesh_over_part_of_the_world(comm: MPI.Intracomm) -> None:
    """A compiled function on a mesh of the first world_size - 1 ranks equals eager on the
    members; a branch on the sub-mesh's rank raises PlanMismatchError on every member, on
    the first call and again on the second; non-members' calls return (eagerly, no block)."""
    world = comm.Get_size()
    if world < 2:
        pytest.skip("a mesh over part of the world needs two ranks")
    problems: list[str] = []
    with dmesh.init_mesh((world - 1,), comm=comm) as sub:
        data = _data(sub, (7, 3))
        data[2, 1] = np.nan

        def fn(x: Any) -> Any:
            return np.sqrt(np.abs(x)) + np.sum(x, axis=0), np.max(x, axis=0)

        def branch(x: Any) -> Any:
            return x + 1 if sub.rank == 0 else x * 2

        compiled, branched = dmesh.compile(fn), dmesh.compile(branch)
        xs = (_sharded(sub, data), _uneven(sub, data))  # one layout on a one-rank mesh
        for x in xs:
            problems += _compare(compiled, fn, x)
            for k in range(2):
                try:
                    out = branched(x)
                except PlanMismatchError as exc:
                    if not sub.is_member or "first differ at op 0" not in str(exc):
                        problems.append(f"call {k}: {exc}")
                else:
                    if sub.is_member and sub.size() > 1:
                        problems.append(f"call {k}: no PlanMismatchError on a member")
                    elif not sub.is_member and out.local.size:
                        problems.append(f"call {k}: a non-member holds {out.local!r}")
        if sub.is_member and compiled.traces != len({x.spec for x in xs}):
            problems.append(f"{compiled.traces} traces on a member")
        if not sub.is_member and compiled.traces:
            problems.append(f"a non-member traced: {compiled.describe_plan(x)}")
    assert_all(comm, not problems, "\n".join(problems))


def hostile(x: Any, k: Any) -> Any:
    """A reduction read as a float (a break), then NaN/inf makers and int64 overflow."""
    s = np.sum(x)
    t = float(s)
    y = np.sqrt(x - t) + np.log(-np.abs(x)) + x / (x - x) - t / (x * 0.0)
    top = np.max(y, axis=0) if x.shape[0] else np.sum(y, axis=0)
    wraps = (k + k, k * k, k - (-k), np.sum(k, axis=0), np.sum(k * 3), k // (k - k), k % (k - k))
    low = float(np.min(np.abs(y) * 0.5 + t)) if x.size else t  # a second break
    return y, s, t, top, wraps, y * low, np.sum(y * y, axis=0)


def test_graph_breaks_with_hostile_values(comm: MPI.Intracomm, mesh: Any) -> None:
    """Segments around two value reads, computing sqrt and log of negatives, divisions by
    zero, NaN and inf, and int64 sums and products that wrap, on even, uneven and empty
    blocks: eager's bits (Python floats by their bits too)."""
    data = _data(mesh, (6, 3), 7)
    data[0, 0], data[1, 1], data[2, 2], data[3, 0] = np.nan, -np.inf, -0.0, np.inf
    ints = np.full((6, 3), IMAX, np.int64) - np.arange(18).reshape(6, 3)
    ints[4] = np.iinfo(np.int64).min
    problems: list[str] = []
    with np.errstate(all="ignore"):
        for make in (_sharded, _uneven):
            for rows in (6, 1, 0):
                x, k = make(mesh, data[:rows]), make(mesh, ints[:rows])
                compiled = dmesh.compile(hostile)
                problems += [
                    f"{make.__name__} {rows}: {m}" for m in _compare(compiled, hostile, x, k)
                ]
                if compiled.traces != 1 or len(compiled.breaks) != 1 or not compiled.segment_runs:
                    problems.append(f"{rows} rows: {compiled.traces} traces, {compiled.breaks}")
    assert_all(comm, not problems, "\n".join(problems))


def test_user_errors_raise_on_every_rank(comm: MPI.Intracomm, mesh: Any) -> None:
    """A shape mismatch in np.add (before or after a graph break) and the function's own
    raise give the same exception class on every rank, on the first and the second call."""
    a, b = _sharded(mesh, _data(mesh, (6, 3))), _sharded(mesh, _data(mesh, (5, 2)))

    def mismatch(a: Any, b: Any) -> Any:
        return np.add(a * 2.0, b)

    def mismatch_after_a_break(a: Any, b: Any) -> Any:
        return np.add(a * float(np.sum(a)), b)

    def raises(a: Any, b: Any) -> Any:
        y = a * 2.0 + np.sum(b)
        if y.shape[0] > 3:
            raise KeyError("the function's own error")
        return y

    for fn, error in (
        (mismatch, ValueError),
        (mismatch_after_a_break, ValueError),
        (raises, KeyError),
    ):
        assert_raises_all(comm, error, fn, a, b)  # eager
        compiled = dmesh.compile(fn)
        for _ in range(2):
            assert_raises_all(comm, error, compiled, a, b)
        assert_all(comm, compiled.traces == 1, f"{fn.__name__}: {compiled.traces} traces")


def test_cache_bound_evicts_the_least_recently_used_plan(comm: MPI.Intracomm, mesh: Any) -> None:
    """``@dmesh.compile(cache_size=2)`` called with three constants keeps two plans: one
    eviction, named by describe_plan; the evicted signature retraces, with eager's bits,
    and evicts the plan used least recently (not the oldest)."""

    @dmesh.compile(cache_size=2)
    def scaled(x: Any, s: float) -> Any:
        return np.sin(x) * s + np.sum(x, axis=0)

    x = _uneven(mesh, _data(mesh, (7, 3)))
    problems: list[str] = []
    for s in (1.0, 2.0, -0.0):
        problems += _compare(scaled, scaled.fn, x, s)
    latest, evicted = scaled.describe_plan(x, -0.0), scaled.describe_plan(x, 1.0)
    state = (scaled.evictions, scaled.traces, len(scaled.plans))
    if state != (1, 3, 2) or "evicted" not in latest or "not traced" not in evicted:
        problems.append(f"(evictions, traces, plans) {state}\n{latest}\n{evicted}")
    problems += _compare(scaled, scaled.fn, x, 2.0)  # a hit: 2.0 is now the most recent
    problems += _compare(scaled, scaled.fn, x, 1.0)  # retraced: -0.0's plan goes now
    if (scaled.evictions, scaled.traces) != (2, 4):
        problems.append(f"after a retrace: {scaled.evictions} evictions, {scaled.traces} traces")
    if "not traced" in scaled.describe_plan(x, 2.0) or "not traced" not in scaled.describe_plan(
        x, -0.0
    ):
        problems.append("the least recently used plan was not the one evicted")
    assert_all(comm, not problems, "\n".join(problems))


OFFSET = 1.0  # a module constant read by a compiled function (see the test below)


def _offset(x: Any) -> Any:
    return x * 2.0 + OFFSET


def test_changed_global_or_closure_constant_retraces(comm: MPI.Intracomm, mesh: Any) -> None:
    """A module global or a closure's float that changes between calls retraces (it is a
    constant of the plan), so the results follow it as eager's do."""
    global OFFSET
    x = _sharded(mesh, _data(mesh, (6, 3)))
    compiled = dmesh.compile(_offset)
    problems: list[str] = []
    factor = 3.0

    def scaled(x: Any) -> Any:
        return x * factor

    closure = dmesh.compile(scaled)
    try:
        for value in (1.0, -0.0, 1.0, 5.0):
            OFFSET = factor = value
            problems += _compare(compiled, _offset, x) + _compare(closure, scaled, x)
    finally:
        OFFSET = 1.0
    ok = not problems and compiled.traces == closure.traces == 3
    assert_all(comm, ok, f"{compiled.traces} {closure.traces} " + "\n".join(problems))


def test_astype_of_a_recorded_result(comm: MPI.Intracomm, mesh: Any) -> None:
    """``.astype`` of an op's result inside a compiled function (Game of Life's
    ``((N == 3) | (Z & (N == 2))).astype(Z.dtype)``): a plain DArray, eager's values,
    on every call (it raised a TypeError making the result as the stand-in's type)."""
    z = np.arange(24).reshape(6, 4) % 3 == 0
    start = dmesh.distribute(z.astype(np.int64), mesh, [dmesh.Shard(0)] * mesh.ndim)

    def rule(a: Any) -> Any:
        n = a + np.roll(a, 1, 0) + np.roll(a, -1, 1)
        return ((n == 2) | (a & (n == 1))).astype(a.dtype)

    compiled = dmesh.compile(rule)
    eager = start
    state = start
    for _ in range(3):
        eager = rule(eager)
        state = compiled(state)
        assert_all(comm, type(state) is dmesh.DArray, f"{type(state)}")
        assert_all(comm, state.dtype == np.int64, f"{state.dtype}")
        difference = _same(state, eager)
        assert_all(comm, not difference, difference)


def test_copy_is_recorded(comm: MPI.Intracomm, mesh: Any) -> None:
    """``u.copy()`` (most time steps start with one) is an op of the plan, not a graph
    break; the copy is a new block on every call, as eager's."""
    u = dmesh.distribute(np.arange(12.0).reshape(6, 2) - 4.5, mesh, [dmesh.Shard(0)] * mesh.ndim)

    def step(a: Any) -> Any:
        b = a.copy()
        return b * 2.0 + a, a.copy()

    compiled = dmesh.compile(step)
    for _ in range(3):
        got, again = compiled(u)
        want, _ = step(u)
        difference = _same(got, want)
        assert_all(comm, not difference, difference)
        assert_all(comm, not compiled.breaks, f"breaks: {compiled.breaks}")
        assert_all(comm, not np.shares_memory(again.local, u.local), "the copy is the input")
        difference = _same(again, u)
        assert_all(comm, not difference, difference)
