"""dmesh.debug: CommMode records, explain reports, checking mode and the hang watchdog."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
import dmesh.collectives as C
import dmesh.ops.dispatch
from dmesh import Partial, Replicate, Shard, _hooks, debug
from dmesh.collectives import tracing
from dmesh.core.plan import estimate_cost
from helpers import assert_all, assert_equal_all, assert_raises_all, launch_job

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def mesh(comm: MPI.Intracomm):  # type: ignore[no-untyped-def]
    with dmesh.init_mesh(comm=comm, names="x") as m:
        yield m


def _block_rows(n: int, size: int, rank: int) -> int:
    return len(np.array_split(np.arange(n), size)[rank])


def test_shard_to_replicate_is_one_all_gather_of_known_bytes(comm, mesh) -> None:
    """S(0) -> R of a 7x3 float64 array: one all_gather; sent = own rows, received = all."""
    a = dmesh.distribute(np.arange(21.0).reshape(7, 3), mesh, [Shard(0)])
    with debug.CommMode() as mode:
        full = a.redistribute(mesh, [Replicate()])
    rows = _block_rows(7, comm.Get_size(), comm.Get_rank())
    assert_equal_all(comm, full.local, np.arange(21.0).reshape(7, 3))
    if comm.Get_size() == 1:  # a mesh dim of size 1: the block is the array, nothing moves
        assert_all(comm, mode.counts() == {}, repr(mode.counts()))
        return
    assert_all(comm, mode.counts() == {"all_gather": 1}, repr(mode.counts()))
    (record,) = mode.records
    ok = (
        record.sent_bytes == rows * 3 * 8
        and record.received_bytes == 7 * 3 * 8
        and record.mesh_dim == 0
        and record.group == "mesh dim 0 ('x')"
        and record.op == "DArray.redistribute"
        and record.site.startswith("test_debug.py:")
    )
    assert_all(comm, ok, repr(record))
    assert_all(comm, mode.bytes() == {"all_gather": (rows * 24, 7 * 24)}, repr(mode.bytes()))


def test_two_dim_mesh_gathers_over_each_dim(comm) -> None:
    """(S(0), S(1)) -> (R, R) on a (2, 2) mesh: an all_gather on each mesh dim."""
    if comm.Get_size() != 4:
        pytest.skip("needs 4 ranks for a (2, 2) mesh")
    with dmesh.init_mesh((2, 2), names=("x", "y"), comm=comm) as mesh:
        a = dmesh.distribute(np.arange(30.0).reshape(5, 6), mesh, [Shard(0), Shard(1)])
        with debug.CommMode() as mode:
            a.full_array()
        i = mesh.coordinate[0]
        rows, cols = (3, 2)[i], 3
        groups = [(r.collective, r.mesh_dim, r.sent_bytes, r.received_bytes) for r in mode.records]
        # Rows first (mesh dim 0 gathers this rank's block column), then columns.
        expected = [
            ("all_gather", 0, rows * cols * 8, 5 * cols * 8),
            ("all_gather", 1, 5 * 3 * 8, 5 * 6 * 8),
        ]
        assert_all(comm, groups == expected, repr(groups))


def test_partial_to_replicate_and_ops_are_attributed(comm, mesh) -> None:
    """A Partial reduced by all_reduce; NumPy calls and float() named as the causing op."""
    n = comm.Get_size()
    p = dmesh.from_local(np.full((2, 3), 1.0), mesh, [Partial("sum")])
    a = dmesh.distribute(np.arange(12.0).reshape(4, 3), mesh, [Shard(0)])
    b = dmesh.distribute(np.ones((3, 2)), mesh, [Replicate()])
    with debug.CommMode() as mode:
        r = p.redistribute(mesh, [Replicate()])
        c = a @ b
        total = float(np.sum(c))
    assert_equal_all(comm, r.local, np.full((2, 3), float(n)))
    assert_all(comm, total == float(np.arange(12.0).reshape(4, 3).sum() * 2), str(total))
    by_op = mode.counts("op_collective")
    expected = {("DArray.redistribute", "all_reduce"): 1, ("float(DArray)", "all_reduce"): 1}
    if n == 1:  # one partial term on a mesh dim of size 1: nothing to reduce, no message
        assert_all(comm, by_op == {}, repr(by_op))
        return
    assert_all(comm, by_op == expected, repr(by_op))
    first = mode.records[0]
    assert_all(comm, first.sent_bytes == 48 and first.received_bytes == 48, repr(first))


def test_modes_nest_and_cost_nothing_outside(comm, mesh) -> None:
    """An inner mode sees its block only; after both exit nothing is watched or recorded."""
    a = dmesh.distribute(np.arange(10.0), mesh, [Shard(0)])
    with debug.CommMode() as outer:
        a.full_array()
        with debug.CommMode() as inner:
            float(np.sum(a))
        a.full_array()
    a.full_array()
    counts = (outer.counts(), inner.counts())
    expected = ({"all_gather": 2, "all_reduce": 1}, {"all_reduce": 1})
    if comm.Get_size() == 1:  # a mesh dim of size 1: no gather, no reduction
        expected = ({}, {})
    assert_all(comm, counts == expected, repr(counts))
    unwatched = (
        not tracing.hooked
        and _hooks.dispatch_ufunc is dmesh.ops.dispatch.dispatch_ufunc
        and _hooks.dispatch_function is dmesh.ops.dispatch.dispatch_function
    )
    assert_all(comm, unwatched, "a hook stayed installed")
    assert_raises_all(comm, dmesh.DMeshError, lambda: outer.__enter__().__enter__())
    outer.__exit__(None, None, None)


def test_watching_changes_nothing_communicated(comm) -> None:
    """A one-element partial's value is one reduction over every partial mesh dim, watched
    or not (it used to take the planned one-dim-at-a-time route under CommMode), same bits."""
    shape = (2, comm.Get_size() // 2) if comm.Get_size() % 2 == 0 else (comm.Get_size(), 1)
    with dmesh.init_mesh(shape, comm=comm) as mesh2:
        full = np.array([1.5, np.nan, -0.0, 3.0, 7.0, -2.5, 5.0])
        a = dmesh.distribute(full, mesh2, [Shard(0), Shard(0)])
        got = []
        for reduce in (np.sum, np.max, np.prod):
            unwatched = reduce(a).full_array()
            with debug.CommMode() as mode:
                watched = reduce(a).full_array()
            sizes = [r.group_size for r in mode.records]
            want = [comm.Get_size()] if comm.Get_size() > 1 else []
            got.append((unwatched.tobytes() == watched.tobytes(), sizes == want, sizes))
    assert_all(comm, all(same and one for same, one, _ in got), repr(got))


def test_watched_move_to_a_mesh_of_another_shape(comm, mesh) -> None:
    """Moving to a mesh of another shape works watched (the estimate for the report used to
    plan it as a move on one mesh and raise IndexError), with the unwatched result."""
    full = np.arange(21.0).reshape(7, 3)
    a = dmesh.distribute(full, mesh, [Shard(0)])
    with dmesh.init_mesh((1, comm.Get_size()), comm=comm) as other:
        unwatched = a.redistribute(other, [Replicate(), Shard(0)]).to_local()
        with debug.CommMode() as mode, debug.checking():
            watched = a.redistribute(other, [Replicate(), Shard(0)]).to_local()
        block = full[np.array_split(np.arange(7), comm.Get_size())[comm.Get_rank()]]
    ok = np.array_equal(unwatched, watched) and np.array_equal(watched, block)
    assert_all(comm, ok and len(mode.records) <= 1, repr(mode.counts()))


def test_summary_and_json(comm, mesh) -> None:
    """summary() is a table with a total line; to_json() round-trips the records."""
    a = dmesh.distribute(np.arange(10.0), mesh, [Shard(0)])
    with debug.CommMode() as mode:
        a.full_array()
        float(np.sum(a))
    text = mode.summary()
    lines = text.splitlines()
    # At one rank (a mesh dim of size 1) neither makes a collective.
    made = ["all_gather", "all_reduce"] if comm.Get_size() > 1 else []
    ok = (
        lines[1].split() == ["op", "collective", "group", "calls", "sent", "received"]
        and lines[-1].split()[:2] == ["total", str(len(made))]
        and ("DArray.full_array" in text or not made)
    )
    data = json.loads(mode.to_json())
    ok = ok and data["counts"] == dict.fromkeys(made, 1)
    ok = ok and [r["collective"] for r in data["records"]] == made
    assert_all(comm, ok, text)
    assert_raises_all(comm, dmesh.ArgumentError, mode.counts, "rank")


def test_direct_collective_calls_are_recorded(comm) -> None:
    """A call to the collectives package is recorded under its own name, once."""
    with debug.CommMode() as mode:
        C.all_gather_coalesced([np.ones(2), np.ones(3)], 0, comm)  # uses all_gather inside
        C.broadcast(np.arange(4) if comm.Get_rank() == 0 else None, 0, comm)
    ops_seen = [(r.op, r.collective) for r in mode.records]
    expected = [
        ("dmesh.collectives.all_gather_coalesced", "all_gather_coalesced"),
        ("dmesh.collectives.broadcast", "broadcast"),
    ]
    assert_all(comm, ops_seen == expected, repr(ops_seen))


def test_explain_reports_strategy_redistribution_and_cost(comm, mesh) -> None:
    """a @ b with b sharded the wrong way: b is gathered, and the estimate is the model's."""
    n = comm.Get_size()
    a_np, b_np = np.arange(24.0).reshape(6, 4), np.arange(8.0).reshape(4, 2)
    a = dmesh.distribute(a_np, mesh, [Shard(0)])
    b = dmesh.distribute(b_np, mesh, [Shard(1)])
    explanation = debug.explain(lambda x, y: x @ y, a, b)
    assert_equal_all(comm, explanation.result.full_array(), a_np @ b_np)
    (op,) = explanation.ops
    text = explanation.report()
    ok = op.label == "np.matmul" and op.result is not None and text.startswith("[1] np.matmul(")
    if n > 1:
        (moved,) = op.redistributions
        expected = estimate_cost(moved.source.layout, moved.target.layout, 8)
        ok = ok and moved.cost == expected and op.estimated_cost == expected and expected > 0
        ok = ok and "redistribute" in text and op.collectives
    assert_all(comm, bool(ok), text)


def test_explain_groups_calls_outside_numpy(comm, mesh) -> None:
    """full_array() and float() outside NumPy calls are reported under their dmesh names."""
    a = dmesh.distribute(np.arange(10.0), mesh, [Shard(0)])
    explanation = debug.explain(lambda: (a.full_array(), float(np.sum(a))))
    labels = [op.label for op in explanation.ops]
    expected = ["DArray.full_array", "np.sum", "float(DArray)"]
    if comm.Get_size() == 1:
        # A mesh dim of size 1: full_array() moves nothing (the planner's step-less
        # redistribution is what explain() reports) and float() reads the one term.
        expected = ["redistribute", "np.sum"]
    assert_all(comm, labels == expected, str(explanation))


# -- checking mode ----------------------------------------------------------------------------


def _diverge(comm: MPI.Intracomm) -> None:
    x = np.ones(3)
    if comm.Get_rank() == 0:
        C.all_reduce(x, "sum", comm)
    else:
        C.all_gather(x, 0, comm)


def test_checking_turns_divergence_into_an_error_on_every_rank(comm) -> None:
    if comm.Get_size() == 1:
        pytest.skip("a divergence needs two ranks")
    # Without checking the two ranks would wait forever; pytest-timeout ends that.
    with debug.checking():
        error = assert_raises_all(comm, debug.CollectiveMismatchError, _diverge, comm)
    text = str(error)
    ok = "rank 0: all_reduce(float64[3])" in text and "rank 1: all_gather(float64[3])" in text
    assert_all(comm, ok, text)
    assert_all(comm, not tracing.checking_enabled() and not tracing.hooked)


def test_checking_lets_a_correct_program_through(comm, mesh) -> None:
    """Uneven gathers, broadcasts from one rank and NumPy calls agree under checking."""
    rank = comm.Get_rank()
    a_np = np.arange(35.0).reshape(7, 5)
    with debug.checking():
        a = dmesh.distribute(a_np, mesh, [Shard(0)])
        got = (a @ a.T).full_array()
        total = float(np.sum(a))
        pieces = C.all_gather(np.ones((rank % 3, 2)), 0, comm)
        if rank == 0:  # noqa: SIM108 - two call lines in one function must pass
            data = C.broadcast(np.arange(3), 0, comm)
        else:
            data = C.broadcast(None, 0, comm)
    assert_equal_all(comm, got, a_np @ a_np.T)
    assert_all(comm, total == a_np.sum() and data.tolist() == [0, 1, 2])
    size = comm.Get_size()
    assert_all(comm, pieces.shape == (sum(r % 3 for r in range(size)), 2))


def test_checking_compares_the_calling_function(comm) -> None:
    """The same collective reached from two functions is a divergence too."""
    if comm.Get_size() == 1:
        pytest.skip("a divergence needs two ranks")

    def left() -> None:
        C.all_reduce(np.ones(2), "sum", comm)

    def right() -> None:
        C.all_reduce(np.ones(2), "sum", comm)

    with debug.checking():
        error = assert_raises_all(
            comm, debug.CollectiveMismatchError, left if comm.Get_rank() == 0 else right
        )
    assert_all(comm, "left" in str(error) and "right" in str(error), str(error))


# -- whole jobs: DMESH_CHECK and DMESH_HANG_TIMEOUT ----------------------------------------------

DIVERGING_JOB = textwrap.dedent(
    """
    import numpy as np
    from mpi4py import MPI
    import dmesh
    from dmesh import Shard

    mesh = dmesh.init_mesh(-1, names="x")
    a = dmesh.distribute(np.arange(12.0), mesh, [Shard(0)])
    try:
        if mesh.rank == 0:
            print("sum", float(np.sum(a)))  # rank 0 only: a bug
        a.full_array()
    except dmesh.CollectiveMismatchError as exc:
        print(f"rank {mesh.rank} caught CollectiveMismatchError", flush=True)
    """
)

HANGING_JOB = textwrap.dedent(
    """
    import numpy as np
    from mpi4py import MPI
    import dmesh.collectives as C

    world = MPI.COMM_WORLD
    other = world.Dup()
    if world.Get_rank() == 0:
        C.all_reduce(np.ones(4), "sum", world)
    else:
        C.all_gather(np.ones(4), 0, other)
    """
)

ASYNC_HANGING_JOB = textwrap.dedent(
    """
    import numpy as np
    from mpi4py import MPI
    import dmesh.collectives as C

    world = MPI.COMM_WORLD
    if world.Get_rank() == 0:  # rank 1 never joins: rank 0 waits forever
        pending = C.all_reduce(np.ones(4), "sum", world, async_op=True)
        pending.wait()
    """
)


def _run_job(tmp_path_factory, name, text, ranks, env):  # type: ignore[no-untyped-def]
    """(the finished job or None if ``launch_job`` had to kill it, what to report)."""
    script = Path(tmp_path_factory.mktemp("debug")) / name
    script.write_text(text)
    try:
        child = launch_job(str(script), ranks, extra_env=env)
    except subprocess.TimeoutExpired as exc:
        return None, f"still running after {exc.timeout} s: {exc.stderr!r}"
    return child, f"exit {child.returncode}\nstdout: {child.stdout}\nstderr: {child.stderr}"


@pytest.mark.job
def test_dmesh_check_reports_a_rank_dependent_sequence_on_every_rank(
    comm, tmp_path_factory
) -> None:
    ok, message = True, ""
    if comm.Get_rank() == 0:
        child, message = _run_job(
            tmp_path_factory, "diverge.py", DIVERGING_JOB, 3, {"DMESH_CHECK": "1"}
        )
        caught = sorted(re.findall(r"rank (\d) caught", child.stdout if child else ""))
        wanted = ["0", "1", "2"]
        ok = child is not None and child.returncode == 0 and caught == wanted
    assert_all(comm, ok, message)


def _line_of(text: str, needle: str) -> int:
    return 1 + next(i for i, t in enumerate(text.splitlines()) if needle in t)


HANGS = {
    # Two ranks blocked in collectives on different communicators: both report.
    "collectives": (
        HANGING_JOB,
        "2",
        [
            "[rank 0] dmesh hang watchdog: blocked",
            "all_reduce(float64[4]) on COMM_WORLD at hang.py:"
            f"{_line_of(HANGING_JOB, 'all_reduce')} in <module>",
            "[rank 1] dmesh hang watchdog: blocked",
            "all_gather(float64[4])",
        ],
    ),
    # Rank 0 waits for an async collective rank 1 never joins.
    "async-wait": (
        ASYNC_HANGING_JOB,
        "1",
        [
            "[rank 0] dmesh hang watchdog",
            "the wait for an async collective (AsyncArray) at hang.py",
            "last completed collective: all_reduce(float64[4])",
        ],
    ),
}


@pytest.mark.job
@pytest.mark.parametrize("case", list(HANGS))
def test_hang_watchdog_reports_the_blocked_call_and_aborts(comm, tmp_path_factory, case) -> None:
    """The job ends by the watchdog's abort, not by ``launch_job`` killing it (no clock read)."""
    job, timeout, expected = HANGS[case]
    ok, message = True, ""
    if comm.Get_rank() == 0:
        child, message = _run_job(
            tmp_path_factory, "hang.py", job, 2, {"DMESH_HANG_TIMEOUT": timeout}
        )
        err = child.stderr if child else ""
        ok = child is not None and child.returncode != 0
        ok = ok and all(text in err for text in expected)
    assert_all(comm, ok, message)


@pytest.mark.job
def test_bad_settings_are_refused(comm, tmp_path_factory) -> None:
    ok, message = True, ""
    if comm.Get_rank() == 0:
        child, message = _run_job(
            tmp_path_factory, "probe.py", "import dmesh\n", 1, {"DMESH_HANG_TIMEOUT": "soon"}
        )
        ok = (
            child is not None
            and child.returncode != 0
            and "DMESH_HANG_TIMEOUT='soon'" in child.stderr
        )
    assert_all(comm, ok, message)
