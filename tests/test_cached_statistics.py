"""``var``, ``std``, ``linalg.norm`` and ``allclose`` seen before take their cached plans
(dmesh.ops.rules.statistics_fast, elementwise_functions.allclose): a replayed call gives the
first (general) call's spec and bits, NumPy's values (1e-12; NumPy's bits for a vector norm
on one rank), the same bits on every rank, and only its planned moves; a change of
argument or spec in a row takes another plan, never a stale one."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, _hooks
from dmesh.collectives.errors import UnsupportedError
from dmesh.darray import DArray
from dmesh.ops.compiler import compile
from dmesh.ops.rules import statistics_fast
from helpers import BitVerdict, assert_all, assert_raises_all

R = Replicate()
RNG = np.random.default_rng(41)
F = RNG.standard_normal((7, 5)) * 3 + 100  # an offset: the two passes matter
HOSTILE = F.copy()
HOSTILE[2, 1], HOSTILE[5, 3], HOSTILE[0, 0], HOSTILE[6, 4] = np.nan, np.inf, -0.0, -np.inf
INTS = RNG.integers(-(2**40), 2**40, (7, 5))
INTS[3, 2] = np.iinfo(np.int64).max
DATA = {
    "f8": F,
    "f4": (F - 100).astype(np.float32),
    "i8": INTS,
    "bool": F > 100,
    "c16": F + 1j * F[::-1],
    "c8": (F - 100 + 1j * F[::-1]).astype(np.complex64),
    "hostile": HOSTILE,
    "short": F[:2],  # fewer rows than ranks: empty blocks
}
VAR_KWARGS: list[dict[str, Any]] = [
    {},
    {"axis": 0},
    {"axis": 1},
    {"axis": -1, "keepdims": True},
    {"axis": (0, 1)},
    {"ddof": 1},
    {"axis": 0, "ddof": 1.5},
    {"dtype": np.float32},
    {"axis": 1, "dtype": np.float64, "keepdims": True},
]
NORM_KWARGS: list[dict[str, Any]] = [
    {},
    {"ord": "fro"},
    {"keepdims": True},
    {"axis": 0},
    {"axis": 1, "ord": 2},
    {"axis": -1, "keepdims": True},
    {"axis": (0, 1)},
    {"axis": (1, 0), "ord": "fro", "keepdims": True},
    {"axis": 0, "ord": 1},  # (the general path: not planned)
]
VECTOR_KWARGS: list[dict[str, Any]] = [{}, {"ord": 2}, {"keepdims": True}, {"axis": 0}]


def _layouts(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    rest = [R] * (mesh.ndim - 1)
    both = [[Shard(0), Shard(1)], [Shard(1), Shard(1)], [R, Shard(0)]] if mesh.ndim == 2 else []
    return [[Shard(0), *rest], [Shard(1), *rest], [R] * mesh.ndim, *both]


def _arrays(mesh: dmesh.DeviceMesh, x: np.ndarray) -> Iterator[tuple[DArray, str]]:
    """``x`` in every layout, and with uneven blocks (the first rank's one shorter)."""
    for placements in _layouts(mesh):
        if max((p.dim for p in placements if isinstance(p, Shard)), default=0) < x.ndim:
            yield dmesh.distribute(x, mesh, placements), repr(placements)
    rows = [Shard(0)] * mesh.ndim
    yield dmesh.distribute(np.concatenate([x[:1], x]), mesh, rows)[1:], "uneven"


def _tolerance(dtype: np.dtype) -> float:
    return 1e-5 if dtype in (np.float32, np.complex64) else 1e-12


def _check_calls(verdict: BitVerdict, func: Callable[..., Any], a: DArray, x: np.ndarray,
                 where: str, exact: bool = False, **kwargs: Any) -> None:  # fmt: skip
    """Three calls: the first (general) one's spec and bits again, NumPy's values."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.asarray(func(x, **kwargs))
        got = [func(a, **kwargs) for _ in range(3)]
    where = f"{where} {func.__name__}({kwargs})"
    first = got[0]
    for i, result in enumerate(got[1:], 1):
        same = result.spec is first.spec and result.local.tobytes() == first.local.tobytes()
        verdict.check(same, f"{where}: call {i} {result!r} {result.local!r} != {first.local!r}")
    whole = np.asarray(first.full_array())
    verdict.bits(where, whole)
    if whole.dtype != want.dtype or whole.shape != want.shape:
        verdict.check(False, f"{where}: {whole.dtype}{whole.shape} != {want.dtype}{want.shape}")
        return
    if exact:
        verdict.check(np.array_equal(whole, want, equal_nan=True), f"{where}: {whole} != {want}")
    else:
        tol = _tolerance(whole.dtype)
        ok = np.allclose(whole, want, rtol=tol, atol=tol, equal_nan=True)
        verdict.check(ok, f"{where}: {whole} != {want}")


@pytest.mark.parametrize("name", sorted(DATA))
def test_var_and_std_replay_the_general_path(comm: MPI.Comm, mesh: dmesh.DeviceMesh,
                                             name: str) -> None:  # fmt: skip
    x = DATA[name]
    kwargs_list = VAR_KWARGS if name in ("f8", "hostile") else VAR_KWARGS[:5]
    with BitVerdict(comm) as verdict:
        for a, where in _arrays(mesh, x):
            for kwargs in kwargs_list:
                if x.dtype.kind == "c" and "dtype" in kwargs:
                    continue  # (NumPy discards the imaginary part: ComplexWarning)
                for func in (np.var, np.std):
                    _check_calls(verdict, func, a, x, f"{name} {where}", **kwargs)


@pytest.mark.parametrize("name", ["f8", "f4", "i8", "c16", "hostile", "short"])
def test_norms_replay_the_general_path(comm: MPI.Comm, mesh: dmesh.DeviceMesh, name: str) -> None:
    x = DATA[name]
    with BitVerdict(comm) as verdict:
        for a, where in _arrays(mesh, x):
            for kwargs in NORM_KWARGS:
                _check_calls(verdict, np.linalg.norm, a, x, f"{name} {where}", **kwargs)
        for v, where in _arrays(mesh, x[:, 1].copy()):
            for kwargs in VECTOR_KWARGS:
                # NumPy's own bits (its dot product) where one rank holds the vector.
                exact = comm.Get_size() == 1 and kwargs != {"axis": 0}
                _check_calls(verdict, np.linalg.norm, v, x[:, 1], f"vector {name} {where}",
                             exact=exact, **kwargs)  # fmt: skip


def test_meshes_with_a_dim_of_one_rank(comm: MPI.Comm) -> None:
    """A mesh dim of one rank holds a term alone (no move); the other dim's are moved."""
    size = comm.Get_size()
    with BitVerdict(comm) as verdict:
        for shape in ((1, size), (size, 1)):
            with dmesh.init_mesh(shape, comm=comm) as mesh:
                for placements in ([Shard(0), Shard(0)], [Shard(0), Shard(1)], [Shard(1), R]):
                    a = dmesh.distribute(F, mesh, placements)
                    where = f"{shape} {placements}"
                    for kwargs in ({}, {"axis": 0}, {"axis": 1, "ddof": 1}):
                        for func in (np.var, np.std, np.linalg.norm):
                            if func is np.linalg.norm:
                                kwargs = {k: v for k, v in kwargs.items() if k != "ddof"}
                            _check_calls(verdict, func, a, F, where, **kwargs)


def test_vectors_and_empty_arrays(comm: MPI.Comm, mesh: dmesh.DeviceMesh) -> None:
    rows = [Shard(0)] * mesh.ndim
    arrays = [F[:, 0].copy(), F[:1, 0].copy(), np.zeros(0), np.zeros((0, 3)), np.array(2.5)]
    with BitVerdict(comm) as verdict:
        for x in arrays:
            a = dmesh.distribute(x, mesh, rows if x.ndim else [R] * mesh.ndim)
            for func in (np.var, np.std, np.linalg.norm):
                rows_of_empty = x.ndim == 2 and func is not np.linalg.norm
                kwargs: dict[str, Any] = {"axis": 1} if rows_of_empty else {}
                _check_calls(verdict, func, a, x, f"{x.shape}", **kwargs)


def test_ddof_beyond_the_count_keeps_the_general_path(comm: MPI.Comm,
                                                      mesh: dmesh.DeviceMesh) -> None:  # fmt: skip
    """n - ddof <= 0: NumPy's inf and NaN (and no plan: the general path's warnings)."""
    a = dmesh.distribute(F, mesh, [Shard(0)] * mesh.ndim)
    with BitVerdict(comm) as verdict:
        for kwargs in ({"axis": 0, "ddof": 7}, {"ddof": 40}, {"axis": 1, "ddof": 6}):
            for func in (np.var, np.std):
                _check_calls(verdict, func, a, F, "ddof", **kwargs)
                key = (kwargs.get("axis"), type(kwargs.get("axis")), None, kwargs["ddof"],
                       int, False, func is np.std)  # fmt: skip
                verdict.check(statistics_fast.planned(a, key, False) is None, f"{kwargs} planned")


def test_no_stale_plan(comm: MPI.Comm, mesh: dmesh.DeviceMesh) -> None:
    """The same function with other arguments, or on other specs of the same shape, in a row."""
    other = RNG.standard_normal((7, 5))
    arrays = [(dmesh.distribute(x, mesh, p), x) for p in _layouts(mesh) for x in (F, other)]
    calls: list[tuple[Any, dict[str, Any]]] = [
        (np.var, {"axis": 0}), (np.var, {"axis": 1}), (np.var, {"axis": 0, "ddof": 1}),
        (np.var, {"axis": 0, "keepdims": True}), (np.std, {"axis": 0}), (np.var, {}),
        (np.linalg.norm, {"axis": 0}), (np.linalg.norm, {"axis": 1}), (np.linalg.norm, {}),
        (np.var, {"axis": 0, "dtype": np.float32}), (np.var, {"axis": (1,)}),
    ]  # fmt: skip
    with BitVerdict(comm) as verdict:
        for _ in range(2):
            for a, x in arrays:
                for func, kwargs in calls:
                    _check_calls(verdict, func, a, x, repr(a.placements), **kwargs)


def _counting_moves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    moves: list[int] = []
    real = DArray.with_layout

    def counted(self: DArray, layout: Any) -> DArray:
        moves.append(1)
        return real(self, layout)

    monkeypatch.setattr(DArray, "with_layout", counted)
    return moves


def test_replays_make_only_their_moves(comm: MPI.Comm, mesh: dmesh.DeviceMesh,
                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """var over a sharded axis: the mean's move and the sums' (two collectives), a norm one,
    a reduction of whole slices none; the plan is the one its first call made."""
    a = dmesh.distribute(F, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    sharded = mesh.shape[0] > 1
    cases = [(np.var, {"axis": 0}, 2 if sharded else 0), (np.std, {}, 2 if sharded else 0),
             (np.linalg.norm, {"axis": 0}, 1 if sharded else 0), (np.var, {"axis": 1}, 0),
             (np.linalg.norm, {"axis": 1}, 0)]  # fmt: skip
    for func, kwargs, _ in cases:
        func(a, **kwargs)  # the first call plans
    moves = _counting_moves(monkeypatch)
    for func, kwargs, expected in cases:
        moves.clear()
        func(a, **kwargs)
        assert_all(comm, len(moves) == expected, f"{func.__name__}{kwargs}: {len(moves)} moves")


def test_replays_dispatch_nothing(comm: MPI.Comm, mesh: dmesh.DeviceMesh,
                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The call seen before has a plan and dispatches nothing past itself: every layout
    (``var`` where one mesh dim shards the reduced axes: over two, the dispatcher's
    pricing moves the data for ``a - mean``, and such calls keep the general path)."""
    calls: list[tuple[Any, dict[str, Any], tuple[Any, ...], bool]] = [
        (np.var, {"axis": 0}, (0, int, None, 0, int, False, False), False),
        (np.std, {"axis": 1, "ddof": 1}, (1, int, None, 1, int, False, True), False),
        (np.var, {}, (None, type(None), None, 0, int, False, False), False),
        (np.linalg.norm, {"axis": 0}, (None, type(None), 0, int, False), True),
        (np.linalg.norm, {}, (None, type(None), None, type(None), False), True),
    ]  # fmt: skip
    seen: list[Any] = []

    def watched(real: Any) -> Any:
        return lambda *args: seen.append(args[0]) or real(*args)

    for hook in ("dispatch_function", "dispatch_ufunc", "dispatch_operator"):
        monkeypatch.setattr(_hooks, hook, watched(getattr(_hooks, hook)))
    for x in (F, F[:, 0].copy()):
        for a, where in _arrays(mesh, x):
            for func, kwargs, key, norm in calls:
                if a.ndim == 1 and "axis" in kwargs and kwargs["axis"] == 1:
                    continue
                reduced = range(a.ndim) if kwargs.get("axis") is None else [kwargs["axis"]]
                sharding = [p for p in a.placements if isinstance(p, Shard) and p.dim in reduced]
                if not norm and len(sharding) > 1:
                    continue
                func(a, **kwargs)
                seen.clear()
                func(a, **kwargs)
                plan = statistics_fast.planned(a, key, norm)
                ok = isinstance(plan, statistics_fast.Replay) and seen == [func]
                assert_all(comm, ok, f"{where} {func.__name__}{kwargs}: {plan!r}, {seen}")


def test_partial_and_unsupported_arguments_keep_the_general_path(
    comm: MPI.Comm, mesh: dmesh.DeviceMesh
) -> None:
    terms = dmesh.from_local(F / mesh.shape[0], mesh, [Partial("sum")] + [R] * (mesh.ndim - 1))
    with BitVerdict(comm) as verdict:
        for func in (np.var, np.std, np.linalg.norm):
            _check_calls(verdict, func, terms, F, "partial")
    a = dmesh.distribute(F, mesh, [Shard(0)] * mesh.ndim)
    out = dmesh.distribute(np.zeros(5), mesh, [R] * mesh.ndim)
    for _ in range(2):
        assert_raises_all(comm, UnsupportedError, np.var, a, axis=0, out=out)
        assert_raises_all(comm, UnsupportedError, np.std, a, where=True)
        assert_raises_all(comm, ValueError, np.linalg.norm, a, axis=(0, 0))
        assert_raises_all(comm, ValueError, np.linalg.norm, a, ord="nope")


def test_compiled_calls_give_the_eager_bits(comm: MPI.Comm, mesh: dmesh.DeviceMesh) -> None:
    """dmesh.compile records the general path; a replayed eager call must give its bytes."""

    def moments(x: Any, v: Any) -> Any:
        return np.var(x, axis=0), np.std(x), np.linalg.norm(v), np.linalg.norm(x, axis=0)

    x = dmesh.distribute(F, mesh, [Shard(0)] * mesh.ndim)
    v = dmesh.distribute(F[:, 2].copy(), mesh, [Shard(0)] * mesh.ndim)
    compiled = compile(moments)
    eager = [moments(x, v) for _ in range(2)][-1]
    with BitVerdict(comm) as verdict:
        for _ in range(2):
            for got, want in zip(compiled(x, v), eager):
                same = got.spec == want.spec and got.local.tobytes() == want.local.tobytes()
                verdict.check(same, f"compiled {got!r} {got.local} != eager {want.local}")


def _close_pairs(mesh: dmesh.DeviceMesh) -> Iterator[tuple[Any, Any, np.ndarray, Any, str]]:
    near = F * (1 + 1e-9)
    far_last = F.copy()
    far_last[-1, -1] += 1  # only the last block differs
    nan = HOSTILE.copy()
    for placements in _layouts(mesh):
        d = {k: dmesh.distribute(v, mesh, placements) for k, v in
             {"f": F, "near": near, "far": far_last, "nan": nan, "i": INTS}.items()}  # fmt: skip
        where = repr(placements)
        yield d["f"], d["near"], F, near, where
        yield d["f"], d["far"], F, far_last, where
        yield d["nan"], d["nan"], nan, nan, where
        yield d["i"], d["i"], INTS, INTS, where
        yield d["f"], 100.0, F, 100.0, where
        yield d["f"], 100, F, 100, where
        yield d["f"], d["f"].redistribute(mesh, [R] * mesh.ndim), F, F, where  # (general)


def test_allclose(comm: MPI.Comm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for a, b, x, y, where in _close_pairs(mesh):
            for kwargs in ({}, {"equal_nan": True}, {"rtol": 1e-3}, {"atol": 200.0}):
                want = np.allclose(x, y, **kwargs)
                for _ in range(2):
                    got = np.allclose(a, b, **kwargs)
                    verdict.check(type(got) is bool and got == want,
                                  f"{where} allclose({kwargs}): {got!r} != {want!r}")  # fmt: skip
                    verdict.bits(f"{where} {kwargs}", np.array(got))
