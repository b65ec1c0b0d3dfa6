"""The Array API linear algebra functions on DArrays (issue 15): the main namespace's
``matmul``, ``matrix_transpose``, ``tensordot``, ``vecdot`` and the ``linalg`` extension,
compared with ``array_api_strict`` on one process: values (factorizations through their
reconstructions), dtypes, shapes, the same bits on every rank, errors on every rank."""

from __future__ import annotations

import inspect
from typing import Any

import array_api_strict as xs
import numpy as np
import pytest
from mpi4py import MPI

import dmesh
import dmesh.array_api as xp
from dmesh import Replicate, Shard
from dmesh.ops.kernels.solvers import gather_threshold
from helpers import BitVerdict, assert_raises_all, signature_mismatches

xs.set_array_api_strict_flags(api_version="2024.12")
RNG = np.random.default_rng(15)
SQ = RNG.standard_normal((6, 6)) + 6 * np.eye(6)
SPD = SQ @ SQ.T
TALL = RNG.standard_normal((9, 4))
CPLX = SQ + 1j * RNG.standard_normal((6, 6))
MAIN = ["matmul", "matrix_transpose", "tensordot", "vecdot"]


def _rows(data: np.ndarray, mesh: dmesh.DeviceMesh, uneven: bool = False) -> dmesh.DArray:
    """``data`` row-sharded on every mesh dim; ``uneven``: shifted by one row."""
    place = [Shard(0)] * mesh.ndim
    if uneven:
        return dmesh.distribute(np.concatenate([data[:1], data]), mesh, place)[1:]
    return dmesh.distribute(data, mesh, place)


def _full(x: Any) -> np.ndarray:
    """A DArray gathered (collective), or a strict array as NumPy."""
    return np.asarray(x.full_array()) if isinstance(x, dmesh.DArray) else np.asarray(x)


def _same(v: BitVerdict, label: str, got: Any, want: Any, rtol: float = 1e-10) -> None:
    """Record ``got`` (a DArray) against ``want`` (a strict array): dtype, shape, values, bits."""
    full = _full(got)
    v.bits(label, full)
    expected = np.asarray(want)
    atol = rtol * max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    v.check(full.dtype == expected.dtype and full.shape == expected.shape,
            f"{label}: {full.dtype}{full.shape} != {expected.dtype}{expected.shape}")  # fmt: skip
    if full.shape == expected.shape:
        v.equal(full.astype(expected.dtype), expected, rtol=rtol, atol=atol)


@pytest.mark.pure
def test_signatures_match_the_standard() -> None:
    for name in MAIN:
        assert str(inspect.signature(getattr(xp, name))).replace("'", "").count("/") == 1
        assert list(inspect.signature(getattr(xp, name)).parameters) == list(
            inspect.signature(getattr(xs, name)).parameters)  # fmt: skip
    assert sorted(xp.linalg.__all__) == sorted(xs.linalg.__all__)
    assert not signature_mismatches(xp.linalg, xs.linalg, xs.linalg.__all__)


@pytest.mark.parametrize("uneven", [False, True], ids=["even", "uneven"])
def test_main_namespace(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, uneven: bool) -> None:
    a, sa = _rows(TALL, mesh, uneven), xs.asarray(TALL)
    c, sc = _rows(CPLX, mesh, uneven), xs.asarray(CPLX)
    ints = np.arange(-12, 12, dtype=np.int32).reshape(6, 4)
    i, si = _rows(ints, mesh, uneven), xs.asarray(ints)
    with BitVerdict(comm) as v:
        _same(v, "matmul", xp.matmul(xp.matrix_transpose(a), a), xs.matmul(sa.mT, sa))
        _same(v, "matmul int", xp.matmul(i, xp.matrix_transpose(i)), xs.matmul(si, si.mT))
        _same(v, "matmul c", xp.matmul(c, c), xs.matmul(sc, sc))
        _same(v, "mT", xp.matrix_transpose(c), xs.matrix_transpose(sc), rtol=0)
        _same(v, "tensordot", xp.tensordot(a, a, axes=([0], [0])),
              xs.tensordot(sa, sa, axes=([0], [0])))  # fmt: skip
        _same(v, "tensordot 1", xp.tensordot(c, c, axes=1), xs.tensordot(sc, sc, axes=1))
        _same(v, "vecdot", xp.vecdot(c, c), xs.vecdot(sc, sc))
        _same(v, "vecdot -2", xp.vecdot(a, a, axis=-2), xs.vecdot(sa, sa, axis=-2))
        _same(v, "vecdot int", xp.vecdot(i, i), xs.vecdot(si, si), rtol=0)


def test_linalg_values(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    la, sla = xp.linalg, xs.linalg
    m, sm = _rows(SQ, mesh), xs.asarray(SQ)
    p, sp = _rows(SPD, mesh, uneven=True), xs.asarray(SPD)
    t, st = _rows(TALL, mesh, uneven=True), xs.asarray(TALL)
    c, sc = _rows(CPLX, mesh), xs.asarray(CPLX)
    b, sb = _rows(TALL[:6], mesh), xs.asarray(TALL[:6, ...])
    with BitVerdict(comm) as v:
        _same(v, "det", la.det(m), sla.det(sm))
        _same(v, "inv", la.inv(c), sla.inv(sc))
        sign, logabs = la.slogdet(m)
        ssign, slogabs = sla.slogdet(sm)
        _same(v, "slogdet sign", sign, ssign)
        _same(v, "slogdet log", logabs, slogabs)
        _same(v, "solve", la.solve(m, b), sla.solve(sm, sb))
        _same(v, "solve vec", la.solve(m, b[:, 0]), xs.asarray(np.linalg.solve(SQ, TALL[:6, 0])))
        _same(v, "cholesky", la.cholesky(p), sla.cholesky(sp))
        _same(v, "cholesky upper", la.cholesky(p, upper=True), sla.cholesky(sp, upper=True))
        _same(v, "matrix_power 3", la.matrix_power(m, 3), sla.matrix_power(sm, 3))
        _same(v, "matrix_power -1", la.matrix_power(m, -1), sla.matrix_power(sm, -1))
        _same(v, "pinv", la.pinv(t), sla.pinv(st))
        _same(v, "pinv rtol", la.pinv(t, rtol=0.5), sla.pinv(st, rtol=0.5))
        _same(v, "matrix_rank", la.matrix_rank(t), sla.matrix_rank(st), rtol=0)
        _same(v, "matrix_rank rtol", la.matrix_rank(t, rtol=0.9), sla.matrix_rank(st, rtol=0.9))
        for ord in ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
            _same(v, f"matrix_norm {ord}", la.matrix_norm(t, ord=ord), sla.matrix_norm(st, ord=ord))
        _same(v, "matrix_norm keep", la.matrix_norm(c, keepdims=True),
              sla.matrix_norm(sc, keepdims=True))  # fmt: skip
        for ord in (2, 1, 3.5, np.inf, -np.inf, 0):
            _same(v, f"vector_norm {ord}", la.vector_norm(t, ord=ord),
                  sla.vector_norm(st, ord=ord))  # fmt: skip
        _same(v, "vector_norm axis", la.vector_norm(c, axis=0, keepdims=True),
              sla.vector_norm(sc, axis=0, keepdims=True))  # fmt: skip
        _same(
            v, "vector_norm axes", la.vector_norm(t, axis=(1, 0)), sla.vector_norm(st, axis=(1, 0))
        )
        r = dmesh.distribute(np.array(0.4), mesh, [Replicate()] * mesh.ndim)
        _same(v, "matrix_rank darray", la.matrix_rank(t, rtol=r),
              sla.matrix_rank(st, rtol=xs.asarray(0.4)))  # fmt: skip
        _same(v, "pinv darray", la.pinv(t, rtol=r), sla.pinv(st, rtol=xs.asarray(0.4)))
        small = SQ[:2, :2]  # fewer rows than ranks: empty blocks at 3 and 4 ranks
        _same(v, "det small", la.det(_rows(small, mesh)), sla.det(xs.asarray(small)))
        _same(v, "matmul small", xp.matmul(_rows(small, mesh), _rows(small, mesh)),
              xs.matmul(xs.asarray(small), xs.asarray(small)))  # fmt: skip
        stack = np.stack([SQ[:3, :3], SPD[:3, :3]])
        _same(v, "det stack", la.det(_rows(stack, mesh)), sla.det(xs.asarray(stack)))
        _same(v, "svdvals", la.svdvals(t), sla.svdvals(st))
        _same(v, "eigvalsh", la.eigvalsh(p), sla.eigvalsh(sp))
        _same(v, "trace", la.trace(c, offset=1), sla.trace(sc, offset=1))
        _same(v, "trace dtype", la.trace(m, dtype=np.float32), sla.trace(sm, dtype=xs.float32),
              rtol=1e-6)  # fmt: skip
        _same(v, "diagonal", la.diagonal(t, offset=-2), sla.diagonal(st, offset=-2), rtol=0)
        _same(v, "cross", la.cross(t[:, :3], t[:, 1:]), sla.cross(st[:, :3], st[:, 1:]))
        _same(v, "outer", la.outer(t[:, 0], m[0, :]), sla.outer(st[:, 0], sm[0, :]))
        _same(v, "linalg.matmul", la.matmul(m, t[:6]), sla.matmul(sm, st[:6, ...]))


def test_factorizations(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    la = xp.linalg
    p = _rows(SPD, mesh)
    with BitVerdict(comm) as v:
        w, q = la.eigh(p)
        v.check(type(la.eigh(p)).__name__ == "EighResult", "EighResult")
        wf, qf = _full(w), _full(q)
        v.bits("eigh", qf)
        v.equal(qf @ np.diag(wf) @ qf.T, SPD, rtol=1e-10, atol=1e-10 * np.abs(SPD).max())
        v.equal(wf, np.linalg.eigvalsh(SPD), rtol=1e-10)
        for mode, data in (("reduced", TALL), ("complete", TALL[:4].T.copy())):
            res = la.qr(_rows(data, mesh, uneven=True), mode=mode)
            v.check(type(res).__name__ == "QRResult" and res._fields == ("Q", "R"), "QRResult")
            qf, rf = _full(res.Q), _full(res.R)
            v.bits(f"qr {mode}", rf)
            v.check(qf.shape == np.linalg.qr(data, mode=mode)[0].shape, f"qr {mode} shape")
            v.equal(qf @ rf, data, atol=1e-12 * np.abs(TALL).max())
            v.equal(np.triu(rf), rf)
        for full, data in ((False, TALL), (True, SQ)):
            res = la.svd(_rows(data, mesh, uneven=True), full_matrices=full)
            v.check(type(res).__name__ == "SVDResult" and res._fields == ("U", "S", "Vh"), "SVD")
            u, s, vh = (_full(r) for r in res)
            v.bits(f"svd {full}", s)
            k = s.shape[0]
            v.check(u.shape == (data.shape[0], k) and vh.shape == (k, k), f"svd {u.shape}")
            v.equal((u[:, :k] * s) @ vh[:k], data, atol=1e-12 * np.abs(data).max())
        res = la.slogdet(p)
        v.check(type(res).__name__ == "SlogdetResult" and res._fields == ("sign", "logabsdet"), "")
        v.equal(_full(res.sign), 1.0)


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    la = xp.linalg
    m = _rows(SQ, mesh)
    t = _rows(TALL, mesh)
    i = _rows(np.arange(36).reshape(6, 6), mesh)
    assert_raises_all(comm, TypeError, xp.matmul, SQ, m, match="matmul.*asarray")
    assert_raises_all(comm, TypeError, la.det, SQ, match="det.*asarray")
    assert_raises_all(comm, TypeError, la.inv, i, match="inv: only floating-point")
    assert_raises_all(comm, TypeError, xp.matmul, m > 0, m, match="numeric")
    assert_raises_all(comm, ValueError, la.det, t, match="square")
    assert_raises_all(comm, ValueError, xp.vecdot, m, m, axis=0, match="negative")
    assert_raises_all(comm, ValueError, xp.vecdot, m, m, axis=-3, match="out of bounds")
    assert_raises_all(comm, ValueError, xp.vecdot, m, t[:, :3], match="differ in size")
    assert_raises_all(comm, ValueError, la.cross, m, m, match="must be 3")
    assert_raises_all(comm, ValueError, la.outer, m, m[0], match="1-D")
    assert_raises_all(comm, ValueError, xp.matrix_transpose, m[0], match="2-D")
    assert_raises_all(comm, ValueError, la.qr, t, mode="r", match="mode")
    assert_raises_all(comm, ValueError, la.matrix_norm, t, ord=3, match="ord")
    assert_raises_all(comm, TypeError, la.matrix_power, m, 1.5, match="int")
    assert_raises_all(comm, ValueError, la.solve, m, t, match="do not match")
    # no distributed algorithm above the gather threshold: NotImplementedError naming the function
    with gather_threshold(0):
        if comm.Get_size() > 1:
            svd, qr = la.svd, la.qr
            assert_raises_all(comm, NotImplementedError, svd, t, match="svd.*full_matrices=False")
            assert_raises_all(comm, NotImplementedError, qr, t, mode="complete", match="qr")


def test_hostile_values(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    data = np.array([[np.nan, 1.0], [-0.0, 2.0], [np.inf, -np.inf], [-0.0, -0.0], [3.0, 4.0]])
    x, sx = _rows(data, mesh, uneven=True), xs.asarray(data)
    la, sla = xp.linalg, xs.linalg
    with BitVerdict(comm) as v:
        for ord in (2, 1, np.inf, -np.inf, 0):
            _same(v, f"vector_norm {ord}", la.vector_norm(x, axis=-1, ord=ord),
                  sla.vector_norm(sx, axis=-1, ord=ord))  # fmt: skip
        _same(v, "vecdot", xp.vecdot(x, x), xs.vecdot(sx, sx))
        _same(v, "mT", xp.matrix_transpose(x), xs.matrix_transpose(sx), rtol=0)
        big = np.array([[np.iinfo(np.int64).max, 1], [-1, np.iinfo(np.int64).min]])
        _same(v, "int trace", la.trace(_rows(big, mesh)), sla.trace(xs.asarray(big)), rtol=0)
