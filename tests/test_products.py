"""Products of issue 14, item 9 against NumPy on one process: ``vecdot``, ``matvec``,
``vecmat``, batched ``matmul``, ``cross``, ``kron``, ``multi_dot``, ``matrix_power``,
implicit-output ``einsum`` and the ``np.linalg`` aliases (``vecdot``, ``matmul``,
``outer``, ``tensordot``, ``cross``, ``trace``).

Inputs hold small integers (every product and sum is exact in floating point), so the
gathered results must equal NumPy's exactly, for every placement of the operands
(Replicate, Shard on each axis, both mesh dims of the (2, 2) mesh), uneven blocks
(a slice of a sharded array) and empty ones (fewer rows than ranks).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from dmesh.collectives.errors import UnsupportedError
from dmesh.core.placement import Placement
from helpers import BitVerdict, assert_raises_all

pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
INF, NAN = np.inf, np.nan


def values(shape: tuple[int, ...], dtype: Any = np.float64, seed: int = 0) -> np.ndarray:
    """Small integers, negative ones too; complex parts differ."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, size=shape)
    if np.dtype(dtype).kind == "c":
        return (x + 1j * rng.integers(-4, 5, size=shape)).astype(dtype)
    return x.astype(dtype)


def layouts(x: np.ndarray, mesh: dmesh.DeviceMesh) -> Iterator[tuple[str, dmesh.DArray]]:
    """``x`` replicated, sharded on each axis over each mesh dim, and cut unevenly."""
    choices: list[Placement] = [Replicate(), *(Shard(d) for d in range(x.ndim))]
    for p in itertools.product(choices, repeat=mesh.ndim):
        if len({q for q in p if isinstance(q, Shard)}) == sum(isinstance(q, Shard) for q in p):
            yield str(p), dmesh.distribute(x, mesh, list(p))
    if x.ndim and x.shape[0]:  # a slice of a sharded array: uneven blocks
        padded = np.concatenate([x[:1], x])
        yield "uneven", dmesh.distribute(padded, mesh, [Shard(0)] * mesh.ndim)[1:]


def compare(verdict: BitVerdict, label: str, got: Any, want: Any) -> None:
    """Gathered ``got`` equals NumPy's ``want`` (shape, dtype, values); its bits are recorded."""
    full = got.full_array() if isinstance(got, dmesh.DArray) else np.asarray(got)
    verdict.equal(full, np.asarray(want))
    verdict.bits(label, full)


def pairs(
    x: np.ndarray, y: np.ndarray, mesh: dmesh.DeviceMesh
) -> Iterator[tuple[str, dmesh.DArray, dmesh.DArray]]:
    """Each layout of ``x`` with ``y`` replicated, and ``x`` replicated with each of ``y``."""
    rep = [Replicate()] * mesh.ndim
    for label, a in layouts(x, mesh):
        yield f"a {label}", a, dmesh.distribute(y, mesh, rep)
    for label, b in layouts(y, mesh):
        yield f"b {label}", dmesh.distribute(x, mesh, rep), b
    shard = [Shard(0)] * mesh.ndim
    yield "both S(0)", dmesh.distribute(x, mesh, shard), dmesh.distribute(y, mesh, shard)


def test_gufunc_products(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """vecdot (conjugating), matvec, vecmat and np.linalg.vecdot, over stacks."""
    v = values((5, 3), np.complex128, 1)
    w = values((5, 3), np.complex128, 2)
    m = values((5, 2, 3), np.float64, 3)
    with BitVerdict(comm) as verdict:
        for label, a, b in pairs(v, w, mesh):
            compare(verdict, f"vecdot {label}", np.vecdot(a, b), np.vecdot(v, w))
            compare(verdict, f"linalg {label}", np.linalg.vecdot(a, b), np.linalg.vecdot(v, w))
            compare(verdict, f"axis0 {label}", np.vecdot(a, b, axis=0), np.vecdot(v, w, axis=0))
        for label, a, b in pairs(m, w, mesh):
            compare(verdict, f"matvec {label}", np.matvec(a, b), np.matvec(m, w))
        for label, a, b in pairs(w[0], m[0].T.copy(), mesh):
            compare(verdict, f"vecmat {label}", np.vecmat(a, b), np.vecmat(w[0], m[0].T))


def test_batched_matmul(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """3-D x 2-D, 2-D x 3-D, 3-D x 1-D and 3-D x 3-D with the batch dim sharded."""
    t = values((5, 3, 4), np.float64, 4)
    m = values((4, 2), np.float64, 5)
    u = values((5, 4, 2), np.int64, 6)
    with BitVerdict(comm) as verdict:
        for label, a, b in pairs(t, m, mesh):
            compare(verdict, f"3x2 {label}", a @ b, t @ m)
            compare(verdict, f"linalg {label}", np.linalg.matmul(a, b), np.linalg.matmul(t, m))
        tt = t.transpose(0, 2, 1).copy()
        for label, a, b in pairs(m.T.copy(), tt, mesh):
            compare(verdict, f"2x3 {label}", np.matmul(a, b), m.T @ tt)
        for label, a, b in pairs(t, m[:, 0].copy(), mesh):
            compare(verdict, f"3x1 {label}", np.matmul(a, b), t @ m[:, 0])
        for label, a, b in pairs(t, u, mesh):
            compare(verdict, f"3x3 {label}", np.matmul(a, b), t @ u)


def test_cross(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """3- and 2-component vectors, axisa/axisb/axisc/axis, ints and hostile floats."""
    a3 = values((6, 3), np.float64, 7)
    b3 = values((6, 3), np.float64, 8)
    a3[0] = [INF, -0.0, NAN]
    b3[1] = [-INF, INF, 1.0]
    i3 = values((6, 3), np.int8, 9)
    i3[2] = [127, -128, 127]
    with BitVerdict(comm) as verdict, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for label, a, b in pairs(a3, b3, mesh):
            compare(verdict, f"3x3 {label}", np.cross(a, b), np.cross(a3, b3))
            compare(verdict, f"linalg {label}", np.linalg.cross(a, b), np.linalg.cross(a3, b3))
            compare(verdict, f"axisc {label}", np.cross(a, b, axisc=0), np.cross(a3, b3, axisc=0))
        for label, a, b in pairs(a3.T.copy(), i3, mesh):
            want = np.cross(a3.T, i3, axisa=0, axisb=1)
            compare(verdict, f"axisa {label}", np.cross(a, b, axisa=0, axisb=1), want)
        for label, a, b in pairs(i3, i3[::-1].copy(), mesh):
            compare(verdict, f"int8 {label}", np.cross(a, b), np.cross(i3, i3[::-1]))
        for label, a, b in pairs(a3[:, :2].copy(), b3, mesh):
            compare(verdict, f"2x3 {label}", np.cross(a, b), np.cross(a3[:, :2], b3))
            compare(verdict, f"3x2 {label}", np.cross(b, a), np.cross(b3, a3[:, :2]))
        for label, a, b in pairs(a3[:, :2].copy(), b3[:, 1:].copy(), mesh):
            compare(verdict, f"2x2 {label}", np.cross(a, b), np.cross(a3[:, :2], b3[:, 1:]))
        for label, a, b in pairs(a3.T.copy(), b3.T.copy(), mesh):
            compare(verdict, f"axis {label}", np.cross(a, b, axis=0), np.cross(a3.T, b3.T, axis=0))


def test_kron(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """2-D x 2-D, 1-D x 2-D (the shorter gets leading 1s) and hostile values."""
    a = values((5, 3), np.float64, 10)
    a[0, 0], a[1, 1] = INF, -0.0
    b = values((2, 3), np.float64, 11)
    b[1, 2] = NAN
    v = values((4,), np.int32, 12)
    with BitVerdict(comm) as verdict:
        for label, x, y in pairs(a, b, mesh):
            compare(verdict, f"2x2 {label}", np.kron(x, y), np.kron(a, b))
        for label, x, y in pairs(v, b, mesh):
            compare(verdict, f"1x2 {label}", np.kron(x, y), np.kron(v, b))
            compare(verdict, f"2x1 {label}", np.kron(y, x), np.kron(b, v))


def test_multi_dot(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Chains of 2, 3 and 4 (cost-ordered), with 1-D ends."""
    shapes = [(6, 2), (2, 5), (5, 3), (3, 4)]
    mats = [values(s, np.float64, 20 + i) for i, s in enumerate(shapes)]
    rep = [Replicate()] * mesh.ndim
    with BitVerdict(comm) as verdict:
        for label, first in layouts(mats[0], mesh):
            rest = [dmesh.distribute(m, mesh, [Shard(0)] + rep[1:]) for m in mats[1:]]
            for n in (2, 3, 4):
                got = np.linalg.multi_dot([first, *rest[: n - 1]])
                compare(verdict, f"{n} {label}", got, np.linalg.multi_dot(mats[:n]))
        v = values((2,), np.float64, 30)
        w = values((4,), np.float64, 31)
        darrays = [dmesh.distribute(x, mesh, [Shard(0)] + rep[1:]) for x in (v, *mats[1:], w)]
        mats_v = [v, *mats[1:], w]
        compare(verdict, "1-D ends", np.linalg.multi_dot(darrays), np.linalg.multi_dot(mats_v))
        compare(
            verdict, "1-D first", np.linalg.multi_dot(darrays[:3]), np.linalg.multi_dot(mats_v[:3])
        )
    assert_raises_all(comm, ValueError, np.linalg.multi_dot, [darrays[0]])


def test_matrix_power(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """n = 0..6 (repeated squaring), a stack, ints, and n = -1 on a replicated matrix."""
    m = values((4, 4), np.float64, 40) / 2
    s = values((3, 4, 4), np.int64, 41)
    with BitVerdict(comm) as verdict:
        for label, a in layouts(m, mesh):
            for n in range(7):
                got = np.linalg.matrix_power(a, n)
                compare(verdict, f"{n} {label}", got, np.linalg.matrix_power(m, n))
        for label, a in layouts(s, mesh):
            got = np.linalg.matrix_power(a, 5)
            compare(verdict, f"stack {label}", got, np.linalg.matrix_power(s, 5))
    a = dmesh.distribute(np.eye(3) * 2, mesh, [Replicate()] * mesh.ndim)
    inverse = np.linalg.matrix_power(a, -2).full_array()
    assert_raises_all(comm, TypeError, np.linalg.matrix_power, a, 1.5)
    assert_raises_all(comm, np.linalg.LinAlgError, np.linalg.matrix_power, a[:2], 2)
    with BitVerdict(comm) as verdict:
        verdict.equal(inverse, np.linalg.matrix_power(np.eye(3) * 2, -2))


def test_linalg_aliases(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.linalg.outer, tensordot, trace (offsets, stacks, dtype) and implicit einsum."""
    v = values((5,), np.float64, 50)
    w = values((3,), np.complex128, 51)
    t = values((3, 4, 5), np.int8, 52)
    m = values((5, 4), np.float64, 53)
    with BitVerdict(comm) as verdict:
        for label, a, b in pairs(v, w, mesh):
            compare(verdict, f"outer {label}", np.linalg.outer(a, b), np.linalg.outer(v, w))
        for label, a, b in pairs(t, m, mesh):
            got = np.linalg.tensordot(a, b, axes=([2], [0]))
            compare(verdict, f"tensordot {label}", got, np.linalg.tensordot(t, m, axes=([2], [0])))
            compare(
                verdict, f"einsum {label}", np.einsum("ijk,kl", a, b), np.einsum("ijk,kl", t, m)
            )
        for label, a in layouts(t, mesh):
            for offset in (0, 1, -2, 7):
                got = np.linalg.trace(a, offset=offset)
                compare(verdict, f"trace {offset} {label}", got, np.linalg.trace(t, offset=offset))
            got = np.linalg.trace(a, dtype=np.int8)
            compare(verdict, f"trace int8 {label}", got, np.linalg.trace(t, dtype=np.int8))
        for label, a in layouts(m, mesh):
            compare(
                verdict, f"einsum ii {label}", np.einsum("ij,ij", a, a), np.einsum("ij,ij", m, m)
            )
    a = dmesh.distribute(t, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, ValueError, np.linalg.outer, a, a, match="one-dimensional")
    assert_raises_all(comm, ValueError, np.linalg.cross, a, a, match="3-dimensional")


def test_errors_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Broadcast length-1 stack dims, bad vector lengths, keywords: raised on every rank."""
    shard = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    t = dmesh.distribute(values((4, 3, 3)), mesh, shard)
    one = dmesh.distribute(values((1, 3, 3)), mesh, [Replicate()] * mesh.ndim)
    with BitVerdict(comm) as verdict:  # a loop dim of length 1 is broadcast, as in NumPy
        t_np, one_np = values((4, 3, 3)), values((1, 3, 3))
        compare(verdict, "broadcast matmul", np.matmul(t, one), t_np @ one_np)
        compare(verdict, "broadcast matmul'", np.matmul(one, t), one_np @ t_np)
        compare(verdict, "broadcast vecdot", np.vecdot(t, one), np.vecdot(t_np, one_np))
        compare(verdict, "broadcast matvec", np.matvec(one, t[:, 0]), np.matvec(one_np, t_np[:, 0]))
    assert_raises_all(comm, UnsupportedError, np.vecdot, t, t, keepdims=True)
    assert_raises_all(comm, ValueError, np.cross, t, t[:, :, :1], match="dimension must be 2 or 3")
    assert_raises_all(comm, ValueError, np.matvec, t, t[0, 0, 0])
    bools = dmesh.distribute(np.ones((4, 3), bool), mesh, shard)
    assert_raises_all(comm, TypeError, np.cross, bools, bools, match="boolean subtract")


def test_norms(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """norm (ord 1, inf, -inf, fro, nuc; axis=), vector_norm (axes, keepdims), matrix_norm,
    svdvals: exact where the sums are (small integers), SVD-based ones to rounding."""
    m = values((6, 4), np.float64, 60)
    t = values((3, 4, 5), np.complex128, 61)
    hostile = m.copy()
    hostile[0, 0], hostile[2, 1] = INF, NAN
    with BitVerdict(comm) as verdict:
        for label, a in layouts(m, mesh):
            for ord in (None, 1, -1, INF, -INF, "fro"):
                got = np.linalg.norm(a, ord)
                compare(verdict, f"norm {ord} {label}", got, np.linalg.norm(m, ord))
                got = np.linalg.matrix_norm(a, ord=ord or "fro", keepdims=True)
                want = np.linalg.matrix_norm(m, ord=ord or "fro", keepdims=True)
                compare(verdict, f"matrix_norm {ord} {label}", got, want)
            for ord in (1, INF, -INF, 0, 2, 3):
                got = np.linalg.norm(a, ord, axis=1)
                compare(verdict, f"norm axis {ord} {label}", got, np.linalg.norm(m, ord, axis=1))
                got = np.linalg.vector_norm(a, ord=ord)
                compare(
                    verdict, f"vector_norm {ord} {label}", got, np.linalg.vector_norm(m, ord=ord)
                )
            for name in ("nuc", 2, -2):
                got = np.linalg.norm(a, name).full_array()
                verdict.equal(got, np.linalg.norm(m, name), rtol=1e-12)
            got = np.linalg.svdvals(a).full_array()
            verdict.equal(got, np.linalg.svdvals(m), rtol=1e-12, atol=1e-12)
        for label, a in layouts(hostile, mesh):
            for ord in (None, 1, INF, -INF):
                got = np.linalg.norm(a, ord)
                compare(verdict, f"hostile {ord} {label}", got, np.linalg.norm(hostile, ord))
        for label, a in layouts(t, mesh):
            for axis, keep in (((0, 2), True), ((2, 0), False), (None, True), (1, False)):
                got = np.linalg.vector_norm(a, axis=axis, keepdims=keep, ord=1)
                want = np.linalg.vector_norm(t, axis=axis, keepdims=keep, ord=1)
                verdict.equal(got.full_array(), want, rtol=1e-14)
            got = np.linalg.matrix_norm(a, ord=INF).full_array()  # sums of complex moduli
            verdict.equal(got, np.linalg.matrix_norm(t, ord=INF), rtol=1e-14)
            verdict.bits(f"stack inf {label}", got)
