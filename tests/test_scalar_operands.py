"""One-element operands holding partial terms (``x @ y``, then scalar arithmetic), against NumPy.

A 0-d or one-element ``Partial`` operand that an op needs reduced takes its
value's route (``dmesh.scalar_routes``): one ``Allreduce`` of the terms over
the partial mesh dims, or nothing where they have one coordinate each. Every
world size and mesh shape checks the values NumPy gives for the reduced value
(NaN, +-inf, -0.0 and integer extremes in the terms), the same bits on every
rank, and that ``full_array``, ``item``, ``redistribute``, a watched run
(``dmesh.debug``) and a compiled one (``dmesh.compile``) all agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.ops.compiler import compile
from helpers import BitVerdict

R = Replicate()
INF, NAN = math.inf, math.nan
I64 = np.iinfo(np.int64)

# Terms, cycled over the ranks of the partial mesh dims (the first is the one
# term at 1 rank). Float sums are exact in any order; integer sums stay in range
# whatever the order MPI adds them in.
FLOAT_TERMS = [
    [3.0, -1.5, 0.25, 8.0],
    [NAN, 1.0, 2.0],
    [1.0, NAN, -NAN],
    [INF, 2.0, -4.0],
    [2.0, -INF, INF],
    [-0.0, -0.0],
    [0.0, -0.0, 5.0],
    [-7.0, 0.5],
]
INT_TERMS = {
    "sum": [[I64.max // 4, I64.min // 4, 7], [-3, 11, -5, 2], [0, 0]],
    "max": [[I64.min, I64.max, 0], [I64.min, -1], [-5, 3, 3]],
    "min": [[I64.max, I64.min, 0], [I64.max, 1], [5, -3, 2]],
}

Expression = Callable[[Any, Any, Any], Any]
# (s, t, v): two one-element operands and a vector; the same code runs on DArrays and NumPy.
FLOAT_EXPRESSIONS: list[tuple[str, Expression]] = [
    ("s / t", lambda s, t, v: s / t),
    ("s * t", lambda s, t, v: s * t),
    ("s - t", lambda s, t, v: s - t),
    ("s * s", lambda s, t, v: s * s),
    ("s / t * v", lambda s, t, v: s / t * v),
    ("v - s", lambda s, t, v: v - s),
    ("s * v + t", lambda s, t, v: s * v + t),
    ("sqrt(|s|) < 1e-30", lambda s, t, v: np.sqrt(np.abs(s)) < 1e-30),
    ("s > t", lambda s, t, v: s > t),
    ("s == t", lambda s, t, v: s == t),
    ("s + 2.5", lambda s, t, v: s + 2.5),
    ("2.0 ** s", lambda s, t, v: 2.0**s),
    ("-s", lambda s, t, v: -s),
    ("maximum(s, v)", lambda s, t, v: np.maximum(s, v)),
    ("(s * v) @ v", lambda s, t, v: (s * v) @ v),
]
INT_EXPRESSIONS: list[tuple[str, Expression]] = [
    ("s - t", lambda s, t, v: s - t),
    ("s * t", lambda s, t, v: s * t),
    ("s // 3", lambda s, t, v: s // 3),
    ("s % 7", lambda s, t, v: s % 7),
    ("s * v", lambda s, t, v: s * v),
    ("v - s", lambda s, t, v: v - s),
    ("s > t", lambda s, t, v: s > t),
    ("abs(s)", lambda s, t, v: abs(s)),
    ("s & 255", lambda s, t, v: s & 255),
    ("s << 1", lambda s, t, v: s << 1),
    ("s / t", lambda s, t, v: s / t),
]


def partial_dims(mesh: dmesh.DeviceMesh, which: str) -> tuple[int, ...]:
    """The mesh dims holding partial terms: all of them, or only the first or the last."""
    return {"all": tuple(range(mesh.ndim)), "first": (0,), "last": (mesh.ndim - 1,)}[which]


def one_element(
    mesh: dmesh.DeviceMesh,
    ops: dict[int, str],
    terms: list[Any],
    dtype: Any,
    shape: tuple[int, ...] = (),
) -> tuple[dmesh.DArray, np.ndarray]:
    """A one-element DArray with ``Partial(ops[m])`` on mesh dims ``m`` (Replicate elsewhere),
    the rank at coordinate ``c`` holding ``terms[k]``, ``k`` its index over those dims
    (cycled); and its value as dmesh defines it: the last partial mesh dim reduced first."""
    dims = sorted(ops)
    sizes = [mesh.shape[m] for m in dims]
    grid = np.array([terms[k % len(terms)] for k in range(math.prod(sizes))], dtype)
    grid = grid.reshape(sizes)
    mine = grid[tuple(mesh.coordinate[m] for m in dims)]
    placements = [Partial(ops[m]) if m in ops else R for m in range(mesh.ndim)]
    a = dmesh.from_local(np.full(shape, mine, dtype), mesh, placements, shape=shape)
    for axis in reversed(range(len(dims))):
        grid = reduce_terms(grid, axis, ops[dims[axis]])
    return a, np.full(shape, grid, dtype)


def reduce_terms(grid: np.ndarray, axis: int, op: str) -> np.ndarray:
    """``grid``'s terms along ``axis`` combined as a reduction across ranks defines it
    (``dmesh.collectives.reduce_ops``): IEEE sums with no ``+0.0`` to start from (terms of
    ``-0.0`` sum to ``-0.0``, where ``np.add.reduce`` gives ``+0.0``), NaN-propagating
    max/min whose tie of ``-0.0`` and ``+0.0`` is ``+0.0`` for max, ``-0.0`` for min."""
    terms = np.moveaxis(grid, axis, 0)
    value = terms[0].copy()
    for term in terms[1:]:
        if op == "sum":
            value = value + term
            continue
        both = np.maximum(value, term) if op == "max" else np.minimum(value, term)
        if grid.dtype.kind == "f":
            tie = (value == 0) & (term == 0) & (np.signbit(value) != np.signbit(term))
            both = np.where(tie, np.array(0.0 if op == "max" else -0.0, grid.dtype), both)
        value = both
    return value


def same(got: Any, want: Any, zero_signs: bool = True) -> bool:
    """Equal dtypes, shapes and values; NaN equals NaN (of either sign: NumPy's own sign
    depends on the operation), and zeros' signs count where ``zero_signs``."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype.kind not in "fc":
        return bool(np.array_equal(got, want))
    signed = ~np.isnan(want) & (zero_signs | (want != 0))
    signs = np.array_equal(np.signbit(got)[signed], np.signbit(want)[signed])
    return bool(np.array_equal(got, want, equal_nan=True) and signs)


def full(x: Any) -> Any:
    """A DArray's value (collective); anything else as it is."""
    return x.full_array() if isinstance(x, dmesh.DArray) else x


def check_expressions(
    verdict: BitVerdict,
    expressions: list[tuple[str, Expression]],
    operands: tuple[dmesh.DArray, dmesh.DArray, dmesh.DArray],
    values: tuple[np.ndarray, np.ndarray, np.ndarray],
    label: str,
) -> None:
    """Each expression on the DArrays against NumPy on their values. A result of partial
    sums may have the other sign of zero (``-(0.0 + -0.0)`` is ``-0.0``, ``-0.0 + 0.0`` is
    not; as tests/rule_checker.py, the sign of a zero is then not compared)."""
    sums = any(p == Partial("sum") for x in operands for p in x.placements)
    for name, expression in expressions:
        with np.errstate(all="ignore"):
            got = full(expression(*operands))
            want = expression(*values)
        ok = same(got, want, zero_signs=not sums)
        verdict.check(ok, f"{label} {name}: {got!r} != NumPy's {want!r}")
        verdict.bits(f"{label} {name}", got)


def vector(mesh: dmesh.DeviceMesh, dtype: Any) -> tuple[dmesh.DArray, np.ndarray]:
    kind = np.dtype(dtype).kind
    values = [1.0, -0.0, 2.5, INF, -3.0, 0.5, 7.0] if kind == "f" else [1, -2, 3, 0, 9, -7, 4]
    x = np.array(values, dtype)
    return dmesh.distribute(x, mesh, [Shard(0)] + [R] * (mesh.ndim - 1)), x


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("which", ["all", "first", "last"])
def test_float_partials_match_numpy(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, op: str, which: str, dtype: Any
) -> None:
    """0-d ``Partial(op)`` operands with scalars and vectors: NumPy's values, the same bits
    on every rank (NaN, +-inf and -0.0 among the terms)."""
    if mesh.ndim == 1 and which == "last":
        pytest.skip("one mesh dim: 'last' is 'first'")
    dims = partial_dims(mesh, which)
    v, v_np = vector(mesh, dtype)
    with BitVerdict(comm) as verdict:
        for i, terms in enumerate(FLOAT_TERMS):
            s, s_np = one_element(mesh, dict.fromkeys(dims, op), terms, dtype)
            t, t_np = one_element(mesh, dict.fromkeys(dims, op), FLOAT_TERMS[-1 - i], dtype)
            label = f"{dtype.__name__} P({op}) {terms}"
            check_expressions(verdict, FLOAT_EXPRESSIONS, (s, t, v), (s_np, t_np, v_np), label)


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_integer_partials_match_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, op: str) -> None:
    """int64 ``Partial(op)`` 0-d operands at the type's extremes: NumPy's (wrapping) values."""
    dims = partial_dims(mesh, "all")
    v, v_np = vector(mesh, np.int64)
    cases = INT_TERMS[op]
    with BitVerdict(comm) as verdict:
        for i, terms in enumerate(cases):
            s, s_np = one_element(mesh, dict.fromkeys(dims, op), terms, np.int64)
            t, t_np = one_element(mesh, dict.fromkeys(dims, op), cases[-1 - i], np.int64)
            label = f"int64 P({op}) {terms}"
            check_expressions(verdict, INT_EXPRESSIONS, (s, t, v), (s_np, t_np, v_np), label)


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_one_element_arrays(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, op: str) -> None:
    """Shape-(1,) partial operands broadcast against vectors, and a (1,) array sharded over
    the ranks (some blocks empty: the general path), mixed with them."""
    dims = partial_dims(mesh, "all")
    v, v_np = vector(mesh, np.float64)
    with BitVerdict(comm) as verdict:
        for i, terms in enumerate(FLOAT_TERMS):
            s, s_np = one_element(mesh, dict.fromkeys(dims, op), terms, np.float64, (1,))
            t_np = np.array([FLOAT_TERMS[-1 - i][0]])
            t = dmesh.distribute(t_np, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
            label = f"(1,) P({op}) {terms}"
            check_expressions(verdict, FLOAT_EXPRESSIONS, (s, t, v), (s_np, t_np, v_np), label)


def test_mixed_partial_ops(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``(P(sum), P(max))`` on a 2-D mesh has no one-Allreduce route: the general path, the
    same values (a sum over mesh dim 0 of maxima over mesh dim 1)."""
    if mesh.ndim < 2:
        pytest.skip("needs a 2-D mesh")
    v, v_np = vector(mesh, np.float64)
    with BitVerdict(comm) as verdict:
        for i, terms in enumerate(FLOAT_TERMS):
            s, s_np = one_element(mesh, {0: "sum", 1: "max"}, terms, np.float64)
            t, t_np = one_element(mesh, {0: "max", 1: "min"}, FLOAT_TERMS[-1 - i], np.float64)
            label = f"(P(sum), P(max)) {terms}"
            check_expressions(verdict, FLOAT_EXPRESSIONS, (s, t, v), (s_np, t_np, v_np), label)


@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("which", ["all", "first"])
def test_every_way_to_the_value_agrees(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, op: str, which: str
) -> None:
    """``full_array``, ``item``, ``redistribute``, ``reduce_partials`` and an op's operand
    reduction give the same bits; the reduced array owns its block."""
    dims = partial_dims(mesh, which)
    replicated = [R] * mesh.ndim
    with BitVerdict(comm) as verdict:
        for terms in FLOAT_TERMS:
            s, want = one_element(mesh, dict.fromkeys(dims, op), terms, np.float64)
            before = s.local.tobytes()
            moved = s.redistribute(mesh, replicated)
            reduced = s.reduce_partials()
            label = f"P({op}) {terms}"
            verdict.check(moved.placements == tuple(replicated), f"{label}: {moved.spec!r}")
            verdict.check(same(moved.local, want), f"{label}: {moved.local!r} != {want!r}")
            for name, value in [
                ("full_array", s.full_array()),
                ("item", np.float64(s.item())),
                ("reduce_partials", reduced.local),
                ("operand", (s * np.float64(1.0).item()).full_array()),
            ]:
                verdict.check(same(value, moved.local), f"{label} {name}: {value!r}")
                verdict.bits(f"{label} {name}", value)
            moved.local[...] = 99.0  # the moved array's block is its own
            verdict.check(s.local.tobytes() == before, f"{label}: the source block changed")


def test_watched_and_compiled_runs_agree(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``dmesh.debug.explain`` reports each operand's reduction with the collectives it makes
    (an all_reduce per partial mesh dim of more than one rank, as planned), and watched,
    compiled and eager runs give the same bits."""
    dims = partial_dims(mesh, "all")
    v, _ = vector(mesh, np.float64)
    s, _ = one_element(mesh, dict.fromkeys(dims, "sum"), [3.0, NAN, -1.5, 8.0], np.float64)
    t, _ = one_element(mesh, dict.fromkeys(dims, "sum"), [-0.0, 2.0, INF], np.float64)

    def program(s: Any, t: Any, v: Any) -> Any:
        return (s / t) * v, np.sqrt(np.abs(s)) < 1e-30

    eager = [x.full_array() for x in program(s, t, v)]
    explanation = debug.explain(program, s, t, v)
    watched = [x.full_array() for x in explanation.result]
    compiled = compile(program)
    runs = [[x.full_array() for x in compiled(s, t, v)] for _ in range(2)]
    divide = explanation.ops[0]
    reduced = sum(mesh.shape[m] > 1 for m in dims)  # one all_reduce step per mesh dim
    steps = [step for moved in divide.redistributions for step in moved.steps]
    with BitVerdict(comm) as verdict:
        verdict.check("divide" in divide.label, str(explanation))
        verdict.check(len(divide.redistributions) == 2, str(explanation))
        verdict.check(len(steps) == 2 * reduced, f"steps {steps}")
        verdict.check(len(divide.collectives) == len(steps), str(explanation))
        verdict.check(compiled.traces == 1 and not compiled.breaks, str(compiled.breaks))
        for run in (eager, watched, *runs):
            for k, (got, want) in enumerate(zip(run, eager)):
                verdict.check(same(got, want), f"result {k}: {got!r} != {want!r}")
                verdict.bits(f"result {k}", got)
