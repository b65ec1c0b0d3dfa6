"""``np.linalg`` on DArrays: TSQR ``qr``/``svd``/``lstsq`` of row-sharded tall matrices,
``solve`` with a replicated matrix, and the functions that run on replicated arguments.

Compared with NumPy on one process, on 1-D meshes and on (2, 2) at 4 ranks, with
even, uneven and empty blocks and blocks shorter than the matrix is wide. Every rank
makes the same sequence of collective assertions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import ArgumentTypeError, UnsupportedError
from dmesh.ops.kernels import linalg, solvers
from dmesh.ops.kernels.linalg import LOCAL_ONLY
from helpers import assert_all, assert_raises_all

WORLD = MPI.COMM_WORLD.Get_size()
TOL = 1e-10
_RNG = np.random.default_rng(3)
TALL = _RNG.standard_normal((13, 3))
TALL_C = TALL + 1j * _RNG.standard_normal((13, 3))


def _placements(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    """Rows sharded (nested on 2-D), columns sharded, and mixes with Replicate."""
    if mesh.ndim == 1:
        return [[Shard(0)], [Shard(1)]]
    return [
        [Shard(0), Shard(0)],
        [Shard(0), Replicate()],
        [Replicate(), Shard(0)],
        [Shard(0), Shard(1)],
        [Shard(1), Shard(0)],
        [Shard(1), Replicate()],
    ]


def _close(got: Any, expected: Any, tol: float = TOL) -> str:
    """'' when ``got`` (a DArray, gathered: collective) matches NumPy's ``expected``."""
    full = np.asarray(got.full_array()) if isinstance(got, dmesh.DArray) else np.asarray(got)
    expected = np.asarray(expected)
    if full.shape != expected.shape or full.dtype != expected.dtype:
        return f"{full.dtype}{full.shape} != {expected.dtype}{expected.shape}"
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    if not np.allclose(full, expected, rtol=0, atol=tol * scale):
        return f"max error {np.max(np.abs(full - expected))}"
    return ""


def _check(comm: MPI.Intracomm, pairs: list[tuple[Any, Any]], label: str, tol: float = TOL) -> None:
    problems = [p for p in (_close(g, e, tol) for g, e in pairs) if p]
    assert_all(comm, not problems, f"{label}: {problems}")


def _uneven(a: np.ndarray, mesh: dmesh.DeviceMesh) -> tuple[dmesh.DArray, np.ndarray]:
    """``a``'s rows (extended to fit) cut into blocks of 2, 0, 5, 1, ... rows, nested in mesh
    order: blocks shorter than the matrix is wide, empty blocks, and the top rows of
    ``Q`` spread over several ranks. Returns the DArray and the global array."""
    p = int(np.prod(mesh.shape))
    sizes = [(2, 0, 5, 1)[i % 4] for i in range(p)]
    sizes[-1] += 6
    rows = np.resize(a, (sum(sizes), a.shape[1])) * np.arange(1, sum(sizes) + 1)[:, None] ** 0.5
    number = int(np.ravel_multi_index(mesh.coordinate, mesh.shape))
    start = sum(sizes[:number])
    block = rows[start : start + sizes[number]]
    return dmesh.from_local(block, mesh, [Shard(0)] * mesh.ndim), rows


def _qr_check(comm: MPI.Intracomm, x: dmesh.DArray, a: np.ndarray, label: str) -> None:
    q, r = np.linalg.qr(x)
    q_np, r_np = np.linalg.qr(a)
    _check(comm, [(q, q_np), (r, r_np), (np.linalg.qr(x, mode="r"), r_np)], label)
    rows = Shard(0) in x.placements and Shard(1) not in x.placements  # else moved to rows
    layout_ok = not rows or q.spec.layout.bounds[0] == x.spec.layout.bounds[0]
    placed = all(p in (Shard(0), Replicate()) for p in q.placements)
    replicated = r.placements == (Replicate(),) * x.mesh.ndim
    assert_all(comm, layout_ok and placed and replicated, f"{label}: {q!r} {r!r} from {x!r}")
    below = np.tril(r.full_array(), -1)  # +0.0, as NumPy's (a sign flip must not make -0.0)
    assert_all(comm, not np.signbit(below.real).any(), f"{label}: -0.0 below R's diagonal")


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_qr_matches_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: Any) -> None:
    """Q and R equal NumPy's (signs included) for every layout; Q keeps a's row blocks."""
    a = (TALL if dtype == np.float64 else TALL_C).astype(dtype)
    for placements in _placements(mesh):
        _qr_check(comm, dmesh.distribute(a, mesh, placements), a, f"{placements}")
    _qr_check(comm, dmesh.distribute(a, mesh, [Replicate()] * mesh.ndim), a, "replicated")


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_qr_uneven_and_empty_blocks(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: Any
) -> None:
    x, a = _uneven((TALL if dtype != np.complex128 else TALL_C).astype(dtype), mesh)
    if dtype == np.float32:
        q, r = np.linalg.qr(x)
        q_np, r_np = np.linalg.qr(a)
        _check(comm, [(q, q_np), (r, r_np)], "float32", tol=1e-5)
        return
    _qr_check(comm, x, a, f"uneven {dtype.__name__}")


@pytest.mark.parametrize("shape", [(3, 5), (4, 4), (2, 3)], ids=str)
def test_qr_wide_and_square(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: Any) -> None:
    """m <= n: Q is m x m (mode 'complete' is the same), R is m x n; fewer rows than ranks."""
    a = _RNG.standard_normal(shape)
    for complex_part in (0, 1):
        a = a + 1j * complex_part * _RNG.standard_normal(shape)
        x = dmesh.distribute(a, mesh, [Shard(0)] * mesh.ndim)
        _qr_check(comm, x, a, f"{shape}")
        q, _ = np.linalg.qr(x, mode="complete")
        _check(comm, [(q, np.linalg.qr(a, mode="complete")[0])], f"complete {shape}")


@pytest.mark.parametrize("combine", ["tree", "gather"])
def test_qr_by_pieces(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, combine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks factored by many small pieces (recursively), combined by either strategy."""
    monkeypatch.setattr(linalg, "_PIECE_BYTES", 16)  # pieces of 2 n rows
    monkeypatch.setattr(linalg, "COMBINE", combine)
    a = _RNG.standard_normal((101, 4)) + 1j * _RNG.standard_normal((101, 4))
    x = dmesh.distribute(a, mesh, [Shard(0)] * mesh.ndim)
    _qr_check(comm, x, a, f"pieces {combine}")
    u, s, vh = np.linalg.svd(x, full_matrices=False)
    u_np, s_np, vh_np = np.linalg.svd(a, full_matrices=False)
    _check(comm, [(u, u_np), (s, s_np), (vh, vh_np)], f"svd pieces {combine}")
    uneven, b = _uneven(a[:, :3], mesh)
    _qr_check(comm, uneven, b, f"pieces uneven {combine}")


def test_qr_rank_deficient_and_partial(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Rank-deficient: Q @ R == a and Q orthonormal (Q is not unique). Partial inputs reduce."""
    a = np.column_stack([TALL[:, 0], 2 * TALL[:, 0], TALL[:, 1]])
    q, r = np.linalg.qr(dmesh.distribute(a, mesh, [Shard(0)] * mesh.ndim))
    qf, rf = np.asarray(q.full_array()), np.asarray(r.full_array())
    ok = np.allclose(qf @ rf, a, atol=1e-12) and np.allclose(qf.T @ qf, np.eye(3), atol=1e-12)
    assert_all(comm, bool(ok), "rank-deficient QR")
    partial = dmesh.distribute(TALL, mesh, [Partial("sum")] + [Shard(0)] * (mesh.ndim - 1))
    q, r = np.linalg.qr(partial)
    _check(comm, [(q, np.linalg.qr(TALL)[0]), (r, np.linalg.qr(TALL)[1])], "partial")


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_svd_matches_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: Any) -> None:
    a = (TALL if dtype == np.float64 else TALL_C).astype(dtype)
    u_np, s_np, vh_np = np.linalg.svd(a, full_matrices=False)
    for placements in _placements(mesh):
        x = dmesh.distribute(a, mesh, placements)
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        _check(comm, [(u, u_np), (s, s_np), (vh, vh_np)], f"svd {placements}")
        _check(comm, [(np.linalg.svd(x, compute_uv=False), s_np)], f"values {placements}")
    x, b = _uneven(a, mesh)
    u, s, vh = np.linalg.svd(x, full_matrices=False)
    u_np, s_np, vh_np = np.linalg.svd(b, full_matrices=False)
    _check(comm, [(u, u_np), (s, s_np), (vh, vh_np)], "svd uneven")
    assert_all(comm, u.spec.layout.bounds[0] == x.spec.layout.bounds[0], f"{u!r}")


def _lstsq_check(comm: MPI.Intracomm, got: Any, expected: Any, label: str) -> None:
    x, residuals, rank, s = got
    _check(comm, [(x, expected[0]), (residuals, expected[1]), (s, expected[3])], label)
    same = type(rank) is type(expected[2]) and rank == expected[2]
    replicated = all(v.placements == (Replicate(),) * v.mesh.ndim for v in (x, residuals, s))
    assert_all(comm, same and replicated, f"{label}: rank {rank!r} != {expected[2]!r}, {x!r}")


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_lstsq_matches_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: Any) -> None:
    a = (TALL if dtype == np.float64 else TALL_C).astype(dtype)
    b2 = _RNG.standard_normal((13, 2)).astype(dtype)
    for placements in _placements(mesh):
        x = dmesh.distribute(a, mesh, placements)
        for b in (b2[:, 0], b2):
            expected = np.linalg.lstsq(a, b)
            for b_placements in (placements, [Replicate()] * mesh.ndim):
                if b.ndim == 1 and Shard(1) in b_placements:
                    continue
                rhs = dmesh.distribute(b, mesh, b_placements)
                _lstsq_check(comm, np.linalg.lstsq(x, rhs), expected, f"{placements} {b.shape}")
    x, a_rows = _uneven(a, mesh)
    b = _RNG.standard_normal(a_rows.shape[0]).astype(dtype)
    rhs = dmesh.distribute(b, mesh, [Shard(0)] * mesh.ndim)  # balanced: aligned to a's blocks
    _lstsq_check(comm, np.linalg.lstsq(x, rhs), np.linalg.lstsq(a_rows, b), "uneven")


def test_lstsq_rank_deficient_and_wide(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Rank from R's singular values, NumPy's minimum-norm solution, empty residuals."""
    a = np.column_stack([TALL, TALL[:, 0] - TALL[:, 1]])  # 4 columns, rank 3
    b = _RNG.standard_normal((13, 2))
    x = dmesh.distribute(a, mesh, [Shard(0)] * mesh.ndim)
    rhs = dmesh.distribute(b, mesh, [Shard(0)] * mesh.ndim)
    got = np.linalg.lstsq(x, rhs)
    expected = np.linalg.lstsq(a, b)
    _check(comm, [(got[0], expected[0]), (got[1], expected[1])], "deficient")
    _check(comm, [(got[3], expected[3])], "deficient s", tol=1e-12)  # s[-1] is ~1e-16
    assert_all(comm, got[2] == expected[2] == 3, f"rank {got[2]}")
    got = np.linalg.lstsq(x, rhs, rcond=0.5)  # a cut-off that drops a large singular value
    expected = np.linalg.lstsq(a, b, rcond=0.5)
    _check(comm, [(got[0], expected[0])], "rcond")
    assert_all(comm, got[2] == expected[2], f"rcond rank {got[2]} {expected[2]}")
    wide = _RNG.standard_normal((3, 5))  # underdetermined: the minimum-norm solution
    rhs = dmesh.distribute(b[:3, 0], mesh, [Shard(0)] * mesh.ndim)
    got = np.linalg.lstsq(dmesh.distribute(wide, mesh, [Shard(0)] * mesh.ndim), rhs)
    _lstsq_check(comm, got, np.linalg.lstsq(wide, b[:3, 0]), "wide")


def test_lstsq_partial_inputs(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    b = _RNG.standard_normal(13)
    x = dmesh.distribute(TALL, mesh, [Partial("sum")] + [Shard(0)] * (mesh.ndim - 1))
    rhs = dmesh.distribute(b, mesh, [Partial("sum")] + [Replicate()] * (mesh.ndim - 1))
    _lstsq_check(comm, np.linalg.lstsq(x, rhs), np.linalg.lstsq(TALL, b), "partial")


def test_solve(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """a replicated; b replicated, sharded along columns, along its system axis, or stacked."""
    a = _RNG.standard_normal((4, 4)) + 4 * np.eye(4)
    x = dmesh.distribute(a, mesh, [Replicate()] * mesh.ndim)
    cases = [
        (_RNG.standard_normal(4), [Shard(0)] * mesh.ndim),
        (_RNG.standard_normal((4, 7)), [Shard(1)] * mesh.ndim),
        (_RNG.standard_normal((4, 7)), [Shard(0)] + [Shard(1)] * (mesh.ndim - 1)),
        (_RNG.standard_normal((4, 2)), [Shard(1)] * mesh.ndim),  # empty blocks at 3+ ranks
        (_RNG.standard_normal((5, 4, 2)), [Shard(0)] + [Shard(2)] * (mesh.ndim - 1)),
        (_RNG.standard_normal((4, 3)), [Replicate()] * mesh.ndim),
    ]
    for b, placements in cases:
        rhs = dmesh.distribute(b, mesh, placements)
        got = np.linalg.solve(x, rhs)
        _check(comm, [(got, np.linalg.solve(a, b))], f"solve {b.shape} {placements}")
        kept = b.ndim > 1 and all(
            (p == Shard(b.ndim - 2) and q == Replicate()) or p == q
            for p, q in zip(placements, got.placements)
        )
        assert_all(comm, b.ndim == 1 or kept, f"{placements} -> {got!r}")
    stack = dmesh.distribute(np.stack([a, 2 * a]), mesh, [Replicate()] * mesh.ndim)
    b = _RNG.standard_normal((2, 4, 3))
    got = np.linalg.solve(stack, dmesh.distribute(b, mesh, [Shard(0)] * mesh.ndim))
    _check(comm, [(got, np.linalg.solve(np.stack([a, 2 * a]), b))], "stacked a")
    singular = dmesh.distribute(np.ones((4, 4)), mesh, [Replicate()] * mesh.ndim)
    rhs = dmesh.distribute(_RNG.standard_normal((4, 2)), mesh, [Shard(1)] * mesh.ndim)
    assert_raises_all(comm, np.linalg.LinAlgError, np.linalg.solve, singular, rhs)


@pytest.mark.parametrize("func", LOCAL_ONLY, ids=lambda f: f.__name__)
def test_local_only_functions(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, func: Any) -> None:
    """Replicated arguments: NumPy's result on every rank; sharded: an error naming what works."""
    a = _RNG.standard_normal((4, 4))
    a = a @ a.T + 4 * np.eye(4)  # symmetric positive definite: every function applies
    expected = func(a)
    got = func(dmesh.distribute(a, mesh, [Replicate()] * mesh.ndim))
    if isinstance(expected, tuple):
        assert_all(comm, type(got) is type(expected), f"{type(got)}")
        _check(comm, list(zip(got, expected)), func.__name__, tol=0.0)
    else:
        _check(comm, [(got, expected)], func.__name__, tol=0.0)
    sharded = dmesh.distribute(a, mesh, [Shard(0)] * mesh.ndim)  # small: replicated first
    got = func(sharded)
    if isinstance(expected, tuple):
        _check(comm, list(zip(got, expected)), f"sharded {func.__name__}", tol=0.0)
    else:
        _check(comm, [(got, expected)], f"sharded {func.__name__}", tol=0.0)
    with solvers.gather_threshold(0):  # large: blocked, or an error naming the threshold
        blocked = (np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky,
                   np.linalg.eigh, np.linalg.eigvalsh)  # fmt: skip
        if func in blocked:
            func(sharded)
        else:
            assert_raises_all(comm, UnsupportedError, func, sharded, match="gather threshold")


STACK = _RNG.standard_normal((3, 5, 2))


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_qr_and_svd_of_stacks_and_complete_factors(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dim: int
) -> None:
    """Stacks sharded along the stack (each rank its own matrices) or a matrix dim (replicated
    below the gather threshold), and the m x m factors of mode='complete' and
    full_matrices=True: NumPy's factors, Q and U back in the input's layout."""
    x = dmesh.distribute(STACK, mesh, [Shard(dim)] * mesh.ndim)
    pairs: list[tuple[Any, Any]] = []
    for mode in ("reduced", "complete", "r"):
        got, want = np.linalg.qr(x, mode=mode), np.linalg.qr(STACK, mode=mode)
        pairs += list(zip(got, want)) if mode != "r" else [(got, want)]
    for full in (True, False):
        pairs += list(zip(np.linalg.svd(x, full_matrices=full), np.linalg.svd(STACK, full)))
    pairs.append((np.linalg.svd(x, compute_uv=False), np.linalg.svd(STACK, compute_uv=False)))
    for order in (2, -2, "nuc"):
        pairs.append((np.linalg.norm(x, order, axis=(1, 2)), np.linalg.norm(STACK, order, (1, 2))))
    tall = dmesh.distribute(TALL, mesh, [Shard(min(dim, 1))] * mesh.ndim)
    q, r = np.linalg.qr(tall, mode="complete")
    u, s, vh = np.linalg.svd(tall)
    pairs += list(zip((q, r), np.linalg.qr(TALL, mode="complete")))
    pairs += list(zip((u, s, vh), np.linalg.svd(TALL)))
    same_layout = q.placements == tall.placements and u.placements == tall.placements
    _check(comm, pairs, f"stack sharded along {dim}")
    assert_all(comm, same_layout, f"{q!r} {u!r} from {tall!r}")


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rows = [Shard(0)] * mesh.ndim
    x = dmesh.distribute(TALL, mesh, rows)
    stack = dmesh.distribute(np.ones((2, 5, 3)), mesh, [Shard(1)] * mesh.ndim)
    big: list[tuple[type[BaseException], Any, tuple[Any, ...], dict[str, Any], str]] = [
        (UnsupportedError, np.linalg.qr, (x,), {"mode": "complete"}, "m x m"),
        (UnsupportedError, np.linalg.qr, (x,), {"mode": "raw"}, "raw"),
        (UnsupportedError, np.linalg.svd, (x,), {}, "full_matrices"),
        (UnsupportedError, np.linalg.svd, (x,), {"full_matrices": False, "hermitian": True},
         "hermitian"),
        (UnsupportedError, np.linalg.qr, (stack,), {}, "stack"),
        (UnsupportedError, np.linalg.norm, (stack,), {"ord": 2, "axis": (1, 2)}, "stack"),
    ]  # fmt: skip
    with solvers.gather_threshold(0):  # above the threshold: no distributed algorithm
        for error, func, args, kwargs, match in big:
            assert_raises_all(comm, error, func, *args, match=match, **kwargs)
    cases: list[tuple[type[BaseException], Any, tuple[Any, ...], dict[str, Any], str]] = [
        (ValueError, np.linalg.qr, (x,), {"mode": "thin"}, "mode"),
        (np.linalg.LinAlgError, np.linalg.qr, (dmesh.distribute(np.ones(5), mesh, rows),), {}, ""),
        (np.linalg.LinAlgError, np.linalg.lstsq, (x, dmesh.distribute(np.ones(12), mesh, rows)),
         {}, "Incompatible"),
        (ArgumentTypeError, np.linalg.lstsq, (x, np.ones(13)), {}, "implicit_replication"),
        (TypeError, np.linalg.qr, (x.astype(np.float16),), {}, "unsupported"),
    ]  # fmt: skip
    for error, func, args, kwargs, match in cases:
        assert_raises_all(comm, error, func, *args, match=match, **kwargs)
    with dmesh.implicit_replication():  # a plain b is then a replicated operand
        got = np.linalg.lstsq(x, TALL[:, 0] + 1)
    _lstsq_check(comm, got, np.linalg.lstsq(TALL, TALL[:, 0] + 1), "implicit")


@pytest.mark.skipif(WORLD < 2, reason="a subset mesh needs at least 2 ranks")
def test_subset_mesh(comm: MPI.Intracomm) -> None:
    """Ranks outside the mesh get empty blocks of the right specs and send nothing."""
    with dmesh.init_mesh((WORLD - 1,), comm=comm) as mesh:
        x = dmesh.distribute(TALL_C, mesh, [Shard(0)])
        rhs = dmesh.distribute(TALL[:, 0], mesh, [Shard(0)])
        small = dmesh.distribute(np.eye(3) * 2, mesh, [Replicate()])
        q, r = np.linalg.qr(x)
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        solution = np.linalg.lstsq(dmesh.distribute(TALL, mesh, [Shard(0)]), rhs)[0]
        inverse = np.linalg.inv(small)
        solved = np.linalg.solve(small, dmesh.distribute(TALL[:3].copy(), mesh, [Shard(1)]))
        results = (q, r, u, s, vh, solution, inverse, solved)
        empty = all(v.local.size == 0 for v in results)
        assert_all(comm, mesh.is_member or empty, "a non-member holds data")
        shapes = [v.shape for v in results]
        want = [(13, 3), (3, 3), (13, 3), (3,), (3, 3), (3,), (3, 3), (3, 3)]
        assert_all(comm, shapes == want, f"{shapes}")
        if mesh.is_member:  # the members check among themselves
            q_np, r_np = np.linalg.qr(TALL_C)
            _check(mesh.comm(), [(q, q_np), (r, r_np), (inverse, np.eye(3) / 2)], "subset")
