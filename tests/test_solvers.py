"""Square-matrix np.linalg functions of sharded DArrays (issue 14, item 9): ``inv``,
``solve``, ``cholesky``, ``det``, ``slogdet``, ``eigh`` and the other local functions.

Below the gather threshold a sharded matrix is replicated and NumPy's LAPACK call runs on
every rank: NumPy's bits. A stack sharded along its stack dim is computed block by block
without messages: NumPy's bits. Above the threshold (set to 0 here, with small panels so
that panels cross the row blocks) blocked Cholesky and LU run on the mesh: NumPy's values
to rounding, the same bits on every rank, for uneven and empty row blocks, a sharded
column dim, float32, complex and integer matrices. Errors are raised on every rank.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.collectives.errors import UnsupportedError
from dmesh.core.placement import Placement
from dmesh.ops.kernels import blocked, solvers
from helpers import BitVerdict, assert_raises_all

RNG = np.random.default_rng(2024)


def spd(n: int, dtype: Any = np.float64, seed: int = 0) -> np.ndarray:
    """A well-conditioned Hermitian positive definite matrix."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
    return (a @ a.conj().T + n * np.eye(n)).astype(dtype)


def general(n: int, dtype: Any = np.float64, seed: int = 1) -> np.ndarray:
    """A nonsymmetric matrix whose LU needs pivoting (small diagonal)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
    a[np.diag_indices(n)] *= 1e-3
    return a.astype(dtype)


def layouts(x: np.ndarray, mesh: dmesh.DeviceMesh) -> Iterator[tuple[str, dmesh.DArray]]:
    """Shard on each axis (each mesh dim), both axes on the (2, 2) mesh, uneven rows,
    and a Partial("sum") matrix."""
    choices: list[Placement] = [Replicate(), Shard(0), Shard(1)]
    for p in itertools.product(choices, repeat=mesh.ndim):
        if any(isinstance(q, Shard) for q in p):
            yield str(p), dmesh.distribute(x, mesh, list(p))
    padded = np.concatenate([x[:1], x])
    yield "uneven", dmesh.distribute(padded, mesh, [Shard(0)] * mesh.ndim)[1:]
    rest = [Replicate()] * (mesh.ndim - 1)
    yield "partial", dmesh.distribute(x, mesh, [Partial("sum"), *rest])


def record(verdict: BitVerdict, label: str, got: Any, want: Any, rtol: float) -> None:
    """``got`` (DArray or tuple of them) gathered against NumPy's ``want``; bits recorded."""
    if isinstance(want, tuple):
        verdict.check(type(got) is type(want), f"{label}: {type(got)}")
        for i, (g, w) in enumerate(zip(got, want)):
            record(verdict, f"{label}[{i}]", g, w, rtol)
        return
    full = got.full_array() if isinstance(got, dmesh.DArray) else np.asarray(got)
    verdict.equal(full, np.asarray(want), rtol=rtol, atol=rtol)
    verdict.bits(label, full)


LOCAL = [
    np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky, np.linalg.eigh,
    np.linalg.eigvalsh, np.linalg.eigvals, np.linalg.pinv, np.linalg.matrix_rank, np.linalg.cond,
]  # fmt: skip


def test_small_sharded_matrix_is_gathered(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Below the threshold: NumPy's own bits, whatever the layout; inv keeps the layout."""
    a = spd(5)
    b = RNG.standard_normal((5, 3))
    with BitVerdict(comm) as verdict:
        for label, x in layouts(a, mesh):
            for func in LOCAL:
                record(verdict, f"{func.__name__} {label}", func(x), func(a), 0.0)
            for b_label, y in layouts(b, mesh):  # LAPACK's rounding depends on b's width
                got = np.linalg.solve(x, y)
                record(verdict, f"solve {label} {b_label}", got, np.linalg.solve(a, b), 1e-13)
            inverse = np.linalg.inv(x)
            shards = [p for p in x.placements if isinstance(p, Shard)]
            verdict.check(
                [p for p in inverse.placements if isinstance(p, Shard)] == shards,
                f"inv {label}: {inverse.placements}",
            )


def test_positional_options(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """cond's p, eigh's UPLO, pinv's rcond positionally; a replicated DArray rtol."""
    a = spd(5)
    rows = [Shard(0)] * mesh.ndim
    x = dmesh.distribute(a, mesh, rows)
    rep = dmesh.distribute(np.asarray(1e-3), mesh, [Replicate()] * mesh.ndim)
    with BitVerdict(comm) as verdict:
        record(verdict, "cond fro", np.linalg.cond(x, "fro"), np.linalg.cond(a, "fro"), 0.0)
        record(verdict, "eigh U", np.linalg.eigh(x, "U"), np.linalg.eigh(a, "U"), 0.0)
        record(verdict, "pinv", np.linalg.pinv(x, 1e-3), np.linalg.pinv(a, 1e-3), 0.0)
        replicated = dmesh.distribute(a, mesh, [Replicate()] * mesh.ndim)
        got = np.linalg.pinv(replicated, rtol=rep)
        record(verdict, "pinv rtol", got, np.linalg.pinv(a, rtol=1e-3), 0.0)
    assert_raises_all(comm, UnsupportedError, np.linalg.pinv, x, rtol=rep, match="replicated")


def test_stack_sharded_along_stack_dim(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Each rank computes its own matrices: NumPy's bits, no messages, the stack's sharding."""
    stack = np.stack([spd(4, seed=s) for s in range(5)])
    rest = [Replicate()] * (mesh.ndim - 1)
    x = dmesh.distribute(stack, mesh, [Shard(0), *rest])
    with BitVerdict(comm) as verdict:
        for func in (np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky,
                     np.linalg.eigh, np.linalg.eigvalsh):  # fmt: skip
            with debug.CommMode() as mode:
                got = func(x)
            verdict.check(mode.counts() == {}, f"{func.__name__} communicated {mode.counts()}")
            first = got[0] if isinstance(got, tuple) else got
            verdict.check(first.placements[0] == Shard(0), f"{func.__name__}: {first.placements}")
            record(verdict, func.__name__, got, func(stack), 0.0)


@pytest.fixture
def blocked_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every sharded matrix above the threshold, panels of 2 columns."""
    monkeypatch.setattr(blocked, "PANEL", 2)
    with solvers.gather_threshold(0):
        yield


@pytest.mark.usefixtures("blocked_path")
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_blocked_factorizations(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: Any) -> None:
    """cholesky, inv, det, slogdet and solve (1-D and 2-D b) by the blocked algorithms."""
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    for n in (7, 3):  # 3 rows: empty row blocks at 4 ranks
        s, g = spd(n, dtype), general(n, dtype)
        b = RNG.standard_normal((n, 2)).astype(dtype)
        with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
            for label, x in layouts(s, mesh):
                record(verdict, f"cholesky {n} {label}", np.linalg.cholesky(x),
                       np.linalg.cholesky(s), rtol)  # fmt: skip
                got = np.linalg.cholesky(x, upper=True)
                record(verdict, f"upper {label}", got, np.linalg.cholesky(s, upper=True), rtol)
            for label, x in layouts(g, mesh):
                record(verdict, f"inv {n} {label}", np.linalg.inv(x), np.linalg.inv(g), rtol)
                record(verdict, f"det {n} {label}", np.linalg.det(x), np.linalg.det(g), rtol)
                got = np.linalg.slogdet(x)
                record(verdict, f"slogdet {n} {label}", got, np.linalg.slogdet(g), rtol)
                for b_label, y in list(layouts(b, mesh))[::3]:  # a few: each one is slow
                    want = np.linalg.solve(g, b)
                    record(verdict, f"solve {label} {b_label}", np.linalg.solve(x, y), want, rtol)
                y = dmesh.distribute(b[:, 0].copy(), mesh, [Shard(0)] * mesh.ndim)
                record(verdict, f"solve 1-D {label}", np.linalg.solve(x, y),
                       np.linalg.solve(g, b[:, 0]), rtol)  # fmt: skip


@pytest.mark.usefixtures("blocked_path")
def test_blocked_special_matrices(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Integers (float64 results), a permutation (pivots across blocks), negative
    determinants, a singular matrix (det 0, slogdet (0, -inf), inv/solve raise)."""
    rows = [Shard(0)] * mesh.ndim
    ints = np.array([[0, 2, 1, 0], [3, 0, 0, 1], [0, 0, 0, 5], [1, 1, 4, 0]])
    perm = np.eye(6)[[5, 0, 4, 1, 3, 2]]
    singular = np.arange(25.0).reshape(5, 5)
    with BitVerdict(comm) as verdict:
        for m in (ints, perm, -perm):
            x = dmesh.distribute(m, mesh, rows)
            record(verdict, "det", np.linalg.det(x), np.linalg.det(m), 1e-12)
            record(verdict, "slogdet", np.linalg.slogdet(x), np.linalg.slogdet(m), 1e-12)
            record(verdict, "inv", np.linalg.inv(x), np.linalg.inv(m), 1e-12)
        x = dmesh.distribute(singular, mesh, rows)
        verdict.equal(np.linalg.det(x).full_array(), 0.0)
        sign, log = np.linalg.slogdet(x)
        verdict.equal(sign.full_array(), 0.0)
        verdict.equal(log.full_array(), -np.inf)
    assert_raises_all(comm, np.linalg.LinAlgError, np.linalg.inv, x, match="Singular")
    y = dmesh.distribute(np.ones(5), mesh, rows)
    assert_raises_all(comm, np.linalg.LinAlgError, np.linalg.solve, x, y, match="Singular")
    not_pd = dmesh.distribute(-spd(5), mesh, rows)
    assert_raises_all(comm, np.linalg.LinAlgError, np.linalg.cholesky, not_pd)


def hermitian(n: int, dtype: Any = np.float64, seed: int = 5) -> np.ndarray:
    """A Hermitian matrix with eigenvalues of both signs (and a non-real diagonal
    for complex ones: LAPACK reads only its real part)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
    return (a + a.conj().T + np.diag(rng.standard_normal(n) * 1j if a.dtype.kind == "c"
                                     else np.zeros(n))).astype(dtype)  # fmt: skip


def record_eigh(verdict: BitVerdict, label: str, got: Any, a: np.ndarray, uplo: str,
                rtol: float) -> None:  # fmt: skip
    """``eigh``'s result against NumPy: eigenvalues to rounding (the same bits on every
    rank), eigenvectors by what defines them (``A V = V diag(w)``, ``V^H V = I``) and, for
    eigenvalues apart from the others, equal to NumPy's up to a unit factor."""
    want_w, want_v = np.linalg.eigh(a, uplo)
    w, v = got.eigenvalues.full_array(), got.eigenvectors.full_array()
    n = len(a)
    scale = max(float(np.max(np.abs(want_w), initial=0.0)), 1e-300)
    verdict.check(w.dtype == want_w.dtype and v.dtype == want_v.dtype, f"{label}: dtypes")
    verdict.equal(w, want_w, rtol=rtol, atol=rtol * scale)
    verdict.bits(label, w)
    full = np.tril(a) if uplo == "L" else np.triu(a)
    full = full + np.conj(np.tril(a, -1) if uplo == "L" else np.triu(a, 1)).T
    full[np.diag_indices(n)] = np.real(np.diagonal(a))
    verdict.equal(full @ v, v * w, atol=rtol * scale * max(n, 1))
    verdict.equal(v.conj().T @ v, np.eye(n, dtype=v.dtype), atol=rtol * max(n, 1))
    gaps = np.diff(want_w)
    apart = np.ones(n, bool)
    if n > 1:
        close = np.abs(gaps) <= 1e3 * rtol * scale
        apart[1:] &= ~close
        apart[:-1] &= ~close
    overlap = np.abs(np.sum(v.conj() * want_v, axis=0))[apart]
    verdict.equal(overlap, np.ones_like(overlap), atol=1e3 * rtol)


@pytest.mark.usefixtures("blocked_path")
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_blocked_eigh(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: Any) -> None:
    """eigh and eigvalsh by parallel block Jacobi, each triangle, every layout; 1 and 3
    rows leave ranks without rows (and blocks without columns)."""
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for n in (9, 3, 1):
        a = hermitian(n, dtype)
        with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
            for label, x in layouts(a, mesh):
                for uplo in ("L", "U"):
                    got = np.linalg.eigh(x, uplo)
                    record_eigh(verdict, f"eigh {n} {uplo} {label}", got, a, uplo, rtol)
                    values = np.linalg.eigvalsh(x, UPLO=uplo).full_array()
                    want = np.linalg.eigvalsh(a, UPLO=uplo)
                    scale = float(np.max(np.abs(want)))
                    verdict.equal(values, want, rtol=rtol, atol=rtol * scale)
                    verdict.bits(f"eigvalsh {n} {uplo} {label}", values)


@pytest.mark.usefixtures("blocked_path")
def test_blocked_eigh_special_matrices(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Repeated eigenvalues (the identity, zeros, a +-1 reflection, a Jacobi-hard
    clustered matrix), graded ones from 1e-12 to 1e3, entries near overflow and
    underflow, integers; NaN or inf gives NaN everywhere; a bad UPLO raises on every rank."""
    rng = np.random.default_rng(6)
    n = 11
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    cases = {
        "eye": np.eye(n), "zeros": np.zeros((n, n)),
        "reflection": q @ np.diag(np.where(np.arange(n) % 2, 1.0, -1.0)) @ q.T,
        "clustered": q @ np.diag(1 + 1e-9 * np.arange(n)) @ q.T,
        "graded": q @ np.diag(np.logspace(-12, 3, n)) @ q.T,
        "huge": hermitian(n) * 1e300, "tiny": hermitian(n) * 1e-300,
        "ints": rng.integers(-9, 9, (n, n)),
    }  # fmt: skip
    rows = [Shard(0)] * mesh.ndim
    with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
        for label, m in cases.items():
            m = (m + m.T) / 2 if label not in ("ints", "huge", "tiny") else m
            record_eigh(verdict, label, np.linalg.eigh(dmesh.distribute(m, mesh, rows)),
                        m, "L", 1e-12)  # fmt: skip
        for bad in (np.nan, np.inf):
            m = hermitian(n)
            m[n - 1, 2] = bad
            w, v = np.linalg.eigh(dmesh.distribute(m, mesh, rows))
            verdict.check(bool(np.isnan(w.full_array()).all()), f"{bad}: eigenvalues")
            verdict.check(bool(np.isnan(v.full_array()).all()), f"{bad}: eigenvectors")
            unread = np.linalg.eigh(dmesh.distribute(m, mesh, rows), "U")  # below the diagonal
            record_eigh(verdict, f"{bad} unread", unread, m, "U", 1e-12)
        # A Partial("max") matrix: the max over mesh dim 0 of (the matrix at 0, -inf elsewhere).
        m = hermitian(n)
        terms = m if mesh.coordinate[0] == 0 else np.full_like(m, -np.inf)
        rest = [Replicate()] * (mesh.ndim - 1)
        partial = dmesh.from_local(terms, mesh, [Partial("max"), *rest])
        record_eigh(verdict, "partial max", np.linalg.eigh(partial), m, "L", 1e-12)
    x = dmesh.distribute(hermitian(n), mesh, rows)
    assert_raises_all(comm, ValueError, np.linalg.eigh, x, "X", match="UPLO")


@pytest.mark.usefixtures("blocked_path")
def test_above_threshold_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """No blocked algorithm: UnsupportedError naming the threshold, on every rank."""
    rows = [Shard(0)] * mesh.ndim
    x = dmesh.distribute(spd(5), mesh, rows)
    for func in (np.linalg.eig, np.linalg.pinv, np.linalg.eigvals):
        assert_raises_all(comm, UnsupportedError, func, x, match="gather threshold")
    stack = dmesh.distribute(np.stack([spd(4), spd(4)]), mesh, [Shard(1)] * mesh.ndim)
    assert_raises_all(comm, UnsupportedError, np.linalg.inv, stack, match="stack")
    b3 = dmesh.distribute(np.ones((2, 5, 1)), mesh, [Replicate()] * mesh.ndim)
    assert_raises_all(comm, UnsupportedError, np.linalg.solve, x, b3, match="DArray b")
    wide = dmesh.distribute(np.ones((4, 6)), mesh, rows)
    assert_raises_all(comm, np.linalg.LinAlgError, np.linalg.det, wide, match="square")
    y = dmesh.distribute(np.ones(4), mesh, rows)
    assert_raises_all(comm, Exception, np.linalg.solve, x, y)


def test_threshold_setter(comm: MPI.Intracomm) -> None:
    old = solvers.set_gather_threshold(10)
    try:
        assert solvers.GATHER_THRESHOLD == 10
        with solvers.gather_threshold(0):
            assert solvers.GATHER_THRESHOLD == 0
        assert solvers.GATHER_THRESHOLD == 10
    finally:
        solvers.set_gather_threshold(old)
    assert_raises_all(comm, Exception, solvers.set_gather_threshold, -1)


def test_tensorsolve(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """NumPy's steps on DArrays: axes moved last, reshaped, solved (gathered or blocked)."""
    a = (np.eye(6) * 3 + RNG.uniform(0, 1, (6, 6))).reshape(2, 3, 6)
    b = RNG.uniform(0, 1, (2, 3))
    moved = a.transpose(2, 0, 1).copy()
    with BitVerdict(comm) as verdict:
        for label, x in layouts(a.reshape(6, 6), mesh):
            x3 = np.reshape(x, (2, 3, 6))
            y = dmesh.distribute(b, mesh, [Replicate()] * mesh.ndim)
            record(verdict, f"tensorsolve {label}", np.linalg.tensorsolve(x3, y),
                   np.linalg.tensorsolve(a, b), 1e-12)  # fmt: skip
            with solvers.gather_threshold(0):
                record(verdict, f"blocked {label}", np.linalg.tensorsolve(x3, y),
                       np.linalg.tensorsolve(a, b), 1e-12)  # fmt: skip
        xm = dmesh.distribute(moved, mesh, [Shard(0)] * mesh.ndim)
        y = dmesh.distribute(b, mesh, [Shard(0)] * mesh.ndim)
        got = np.linalg.tensorsolve(xm, y, axes=(0,))
        record(verdict, "axes", got, np.linalg.tensorsolve(moved, b, axes=(0,)), 1e-12)
    bad = dmesh.distribute(np.ones((2, 3, 5)), mesh, [Replicate()] * mesh.ndim)
    assert_raises_all(comm, np.linalg.LinAlgError, np.linalg.tensorsolve, bad, y)


def test_blocked_recursive_panels(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wide panels: the recursive panel LU (several levels above the unblocked base),
    and Cholesky's trailing update by chunks of rows stopping at the diagonal; a
    singular panel (zero columns) still gives det 0 on every rank."""
    monkeypatch.setattr(blocked, "PANEL", 16)
    monkeypatch.setattr(blocked, "_BASE", 2)
    monkeypatch.setattr(blocked, "_CHUNK", 5)
    rows = [Shard(0)] * mesh.ndim
    n = 37
    s, g = spd(n, seed=3), general(n, seed=4)
    zero = g.copy()
    zero[:, 5] = 0
    with solvers.gather_threshold(0), BitVerdict(comm) as verdict, np.errstate(all="ignore"):
        for label, pad in [("even", False), ("uneven", True)]:

            def put(m: np.ndarray, pad: bool = pad) -> dmesh.DArray:
                if not pad:
                    return dmesh.distribute(m, mesh, rows)
                return dmesh.distribute(np.concatenate([m[:1], m]), mesh, rows)[1:]

            record(verdict, f"cholesky {label}", np.linalg.cholesky(put(s)),
                   np.linalg.cholesky(s), 1e-12)  # fmt: skip
            record(verdict, f"inv {label}", np.linalg.inv(put(g)), np.linalg.inv(g), 1e-10)
            record(verdict, f"slogdet {label}", np.linalg.slogdet(put(g)),
                   np.linalg.slogdet(g), 1e-12)  # fmt: skip
            verdict.equal(np.linalg.det(put(zero)).full_array(), 0.0)
