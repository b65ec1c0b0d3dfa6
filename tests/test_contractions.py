"""Contractions on DArrays against NumPy on one process: ``matmul``, ``dot``, ``inner``,
``outer``, ``einsum`` (diagonals and traces included), ``tensordot`` and ``vdot``.

Every rank builds the same inputs and computes NumPy's answer; the DArray result is
gathered and compared, for every placement of the operands (each ``Shard``, ``Replicate``,
nested on the (2, 2) mesh at 4 ranks), with uneven and empty blocks, NaN, inf and negative
values, int and complex dtypes. The regression tests name the bug they guard against.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.core.layout import Layout
from dmesh.core.placement import Placement
from helpers import Verdict, assert_all, assert_raises_all

INF, NAN = np.inf, np.nan
# inf - inf and 0 * inf in NumPy's references and in the blocks: expected, not a problem.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


def _placements(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[Placement]]:
    """Every combination of Replicate and Shard(d) over the mesh dims."""
    choices: list[Placement] = [Replicate(), *(Shard(d) for d in range(ndim))]
    return [list(p) for p in itertools.product(choices, repeat=mesh.ndim)]


def _fit(placements: list[Placement], ndim: int) -> list[Placement]:
    """``placements`` for an operand of ``ndim`` dims: shards of dims it lacks replicated."""
    return [p if not isinstance(p, Shard) or p.dim < ndim else Replicate() for p in placements]


def _uneven(x: np.ndarray, mesh: dmesh.DeviceMesh, dim: int) -> dmesh.DArray:
    """``x`` cut along ``dim`` into blocks of 2, 0, 3, 1, ... elements (nested over the mesh
    dims, last block filling up): uneven blocks, and empty ones from 2 ranks on."""
    p = math.prod(mesh.shape)
    n = x.shape[dim]
    sizes = [(2, 0, 3, 1)[i % 4] for i in range(p)]
    while sum(sizes) > n:
        sizes[sizes.index(max(sizes))] -= 1
    sizes[-1] += n - sum(sizes)
    number = int(np.ravel_multi_index(mesh.coordinate, mesh.shape))
    start = sum(sizes[:number])
    index = (slice(None),) * dim + (slice(start, start + sizes[number]),)
    return dmesh.from_local(x[index].copy(), mesh, [Shard(dim)] * mesh.ndim)


def _layouts(x: np.ndarray, mesh: dmesh.DeviceMesh) -> list[tuple[str, dmesh.DArray]]:
    """``x`` in every placement, as a Partial("sum"), and cut unevenly along each dim."""
    out = [(str(p), dmesh.distribute(x, mesh, p)) for p in _placements(mesh, x.ndim)]
    if x.dtype != bool:
        partial = [Partial("sum")] + [Replicate()] * (mesh.ndim - 1)
        out.append(("P(sum)", dmesh.distribute(x, mesh, partial)))
    out += [(f"uneven {d}", _uneven(x, mesh, d)) for d in range(x.ndim)]
    return out


def _mismatch(got: Any, expected: Any) -> str:
    """'' when ``got`` (a DArray, gathered: collective) equals NumPy's ``expected``: shape and
    dtype exactly, floats to 1e-12 with NaN == NaN and infs of the same sign."""
    full = np.asarray(got.full_array()) if isinstance(got, dmesh.DArray) else np.asarray(got)
    expected = np.asarray(expected)
    if full.shape != expected.shape or full.dtype != expected.dtype:
        return f"{full.dtype}{full.shape} != {expected.dtype}{expected.shape}"
    if expected.dtype.kind in "fc":
        ok = np.allclose(full, expected, rtol=1e-12, atol=1e-12, equal_nan=True)
    else:
        ok = np.array_equal(full, expected)
    return "" if ok else f"{full!r} != {expected!r}"


def _values(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    """Small integers (negative ones too), exact in every dtype; complex parts differ."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, size=shape)
    if np.dtype(dtype).kind == "c":
        return (x + 1j * rng.integers(-4, 5, size=shape)).astype(dtype)
    return x.astype(dtype)


# -- Partial operands and non-finite values ---------------------------------------------


@pytest.mark.parametrize("make", ["distribute", "reduction"])
def test_partial_operand_is_reduced_before_the_product(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, make: str
) -> None:
    """Regression (issue 13): a ``Partial("sum")`` operand times a replicated one holding inf.

    The row (P(sum), P(sum), R) multiplied each partial term by ``B``. A term is often 0
    (``distribute`` puts the value at coordinate 0 and zeros elsewhere; a sum over a sharded
    axis leaves 0 on a rank whose block is empty), and ``0 * inf`` is NaN where NumPy, which
    multiplies the summed value, gives inf. Fails at 2 or more ranks without the fix.
    """
    x = np.array([1.0, 2.0, -3.0])
    b_np = np.array([[INF, 1.0], [1.0, -INF], [2.0, 0.5]])
    if make == "distribute":
        s = dmesh.distribute(x, mesh, [Partial("sum")] + [Replicate()] * (mesh.ndim - 1))
    else:  # one row: every rank but one holds an empty block of it
        s = np.sum(dmesh.distribute(x[None, :], mesh, [Shard(0)] * mesh.ndim), axis=0)
    b = dmesh.distribute(b_np, mesh, [Replicate()] * mesh.ndim)
    bt = dmesh.distribute(b_np.T.copy(), mesh, [Replicate()] * mesh.ndim)
    cases = [
        (s @ b, x @ b_np),
        (bt @ s, b_np.T @ x),
        (np.dot(s, b), np.dot(x, b_np)),
        (np.inner(s, bt), np.inner(x, b_np.T)),
        (np.einsum("i,ij->j", s, b), np.einsum("i,ij->j", x, b_np)),
        (np.einsum("ij,i->j", b, s), np.einsum("ij,i->j", b_np, x)),
    ]
    problems = [p for p in (_mismatch(g, e) for g, e in cases) if p]
    assert_all(comm, not problems, f"{s!r}: {problems}")


def test_index_summed_out_of_one_operand_is_not_contraction_sharded(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """Regression (issue 13): ``ij,k->k`` with ``a``'s rows sharded and inf in ``b``.

    The contraction row on ``i`` let each rank sum its rows of ``a`` and multiply by ``b``
    (einsum's optimized path sums ``a`` out first): a rank whose rows sum to 0 gave
    ``0 * inf = NaN`` where NumPy gives inf. An index is contraction-sharded only when
    every operand has it. (Not ``ij,k->jk``: there NumPy's own loop gives NaN on the whole
    array and inf on blocks with one column, so no layout of it can match NumPy.)
    """
    a_np = np.array([[1.0, 2.0], [0.0, 0.0], [4.0, -4.0], [0.0, 0.0]])
    b_np = np.array([INF, 1.0, -2.0])
    b = dmesh.distribute(b_np, mesh, [Replicate()] * mesh.ndim)
    with Verdict(comm) as verdict:
        for label, a in _layouts(a_np, mesh):
            for subscripts in ("ij,k->k", "ij,k->"):
                got = np.einsum(subscripts, a, b)
                problem = _mismatch(got, np.einsum(subscripts, a_np, b_np))
                verdict.check(not problem, f"{subscripts} {label}: {problem}")


def test_empty_contracted_index_sums_to_zero(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Regression (issue 13): an index of length 0 sums to 0, as NumPy's default ``np.einsum``
    gives, also with ``optimize=True``, whose path summed the empty operand out first and
    multiplied that 0 by inf (NumPy's own optimized path gives NaN)."""
    cases = [
        ("i,j->", np.zeros(0), np.array([INF, 1.0])),
        ("ij,kj->", np.zeros((0, 2)), np.array([[INF, 1.0]])),
        ("ij,k->k", np.zeros((0, 3)), np.array([INF, -INF])),
    ]
    with Verdict(comm) as verdict:
        for subscripts, a_np, b_np in cases:
            b = dmesh.distribute(b_np, mesh, [Replicate()] * mesh.ndim)
            for p, optimize in itertools.product(_placements(mesh, a_np.ndim), (False, True)):
                a = dmesh.distribute(a_np, mesh, p)
                got = np.einsum(subscripts, a, b, optimize=optimize)
                problem = _mismatch(got, np.einsum(subscripts, a_np, b_np))
                verdict.check(not problem, f"{subscripts} {p} optimize={optimize}: {problem}")


def test_contracted_index_cut_differently_in_each_operand(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """Regression (issue 13): ``a[1:]`` and a balanced operand cut their contracted index at
    different places; a rank multiplied elements of different indices, or raised alone on
    mismatched blocks. Operands that cut it differently are rebalanced first."""
    v_np = np.arange(10.0) - 3
    w_np = _values((9,), np.float64, 1)
    m_np = _values((5, 9), np.float64, 2)
    shard0 = [Shard(0)] * mesh.ndim
    v = dmesh.distribute(v_np, mesh, shard0)[1:]
    w = dmesh.distribute(w_np, mesh, shard0)
    m = dmesh.distribute(np.hstack([m_np, m_np[:, :1]]), mesh, [Shard(1)] * mesh.ndim)[:, :-1]
    cases = [
        (np.dot(v, w), np.dot(v_np[1:], w_np)),
        (v @ w, v_np[1:] @ w_np),
        (np.inner(w, v), np.inner(w_np, v_np[1:])),
        (np.einsum("i,i->", v, w), v_np[1:] @ w_np),
        (m @ v, m_np @ v_np[1:]),
        (m @ _uneven(w_np, mesh, 0), m_np @ w_np),
        (np.einsum("ij,j,j->i", m, v, w), np.einsum("ij,j,j->i", m_np, v_np[1:], w_np)),
    ]
    problems = [p for p in (_mismatch(g, e) for g, e in cases) if p]
    assert_all(comm, not problems, str(problems))


# -- outer -------------------------------------------------------------------------------


def test_outer_flattens_its_operands(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Regression (issue 13): ``np.outer(A, v)`` with a 7 x 5 ``A`` gave shape (7, 5, 5);
    NumPy flattens both operands (35, 5). Scalars count as one element."""
    a_np = _values((7, 5), np.float64, 3)
    v_np = _values((5,), np.float64, 4)
    t_np = _values((2, 3, 4), np.complex128, 5)
    v = dmesh.distribute(v_np, mesh, [Shard(0)] * mesh.ndim)
    t = dmesh.distribute(t_np, mesh, [Shard(2)] * mesh.ndim)
    with Verdict(comm) as verdict:
        for label, a in _layouts(a_np, mesh):
            cases = [
                (np.outer(a, v), np.outer(a_np, v_np)),
                (np.outer(v, a), np.outer(v_np, a_np)),
                (np.outer(a, t), np.outer(a_np, t_np)),
                (np.outer(a, 3), np.outer(a_np, 3)),
                (np.outer(-2.0, a), np.outer(-2.0, a_np)),
                (np.outer(np.sum(a), v), np.outer(np.sum(a_np), v_np)),
            ]
            for i, (got, expected) in enumerate(cases):
                problem = _mismatch(got, expected)
                verdict.check(not problem, f"case {i} {label}: {problem}")


# -- einsum: diagonals, traces, implicit output ------------------------------------------

DIAGONALS = [
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ii->", [(3, 3)]),
    ("ij,jj->i", [(4, 3), (3, 3)]),
    ("jj,ij->i", [(3, 3), (4, 3)]),
    ("iij->j", [(3, 3, 2)]),
    ("iij->ji", [(3, 3, 2)]),
    ("jii->ij", [(2, 3, 3)]),
    ("iji->ij", [(3, 2, 3)]),
    ("iii->i", [(3, 3, 3)]),
    ("ii,i->i", [(3, 3), (3,)]),
]


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.complex128])
@pytest.mark.parametrize(("subscripts", "shapes"), DIAGONALS, ids=[d[0] for d in DIAGONALS])
def test_einsum_repeated_index_takes_the_diagonal(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, subscripts: str, shapes: Any, dtype: Any
) -> None:
    """Regression (issue 13): a repeated index (diagonals, traces) raised NumPy's raw
    ValueError on a row-sharded square matrix. Each operand in every layout (3 rows: uneven
    at 2 ranks, an empty block at 4), the others sharded on their first dim; NaN and inf on
    and off the diagonal for floats."""
    arrays = [_values(shape, dtype, 10 + i) for i, shape in enumerate(shapes)]
    if dtype == np.float64:
        arrays[0].flat[0], arrays[0].flat[1], arrays[-1].flat[-1] = INF, -INF, NAN
    expected = np.einsum(subscripts, *arrays)
    with Verdict(comm) as verdict:
        for k, x in enumerate(arrays):
            others = [
                dmesh.distribute(y, mesh, [Shard(0)] * mesh.ndim) if y.ndim else y for y in arrays
            ]
            for label, dx in _layouts(x, mesh):
                operands = [dx if i == k else o for i, o in enumerate(others)]
                problem = _mismatch(np.einsum(subscripts, *operands), expected)
                verdict.check(not problem, f"operand {k} {label}: {problem}")


def test_einsum_diagonal_of_row_sharded_matrix_moves_nothing(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """``ii->i`` on a row-sharded matrix: each rank takes its block's part of the diagonal
    (from its global row offsets), no collective; the result keeps the row blocks."""
    s_np = _values((5, 5), np.float64, 6)
    s = _uneven(s_np, mesh, 0)
    with debug.CommMode() as mode:
        d = np.einsum("ii->i", s)
        trace = np.einsum("ii", s)
    counts = mode.counts()
    # (One rank: the (1,) mesh holds the matrix whole, and the result may be replicated.)
    rows = Layout(mesh.shape, s.placements, (5,), (s.spec.layout.bounds[0],))
    same_blocks = d.spec.layout == rows or math.prod(mesh.shape) == 1
    assert_all(comm, not counts and same_blocks, f"{counts} {d!r} {s!r}")
    problems = [_mismatch(d, np.diag(s_np)), _mismatch(trace, np.trace(s_np))]
    assert_all(comm, not any(problems), str(problems))


IMPLICIT = ["ij,jk", "ji", "ij", "ba,ab", "Ab,bA", "i,i", "ij,kj", "ijk,jil"]


@pytest.mark.parametrize("subscripts", IMPLICIT)
def test_einsum_implicit_output(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, subscripts: str
) -> None:
    """Without ``->`` the output is NumPy's: the indices seen once, in ASCII order."""
    lengths = {"i": 3, "j": 4, "k": 2, "l": 5, "a": 3, "b": 2, "A": 4}
    terms = subscripts.split(",")
    arrays = [_values(tuple(lengths[c] for c in t), np.float64, i) for i, t in enumerate(terms)]
    expected = np.einsum(subscripts, *arrays)
    with Verdict(comm) as verdict:
        for p in _placements(mesh, len(terms[0])):
            operands = [dmesh.distribute(x, mesh, _fit(p, x.ndim)) for x in arrays]
            problem = _mismatch(np.einsum(subscripts, *operands), expected)
            verdict.check(not problem, f"{p}: {problem}")


def test_einsum_errors_are_raised_on_every_rank(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """Unsupported forms and invalid subscripts raise dmesh errors, the same on every rank."""
    s = dmesh.distribute(np.ones((3, 3)), mesh, [Shard(0)] * mesh.ndim)
    r = dmesh.distribute(np.ones((3, 4)), mesh, [Shard(0)] * mesh.ndim)
    v = dmesh.distribute(np.ones(3), mesh, [Shard(0)] * mesh.ndim)
    assert_raises_all(comm, UnsupportedError, np.einsum, "...ii->...i", s, match="ellipsis")
    assert_raises_all(comm, UnsupportedError, np.einsum, "ij->i", s, optimize="fast")
    assert_raises_all(comm, UnsupportedError, np.einsum, "ij->i", s, out=None)
    assert_raises_all(comm, UnsupportedError, np.einsum, s, [0, 0], match="string first")
    assert_raises_all(comm, ArgumentError, np.einsum, "ii->i", r, match="lengths")
    assert_raises_all(comm, ArgumentError, np.einsum, "i1->i", s, match="invalid")
    assert_raises_all(comm, ArgumentError, np.einsum, "i->ii", v, match="once")
    assert_raises_all(comm, ArgumentError, np.einsum, "ij->k", s, match="once")
    assert_raises_all(comm, ArgumentError, np.einsum, "i->i", s, match="2 dims")
    assert_raises_all(comm, ArgumentError, np.einsum, "ij,jk->ik", s, match="1 operands")
    assert_raises_all(comm, ArgumentError, np.einsum, "ij,jk->ik", r, r, match="lengths")


# -- matmul, dot, inner: dtypes and layouts -----------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.complex128, np.float32])
def test_binary_contractions_match_numpy(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: Any
) -> None:
    """matmul, dot and inner of a 3 x 4 matrix and vectors, every layout of the matrix, the
    vectors sharded (uneven and empty blocks at 3-4 ranks)."""
    a_np = _values((3, 4), dtype, 7)
    v_np, w_np = _values((4,), dtype, 8), _values((3,), dtype, 9)
    v = dmesh.distribute(v_np, mesh, [Shard(0)] * mesh.ndim)
    w = _uneven(w_np, mesh, 0)
    with Verdict(comm) as verdict:
        for label, a in _layouts(a_np, mesh):
            cases = [
                (a @ v, a_np @ v_np),
                (w @ a, w_np @ a_np),
                (np.dot(a, v), np.dot(a_np, v_np)),
                (np.inner(a, a), np.inner(a_np, a_np)),
                (a.T @ a, a_np.T @ a_np),
                (np.matmul(w, w), w_np @ w_np),
            ]
            for i, (got, expected) in enumerate(cases):
                problem = _mismatch(got, expected)
                verdict.check(not problem, f"case {i} {label}: {problem}")


# -- tensordot and vdot --------------------------------------------------------------------

AXES = [1, 2, 0, -1, (2, 0), ([1, 2], [1, 0]), ([-1, -2], [0, 1]), [[2, 1], [0, 1]], ((), ())]


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.complex128])
@pytest.mark.parametrize("axes", AXES, ids=str)
def test_tensordot_matches_numpy(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, axes: Any, dtype: Any
) -> None:
    """Every form of ``axes`` (an int, 0 and negative ints give the outer product as in
    NumPy, pairs of ints or sequences, negative axes), every layout of ``a``, ``b`` replicated
    or laid out as ``a``; inf and NaN for floats."""
    a_np = _values((3, 4, 5), dtype, 20)
    b_np = _values((5, 4, 2) if axes != 2 else (4, 5, 2), dtype, 21)
    if dtype == np.float64:
        a_np[0, 1, 2], a_np[2, 3, 4], b_np[1, 1, 1] = INF, NAN, -INF
    expected = np.tensordot(a_np, b_np, axes)
    with Verdict(comm) as verdict:
        for label, a in _layouts(a_np, mesh):
            for like_a in (False, True):
                p = a.placements if like_a and "uneven" not in label else None
                if p is not None and any(x.is_partial() for x in p):
                    continue
                b = dmesh.distribute(b_np, mesh, p if p is not None else [Replicate()] * mesh.ndim)
                problem = _mismatch(np.tensordot(a, b, axes), expected)
                verdict.check(not problem, f"{label} b like a={like_a}: {problem}")
                if axes == 2:  # the default, and axes as a keyword
                    problem = _mismatch(np.tensordot(a, b), expected)
                    problem += _mismatch(np.tensordot(a, b, axes=2), expected)
                    verdict.check(not problem, f"{label} default axes: {problem}")


def test_tensordot_scalars_vectors_and_empty_blocks(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """1-D and 2-D operands sharded on the contracted axis with empty blocks (3 elements over
    4 ranks) and cut unevenly, a scalar operand with ``axes=0``."""
    v_np, w_np = _values((3,), np.float64, 22), _values((3,), np.float64, 23)
    m_np = _values((3, 2), np.complex128, 24)
    shard0 = [Shard(0)] * mesh.ndim
    v, m = dmesh.distribute(v_np, mesh, shard0), dmesh.distribute(m_np, mesh, shard0)
    w = _uneven(w_np, mesh, 0)
    cases = [
        (np.tensordot(v, w, 1), np.tensordot(v_np, w_np, 1)),
        (np.tensordot(w, m, axes=(0, 0)), np.tensordot(w_np, m_np, axes=(0, 0))),
        (np.tensordot(m, m, axes=([0], [0])), np.tensordot(m_np, m_np, axes=([0], [0]))),
        (np.tensordot(m, m, 2), np.tensordot(m_np, m_np, 2)),
        (np.tensordot(v, m, 0), np.tensordot(v_np, m_np, 0)),
        (np.tensordot(2.5, m, 0), np.tensordot(2.5, m_np, 0)),
        (np.tensordot(m, -1, axes=0), np.tensordot(m_np, -1, axes=0)),
    ]
    problems = [p for p in (_mismatch(g, e) for g, e in cases) if p]
    assert_all(comm, not problems, str(problems))


def test_tensordot_errors_are_raised_on_every_rank(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    a = dmesh.distribute(np.ones((3, 4)), mesh, [Shard(0)] * mesh.ndim)
    b = dmesh.distribute(np.ones((4, 3)), mesh, [Shard(0)] * mesh.ndim)
    assert_raises_all(comm, ArgumentError, np.tensordot, a, b, 2, match="shape-mismatch")
    assert_raises_all(comm, ArgumentError, np.tensordot, a, b, 3, match="contracts 3")
    assert_raises_all(comm, ArgumentError, np.tensordot, a, b, ([0, 0], [1, 1]), match="duplicate")
    assert_raises_all(comm, ArgumentError, np.tensordot, a, b, ([1], [0, 1]), match="mismatch")
    assert_raises_all(comm, ArgumentError, np.tensordot, a, b, ([2], [0]), match="out of range")
    assert_raises_all(comm, ArgumentError, np.tensordot, a, b, (1, 0, 1), match="pair")
    assert_raises_all(comm, ArgumentTypeError, np.tensordot, a, b, 1.5)
    assert_raises_all(comm, ArgumentTypeError, np.tensordot, a, b, (["x"], [0]))


def test_tensordot_and_vdot_of_a_partial_operand_with_inf(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """The issue-13 finding through tensordot and vdot: a Partial("sum") operand (zero terms
    off coordinate 0) is reduced before it meets the inf of the other operand."""
    x = np.array([1.0, 2.0, -3.0])
    b_np = np.array([[INF, 1.0], [1.0, -INF], [2.0, 0.5]])
    s = dmesh.distribute(x, mesh, [Partial("sum")] + [Replicate()] * (mesh.ndim - 1))
    b = dmesh.distribute(b_np, mesh, [Replicate()] * mesh.ndim)
    c = dmesh.distribute(b_np[:, 0].copy(), mesh, [Replicate()] * mesh.ndim)
    cases = [
        (np.tensordot(s, b, 1), np.tensordot(x, b_np, 1)),
        (np.tensordot(b, s, axes=(0, 0)), np.tensordot(b_np, x, axes=(0, 0))),
        (np.vdot(s, c), np.vdot(x, b_np[:, 0])),
        (np.vdot(c, s), np.vdot(b_np[:, 0], x)),
    ]
    problems = [p for p in (_mismatch(g, e) for g, e in cases) if p]
    assert_all(comm, not problems, str(problems))


@pytest.mark.parametrize(
    ("first", "second"),
    [(np.complex128, np.complex128), (np.float64, np.float64), (np.int64, np.int64),
     (np.int8, np.int8), (np.float32, np.complex64), (np.bool_, np.bool_)],
    ids=str,
)  # fmt: skip
def test_vdot_matches_numpy(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, first: Any, second: Any
) -> None:
    """``np.vdot`` flattens both operands (of other shapes and layouts), conjugates the first
    and gives a 0-d DArray of NumPy's dtype, with the same bits on every rank; empty and
    uneven blocks included."""
    a_np = _values((3, 4), first, 30) if first != np.bool_ else _values((3, 4), int, 30) > 0
    b_np = _values((4, 3), second, 31) if second != np.bool_ else _values((4, 3), int, 31) < 0
    if first == np.int8:  # wraps around, as in NumPy
        a_np, b_np = a_np * 40, b_np * 40
    expected = np.vdot(a_np, b_np)
    with Verdict(comm) as verdict:
        for (la, a), (lb, b) in itertools.product(_layouts(a_np, mesh), _layouts(b_np, mesh)[:3]):
            got = np.vdot(a, b)
            ok = isinstance(got, dmesh.DArray) and got.shape == () and got.dtype == expected.dtype
            problem = _mismatch(got, expected)
            verdict.check(ok and not problem, f"{la}, {lb}: {got!r} {problem}")
            value = np.asarray(got.full_array())
            same = len(set(comm.allgather(value.tobytes()))) == 1
            verdict.check(same, f"{la}, {lb}: ranks got different bits")


def test_vdot_of_flattened_and_sliced_vectors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Flattening cuts the elements where the rows were cut; a slice cuts them elsewhere: the
    operands are aligned before the blocks meet. A float vdot's value is the same on every rank."""
    z_np = (_values((5, 3), np.float64, 32) + 1j * _values((5, 3), np.float64, 33)) / 7
    w_np = _values((16,), np.complex128, 34) / 3
    z = dmesh.distribute(z_np, mesh, [Shard(0)] * mesh.ndim)
    zt = dmesh.distribute(z_np.T.copy(), mesh, [Shard(1)] * mesh.ndim)
    w = dmesh.distribute(w_np, mesh, [Shard(0)] * mesh.ndim)[1:]
    cases = [
        (np.vdot(z, w), np.vdot(z_np, w_np[1:])),
        (np.vdot(w, z), np.vdot(w_np[1:], z_np)),
        (np.vdot(zt, z), np.vdot(z_np.T, z_np)),
        (np.vdot(z, z), np.vdot(z_np, z_np)),
    ]
    problems = [p for p in (_mismatch(g, e) for g, e in cases) if p]
    values = [np.complex128(complex(g)).tobytes() for g, _ in cases]
    gathered = comm.allgather(values)
    same = all(v == gathered[0] for v in gathered)
    assert_all(comm, not problems and same, f"{problems} {gathered}")


def test_vdot_errors_are_raised_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(np.ones((3, 4)), mesh, [Shard(0)] * mesh.ndim)
    b = dmesh.distribute(np.ones(11), mesh, [Shard(0)] * mesh.ndim)
    assert_raises_all(comm, ArgumentError, np.vdot, a, b, match="12 and 11")
    assert_raises_all(comm, UnsupportedError, np.vdot, 2.0, b, match="scalar")
