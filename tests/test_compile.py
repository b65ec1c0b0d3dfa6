"""``dmesh.compile`` (dmesh.ops.compiler): compiled calls equal eager ones bit for bit.

Each program runs eagerly and compiled (the first, tracing call and a replay);
the results must have the same specs and the same block bytes on every rank.
Also: a changed spec or constant retraces, a graph break falls back to eager
execution, a rank-dependent branch raises PlanMismatchError on every rank, and
a replay makes no more collectives than the eager call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import ShardingError
from dmesh.debug import CommMode
from dmesh.ops.compiler import PlanMismatchError, compile
from helpers import assert_all, assert_raises_all


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _leaves(v)]
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _leaves(value[k])]
    return [value]


def _same(got: Any, want: Any) -> str:
    """Empty when ``got`` and ``want`` have the same structure, specs and block bytes."""
    if type(got) is not type(want):
        return f"types {type(got).__name__} and {type(want).__name__}"
    if isinstance(want, (tuple, list, dict)):
        g, w = _leaves(got), _leaves(want)
        if len(g) != len(w):
            return "different structures"
        return next((m for m in (_same(a, b) for a, b in zip(g, w)) if m), "")
    if isinstance(want, dmesh.DArray):
        if got.spec != want.spec:
            return f"specs {got.spec!r} and {want.spec!r}"
        a, b = got.local, want.local
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            return f"blocks {a!r} and {b!r}"
        return ""
    return "" if want == got else f"values {got!r} and {want!r}"


def check(comm: MPI.Comm, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``compile(fn)`` equals ``fn`` on its first (tracing) call and on a replay."""
    compiled = compile(fn)
    want = fn(*args, **kwargs)
    for _ in range(2):
        message = _same(compiled(*args, **kwargs), want)
        assert_all(comm, not message, message)
    assert_all(comm, compiled.traces == 1 and not compiled.breaks, str(compiled.breaks))
    return compiled


def calls(fn: Any, compiled: Any, *args: Any) -> tuple[CommMode, CommMode]:
    """The collectives ``fn(*args)`` makes eagerly, and ``compiled(*args)`` in a replay."""
    with CommMode() as eager:
        fn(*args)
    with CommMode() as replay:
        compiled(*args)
    return eager, replay


def _data(mesh: dmesh.DeviceMesh, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def _sharded(mesh: dmesh.DeviceMesh, x: np.ndarray) -> dmesh.DArray:
    return dmesh.distribute(x, mesh, [Shard(0)] * mesh.ndim)


def _placements(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    """Row-, column-sharded and replicated placements on ``mesh`` (and both dims sharded
    on a 2-D mesh), for a 2-D array."""
    rest = [Replicate()] * (mesh.ndim - 1)
    found = [[Shard(0), *rest], [Shard(1), *rest], [Replicate()] * mesh.ndim]
    if mesh.ndim == 2:
        found.append([Shard(0), Shard(1)])
    return found


def _uneven(mesh: dmesh.DeviceMesh, x: np.ndarray) -> dmesh.DArray:
    """``x`` with uneven blocks (the first rank's one shorter, maybe empty)."""
    return _sharded(mesh, np.concatenate([x[:1], x]))[1:]


def _against_eager(
    compiled: Any, fn: Any, args: tuple[Any, ...], label: str, calls: int = 3
) -> list[str]:
    """What differs between ``fn(*args)`` and ``calls`` calls of ``compiled`` (no message)."""
    want = fn(*args)
    found = []
    for call in range(calls):
        message = _same(compiled(*args), want)
        if message:
            found.append(f"{label} call {call}: {message}")
    return found


def _whole_against_eager(fn: Any, args: tuple[Any, ...], label: str) -> list[str]:
    """What differs between ``fn(*args)`` and calls of ``compile(fn)``, and its graph
    breaks, if any (``fn`` should trace whole)."""
    compiled = compile(fn, segments="always")
    found = _against_eager(compiled, fn, args, label)
    if compiled.breaks:
        found.append(f"{label}: broke at {compiled.breaks}")
    return found


def chain(x: Any, row: Any, scale: float) -> Any:
    y = np.exp(x * scale) + row - 3 * np.sqrt(np.abs(x))
    return np.maximum(y, 0.1) / (1.0 + np.abs(y))


def reductions(x: Any) -> Any:
    s = np.sum(x)
    centred = x - s / x.size
    top = np.sum(x * x, axis=0)
    return {"y": centred * top, "s": s, "m": np.mean(centred, axis=1), "n": x.size}


def test_elementwise_chain_with_broadcasting_and_scalars(comm: MPI.Comm, mesh: Any) -> None:
    x = _sharded(mesh, _data(mesh, (7, 4)))
    row = dmesh.distribute(_data(mesh, (4,), 1), mesh, [Replicate()] * mesh.ndim)
    check(comm, chain, x, row, 0.5)
    check(comm, chain, x, row, scale=0.5)  # keywords


def test_reductions_give_partial_then_are_consumed(comm: MPI.Comm, mesh: Any) -> None:
    x = _sharded(mesh, _data(mesh, (9, 3)))
    check(comm, reductions, x)
    check(comm, reductions, _uneven(mesh, _data(mesh, (9, 3))))


def decomposed(x: Any) -> Any:
    """Functions whose dmesh implementation is a decomposition, a special or keyword form or
    NumPy's own code: traced through, their own NumPy calls recorded."""
    return (
        np.max(x),
        np.min(x, axis=0),
        np.var(x, axis=0),
        np.std(x),
        np.linalg.norm(x, axis=1),
        np.where(x > 0, np.clip(x, -0.5, 0.5), -x),
        np.nanmax(x, axis=0),
        np.sum(x, where=x > 0),
        np.mean(x, axis=0, keepdims=True),
    )


def test_decompositions_are_traced_through(comm: MPI.Comm, mesh: Any) -> None:
    a = _data(mesh, (9, 4))
    a[2, 1], a[5, 3] = np.nan, -np.inf
    check(comm, decomposed, _sharded(mesh, a))
    check(comm, decomposed, _uneven(mesh, a))


def test_mixed_layouts_redistribute(comm: MPI.Comm, mesh: Any) -> None:
    data = _data(mesh, (6, 6))
    a = _sharded(mesh, data)
    b = dmesh.distribute(data.T.copy(), mesh, [Shard(1)] * mesh.ndim)
    r = dmesh.distribute(data, mesh, [Replicate()] * mesh.ndim)

    def mixed(a: Any, b: Any, r: Any) -> Any:
        return (a + b) * r - np.sum(b, axis=0), b

    compiled = check(comm, mixed, a, b, r)
    eager, replay = calls(mixed, compiled, a, b, r)
    message = f"eager {eager.counts()}, replay {replay.counts()}"
    assert_all(comm, replay.total_count <= eager.total_count, message)


def test_uneven_empty_blocks_and_hostile_values(comm: MPI.Comm, mesh: Any) -> None:
    data = _data(mesh, (5, 2))
    data[0, 0], data[1, 1], data[2, 0] = np.nan, np.inf, -np.inf
    x = _uneven(mesh, data)
    check(comm, chain, x, 1.5, 0.25)
    check(comm, reductions, x)
    tiny = _uneven(mesh, data[:1])  # at most one rank holds an element
    check(comm, lambda t: (np.abs(t) * 2 - 1, np.sum(t)), tiny)


def test_star_args_closures_and_returned_arguments(comm: MPI.Comm, mesh: Any) -> None:
    x = _sharded(mesh, _data(mesh, (4, 5)))
    offset = 2.5

    def star(*xs: Any, **named: Any) -> Any:
        total = xs[0] + offset
        for v in xs[1:]:
            total = total * v
        return [total, xs[0], named["k"] * 2]

    compiled = check(comm, star, x, x, k=3)
    got = compiled(x, x, k=3)
    assert_all(comm, got[1] is x, "an argument returned comes back as itself")


def test_spec_or_constant_change_retraces(comm: MPI.Comm, mesh: Any) -> None:
    compiled = compile(chain)
    x = _sharded(mesh, _data(mesh, (6, 2)))
    row = dmesh.distribute(_data(mesh, (2,)), mesh, [Replicate()] * mesh.ndim)
    counts = []
    for args in [(x, row, 0.5), (x, row, 0.5), (x, row, 0.25), (x[1:], row, 0.25)]:
        message = _same(compiled(*args), chain(*args))
        assert_all(comm, not message, message)
        counts.append(compiled.traces)
    assert_all(comm, counts == [1, 1, 2, 3], f"traces {counts}")
    y = x.redistribute(placements=[Replicate()] * mesh.ndim)
    compiled(y, row, 0.25)
    assert_all(comm, compiled.traces == 4, f"traces {compiled.traces}")


def test_graph_break_falls_back_to_eager(comm: MPI.Comm, mesh: Any) -> None:
    x = _sharded(mesh, _data(mesh, (6, 3)))
    captured = _sharded(mesh, _data(mesh, (6, 3), 2))

    def reads_a_value(x: Any) -> Any:
        y = x * 2
        return y + 1 if float(np.sum(y)) > 0 else y - 1

    def uses_a_closure(x: Any) -> Any:
        return x + captured

    def indexes(x: Any) -> Any:
        return x[x > 0] * 3  # a mask: a data-dependent shape

    def kernel_reads_blocks(x: Any) -> Any:
        return np.cumsum(x, axis=0) + np.argmax(x, axis=0)  # kernels that read blocks

    for fn in (reads_a_value, uses_a_closure, indexes, kernel_reads_blocks):
        compiled = compile(fn)
        want = fn(x)
        for _ in range(2):
            message = _same(compiled(x), want)
            assert_all(comm, not message, f"{fn.__name__}: {message}")
        ok = compiled.traces == 1 and len(compiled.breaks) == 1 and compiled.segment_runs >= 2
        assert_all(comm, ok, f"{fn.__name__}: {compiled.traces} traces, {compiled.breaks}")


def test_tracing_resumes_after_a_graph_break(comm: MPI.Comm, mesh: Any) -> None:
    """The ops before and after a break run as compiled segments: the sums on either side
    are packed into one MPI call each, closures' arrays enter as inputs, and the results
    have eager's bits (also on uneven and empty blocks)."""
    data = _data(mesh, (9, 4))
    data[2, 1], data[5, 3] = np.nan, -np.inf
    captured = _sharded(mesh, _data(mesh, (9, 4), 3))

    def broken(x: Any) -> Any:
        a, b = np.sum(x * 2.0), np.sum(x + captured)
        big = float(np.sum(np.abs(captured))) > 1.0  # a value read: the break
        z = x[1:] - a / b if big else x[1:] + 1.0  # basic indexing is recorded
        return np.max(z, axis=0) + np.sum(z * 3.0, axis=0) + np.sum(z * z, axis=0), z

    for x in (_sharded(mesh, data), _uneven(mesh, data)):
        compiled = compile(broken, segments="always")  # (its segments inspected below)
        want = broken(x)
        for _ in range(2):
            message = _same(compiled(x), want)
            assert_all(comm, not message, message)
        eager_mode, compiled_mode = calls(broken, compiled, x)
        got, eager = compiled_mode.counts(), eager_mode.counts()
        ok = len(compiled.breaks) == 1 and compiled.segment_runs == 6
        if comm.Get_size() > 1 and mesh.ndim == 1:
            ok = ok and sum(got.values()) < sum(eager.values())
        assert_all(comm, ok, f"{compiled.breaks} {compiled.segment_runs} {got} {eager}")
        plan = compiled.describe_plan(x)
        assert_all(comm, "runs in segments" in plan and "segment 1:" in plan, plan)


def test_writes_run_the_waiting_ops_first(comm: MPI.Comm, mesh: Any) -> None:
    """An op recorded before a block is written in place sees the old values, as eagerly."""

    def writes(x: Any, c: Any) -> Any:
        y = x * 2 + c
        total = float(np.sum(y))  # a break: the rest runs in a segment
        z = c + total
        c.fill(5.0)  # in place: z's op must run first
        w = c * x
        c[0] = -1.0
        np.add(x, 1.0, out=x)
        return z, w, y - c, x

    data = _data(mesh, (6, 3))
    want = writes(_sharded(mesh, data), _sharded(mesh, data * 3))
    compiled = compile(writes)
    for _ in range(2):
        message = _same(compiled(_sharded(mesh, data), _sharded(mesh, data * 3)), want)
        assert_all(comm, not message, message)


def test_rank_dependent_branch_raises_everywhere(comm: MPI.Comm, mesh: Any) -> None:
    if comm.Get_size() == 1:
        pytest.skip("one rank cannot disagree with itself")
    x = _sharded(mesh, _data(mesh, (4, 4)))

    @compile
    def branch(x: Any) -> Any:
        if mesh.rank == 0:
            return x + 1
        return x * 2

    error = assert_raises_all(comm, PlanMismatchError, branch, x, match="first differ at op 0")
    named = "np.add" in str(error) and "np.multiply" in str(error)
    assert_all(comm, named, f"the message names what each rank traced: {error}")

    @compile
    def longer(x: Any) -> Any:
        y = x + 1
        return np.sin(y) if mesh.rank == comm.Get_size() - 1 else y

    assert_raises_all(comm, PlanMismatchError, longer, x, match="first differ at op 1")


def independent_sums(x: Any) -> Any:
    """Eight sums over the sharded axis (Partial), each consumed by a non-linear op."""
    sums = [np.sum(x * (i + 1.5), axis=0) for i in range(8)]
    return [np.sqrt(np.abs(s)) for s in sums]


def test_independent_reductions_are_coalesced(comm: MPI.Comm, mesh: Any) -> None:
    """Eight independent all-reduces become one MPI call, with the eager result's bits."""
    a = _data(mesh, (7, 5))
    a[1, 2], a[4, 0] = np.nan, -np.inf
    for x in (_sharded(mesh, a), _uneven(mesh, a)):
        compiled = check(comm, independent_sums, x)
        eager, replay = calls(independent_sums, compiled, x)
        counts = f"eager {eager.counts()}, replay {replay.counts()}"
        if mesh.ndim == 1:  # one reduction step each: one MPI call for the eight
            ok = replay.total_count == (1 if comm.Get_size() > 1 else 0)
            ok = ok and eager.total_count == (8 if comm.Get_size() > 1 else 0)
        else:  # two steps each (one per mesh dim): not packed yet, never more than eager
            ok = replay.total_count <= eager.total_count
        assert_all(comm, ok, counts)
    ints = _sharded(mesh, np.arange(35, dtype=np.int64).reshape(7, 5) * 10**15)
    check(comm, independent_sums, ints)  # exact reductions: packed whatever their size


def two_totals(x: Any) -> Any:
    """Two whole-array sums, each consumed at once: two all-reduces eagerly."""
    first = np.sqrt(np.abs(np.sum(x * 2.0)))
    return first, np.exp(np.sum(x + 1.0) / 100.0)


def test_two_all_reduces_are_one_mpi_call(comm: MPI.Comm, mesh: Any) -> None:
    """The acceptance line: two independent all-reduces in one compiled function are one
    MPI call, counted by CommMode (eager makes two), with eager's bits."""
    a = _data(mesh, (7, 5))
    a[3, 3] = -np.inf
    for x in (_sharded(mesh, a), _uneven(mesh, a)):
        compiled = check(comm, two_totals, x)
        eager, replay = calls(two_totals, compiled, x)
        counts = f"eager {eager.counts()}, replay {replay.counts()}"
        ok = True
        if mesh.ndim == 1 and comm.Get_size() > 1:
            ok = eager.counts() == {"all_reduce": 2}
            ok = ok and replay.counts() == {"all_reduce_coalesced": 1}
        assert_all(comm, ok, counts)


def test_gathers_packed_and_undone_moves_dropped(comm: MPI.Comm, mesh: Any) -> None:
    """Independent all-gathers become one MPI call; a move undone before use and a result
    no one uses are dropped; a sum of two partial sums is reduced once."""
    replicated = [Replicate()] * mesh.ndim

    def gathers(x: Any, y: Any) -> Any:
        back = (x * 2).redistribute(mesh, replicated).with_layout(x.spec.layout)
        a, b = x.redistribute(mesh, replicated), y.redistribute(mesh, replicated)
        return a + 1, b * 2, back, np.sqrt(np.abs(np.sum(x) + np.sum(y)))

    data = _data(mesh, (7, 3))
    for make in (_sharded, _uneven):
        x, y = make(mesh, data), make(mesh, data[:, :2] * 3)
        compiled = check(comm, gathers, x, y)
        with CommMode() as mode:
            compiled(x, y)
        counts = mode.counts()
        plan = compiled.describe_plan(x, y)
        ok = "dropped:" in plan and "moved back" in plan and "not used" in plan
        if comm.Get_size() > 1 and mesh.ndim == 1:
            ok = ok and counts == {"all_gather_coalesced": 1, "all_reduce": 1}
        assert_all(comm, ok, f"{counts}\n{plan}")


def test_exact_collectives_start_early(comm: MPI.Comm, mesh: Any) -> None:
    """A max's all-reduce and a gather start (non-blocking) as soon as their operands exist
    and are waited for at their first use, after the independent compute; a float sum's
    all-reduce stays blocking (a non-blocking one may add in another order)."""

    def overlapped(x: Any, y: Any) -> Any:
        m, total = np.max(x), np.sum(x)
        g = x.redistribute(mesh, [Replicate()] * mesh.ndim)
        z = np.sin(y) * 2.0 + 1.0  # independent of the collectives
        return m + z, g - 1.0, total * z

    data = _data(mesh, (6, 4))
    data[1, 2] = np.nan
    x, y = _sharded(mesh, data), _sharded(mesh, data[:, ::-1].copy())
    compiled = check(comm, overlapped, x, y)
    lines = compiled.describe_plan(x, y).split("replay:")[1].splitlines()
    starts = [i for i, line in enumerate(lines) if " h_" in line]
    waits = [i for i, line in enumerate(lines) if "first use: wait" in line]
    sine = next(i for i, line in enumerate(lines) if line.strip().startswith("v") and "f" in line)
    ok = len(starts) == len(waits) >= 1 and max(starts) < min(waits) and sine < min(waits)
    started = [lines[i] for i in starts]
    ok = ok and all((", True)" in x or ".start(" in x) and "'sum'" not in x for x in started)
    if comm.Get_size() == 1 or mesh.ndim > 1:
        ok = True  # a one-rank mesh moves nothing; 2-D meshes move in several steps
    assert_all(comm, ok, "\n".join(lines))


def test_explain_shows_the_plan(comm: MPI.Comm, mesh: Any) -> None:
    """dmesh.debug.explain of a compiled function shows its plan, packs, or why it is eager."""
    x = _sharded(mesh, _data(mesh, (7, 5)))
    compiled = compile(independent_sums)
    compiled(x)
    plan = dmesh.debug.explain(compiled, x).plan or ""
    packed = plan.count(" reduction of ") == (mesh.ndim == 1 and comm.Get_size() > 1)
    assert_all(comm, "np.sum" in plan and "replay:" in plan and packed, plan)
    broken = compile(lambda x: x[x > 0] * 2)
    broken(x)
    text = str(dmesh.debug.explain(broken, x))
    assert_all(comm, "graph break (indexing" in text and "segment 0:" in text, text)


def _heat_step(padded: Any, alpha: float) -> Any:
    centre = padded[1:-1, 1:-1]
    out = padded.copy()
    neighbours = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
    out[1:-1, 1:-1] = centre + alpha * (neighbours - 4 * centre)
    return out


def heat(u: Any, alpha: float) -> Any:
    u = dmesh.map_overlap(_heat_step, u, depth=1, boundary="constant", alpha=alpha)
    return u, np.max(np.abs(u))


def test_map_overlap_compiles_without_its_verdict(comm: MPI.Comm, mesh: Any) -> None:
    """A map_overlap step compiles: the halo exchange and fn run on the blocks, and the
    all-reduce that checks fn's shape on every call is made once, at the first run."""
    for u in (_sharded(mesh, _data(mesh, (9, 6))), _uneven(mesh, _data(mesh, (9, 6)))):
        compiled = check(comm, heat, u, 0.1)
        eager, replay = calls(heat, compiled, u, 0.1)
        counts = f"eager {eager.counts()}, replay {replay.counts()}"
        verdicts = eager.counts().get("all_reduce", 0) - replay.counts().get("all_reduce", 0)
        assert_all(comm, verdicts == 1, counts)

    def wrong_shape(padded: Any) -> Any:
        return padded[1:] if comm.Get_rank() == comm.Get_size() - 1 else padded

    bad = compile(lambda u: dmesh.map_overlap(wrong_shape, u, depth=1))
    u = _sharded(mesh, _data(mesh, (9, 6)))
    assert_raises_all(comm, ShardingError, bad, u, match="padded block")


def test_partial_max_and_min_arguments(comm: MPI.Comm, mesh: Any) -> None:
    """Partial("max")/("min") arguments (the data on mesh coordinate 0, -inf/inf elsewhere):
    compiled equals eager, the reductions they need made in the replay."""
    data = _data(mesh, (6, 4))
    data[1, 2], data[3, 0] = np.nan, -np.inf
    rest = [Replicate()] * (mesh.ndim - 1)
    first = mesh.coordinate[0] == 0
    for op, fill in (("max", -np.inf), ("min", np.inf)):
        terms = data if first else np.full_like(data, fill)
        partial = dmesh.from_local(terms, mesh, [Partial(op), *rest])
        check(comm, chain, partial, 1.5, 0.25)
        check(comm, decomposed, partial)


def test_nested_compiled_functions_are_inlined(comm: MPI.Comm, mesh: Any) -> None:
    """A compiled function called while another traces is inlined into the outer plan: one
    trace, no graph break, eager's bits; called on its own, it compiles as usual."""
    inner = compile(lambda y: np.sin(y) + 1)

    def outer(y: Any) -> Any:
        return inner(y * 2) - np.sum(inner(y), axis=0)

    x = _uneven(mesh, _data(mesh, (7, 3)))
    outer(x)  # eager: inner compiles on its own (one trace per signature)
    before = inner.traces
    compiled = check(comm, outer, x)  # traces outer (inner inlined), then replays it
    ok = compiled.traces == 1 and inner.traces == before
    assert_all(comm, ok, f"inner traced {inner.traces - before} more times inside outer's trace")
    check(comm, inner, x)
