"""``ufunc.outer``, ``ufunc.at``, ``ufunc.reduceat``, the two-output ufuncs (``divmod``,
``frexp``, ``modf``) and ``np.real_if_close`` on DArrays (issue 14, item 1), against NumPy
at 1-4 ranks: balanced, uneven and empty blocks, several placements, hostile values."""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import UnsupportedError
from dmesh.ops.rules.two_outputs import two_outputs
from helpers import BitVerdict, assert_raises_all

H = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 2.5, -2.5, 7.0, -7.25, 1e300, 3.0, -1.0])
INT = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1, 7, -7, 3, 2, 9, -5])


def layouts(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[Any]]:
    rest = [Replicate()] * (mesh.ndim - 1)
    out: list[list[Any]] = [[Shard(d), *rest] for d in range(ndim)] + [[Replicate()] * mesh.ndim]
    if mesh.ndim == 2:
        out.append([Shard(0), Shard(ndim - 1)])
        out.append([Shard(0), Shard(0)])
    return out


def variants(mesh: dmesh.DeviceMesh, x: np.ndarray) -> list[tuple[str, dmesh.DArray, np.ndarray]]:
    """``x`` in each layout, and as an uneven slice (an empty block at 3-4 ranks)."""
    out = []
    for p in layouts(mesh, x.ndim):
        out.append((f"{p}", dmesh.distribute(x, mesh, p), x))
        whole = np.concatenate([x, x[:2]])
        out.append((f"{p} sliced", dmesh.distribute(whole, mesh, p)[2:], whole[2:]))
    return out


def same(verdict: BitVerdict, label: str, got: Any, want: np.ndarray) -> None:
    full = got.full_array() if isinstance(got, dmesh.DArray) else np.asarray(got)
    verdict.bits(label, full)
    ok = full.dtype == want.dtype and full.shape == want.shape
    ok = ok and np.array_equal(full, want, equal_nan=want.dtype.kind in "fc")
    if ok and want.dtype.kind == "f":  # zeros' signs too (a NaN's sign is not NumPy's promise)
        number = ~np.isnan(want)
        ok = bool(np.array_equal(np.signbit(full[number]), np.signbit(want[number])))
    verdict.check(ok, f"{label}: {full!r} != NumPy's {want!r}")


def test_two_output_ufuncs(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.stack([H, H[::-1]], axis=1)
    ints = np.stack([INT, INT[::-1]], axis=1)
    with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
        for label, a, xa in variants(mesh, x):
            for ufunc, args, want in [
                (np.modf, (a,), np.modf(xa)),
                (np.frexp, (a,), np.frexp(xa)),
                (np.divmod, (a, 2.5), np.divmod(xa, 2.5)),
                (np.divmod, (a, -0.0), np.divmod(xa, -0.0)),
            ]:
                got = two_outputs(ufunc, *args)
                for i in range(2):
                    same(verdict, f"{ufunc.__name__} {label} [{i}]", got[i], want[i])
        for label, a, xa in variants(mesh, ints):
            b = (
                dmesh.distribute(ints[:, ::-1] % 5 - 2, mesh, a.placements)
                if "sliced" not in label
                else -3
            )
            xb = ints[:, ::-1] % 5 - 2 if "sliced" not in label else -3
            got = two_outputs(np.divmod, a, b)
            want = np.divmod(xa, xb)
            for i in range(2):
                same(verdict, f"divmod int {label} [{i}]", got[i], want[i])


def test_two_outputs_out_and_partial(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        p = dmesh.distribute(H, mesh, [Partial("max"), *rest])
        frac, whole = two_outputs(np.modf, p)
        want = np.modf(H)
        same(verdict, "modf of a partial max", frac, want[0])
        same(verdict, "modf of a partial max (whole)", whole, want[1])
        a = dmesh.distribute(H, mesh, [Shard(0), *rest])
        o1 = dmesh.zeros(H.shape, mesh=mesh, placements=[Replicate()] * mesh.ndim)
        got = two_outputs(np.modf, a, out=(o1, None))
        verdict.check(got[0] is o1, "out= is the result")
        same(verdict, "modf out=", o1, want[0])
    a = dmesh.distribute(H, mesh, [Shard(0), *rest])
    assert_raises_all(comm, UnsupportedError, two_outputs, np.modf, a, where=True)
    assert_raises_all(comm, TypeError, two_outputs, np.modf, a, out=(a,))


def test_np_calls_dispatch(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.divmod, np.frexp and np.modf (out= tuples, positional outputs) reach two_outputs."""
    a = dmesh.distribute(H, mesh)
    with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
        q, r = np.divmod(a, 2.0)
        same(verdict, "np.divmod quotient", q, np.divmod(H, 2.0)[0])
        same(verdict, "np.divmod remainder", r, np.divmod(H, 2.0)[1])
        _, exponent = np.frexp(a)
        same(verdict, "np.frexp exponent", exponent, np.frexp(H)[1])
        o1, o2 = dmesh.zeros(H.shape, mesh=mesh), dmesh.zeros(H.shape, mesh=mesh)
        got = np.modf(a, o1, o2)
        verdict.check(got[0] is o1 and got[1] is o2, "np.modf(a, o1, o2) returns o1, o2")
        same(verdict, "np.modf out", o2, np.modf(H)[1])
        got = np.modf(a, out=(None, o1))
        same(verdict, "np.modf out=(None, o)", o1, np.modf(H)[1])


def test_outer(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    y = np.array([1.5, -0.0, np.inf, -2.0])
    with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
        for label, a, xa in variants(mesh, H[:9].reshape(3, 3)) + variants(mesh, H[:5]):
            replicated = dmesh.distribute(y, mesh, [Replicate()] * mesh.ndim)
            for other, xo in [(dmesh.distribute(y, mesh), y), (2.0, 2.0), (replicated, y)]:
                for ufunc in (np.add, np.multiply, np.subtract, np.greater, np.power, np.arctan2):
                    same(verdict, f"{ufunc.__name__}.outer {label}", ufunc.outer(a, other),
                         ufunc.outer(xa, xo))  # fmt: skip
                    same(verdict, f"{ufunc.__name__}.outer reversed {label}",
                         ufunc.outer(other, a), ufunc.outer(xo, xa))  # fmt: skip


def test_at(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.stack([H, -H], axis=1)
    rows = [0, 0, 11, -1, 5, 5, 5, 3]
    with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
        for label, a, xa in variants(mesh, x):
            n = xa.shape[0]
            cases: list[tuple[Any, Any, Any]] = [
                (np.add, [r % n for r in rows], 1.5),
                (np.multiply, ([r % n for r in rows], [1, 0, 1, 0, 1, 1, 0, 1]), -2.0),
                (np.maximum, [r % n for r in rows[:3]], np.array([[np.nan, 0.0]])),
                (np.subtract, np.array([n - 1, 0]), np.array([[1.0, np.inf], [-0.0, 2.0]])),
                (np.add, (np.array([[0, 1], [1, 0]]), 1), 3.0),
            ]
            for ufunc, index, values in cases:
                got, want = a.copy(), xa.copy()
                ufunc.at(got, index, values)
                ufunc.at(want, index, values)
                same(verdict, f"{ufunc.__name__}.at {label} {index}", got, want)
        for label, a, xa in variants(mesh, np.stack([INT, INT], axis=1)):
            got, want = a.copy(), xa.copy()
            index = [0, 1, 1, xa.shape[0] - 1]
            np.add.at(got, index, np.iinfo(np.int64).max)
            np.add.at(want, index, np.iinfo(np.int64).max)
            same(verdict, f"add.at int {label}", got, want)
            np.bitwise_xor.at(got, index, 5)
            np.bitwise_xor.at(want, index, 5)
            same(verdict, f"bitwise_xor.at {label}", got, want)


def test_reduceat(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.stack([H, -H, H[::-1]], axis=1)
    with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
        for label, a, xa in variants(mesh, x):
            n = xa.shape[0]
            for index in ([0, 4, 1, 5, n - 1], [0], [3, 3, 2], [n - 1, 0], list(range(n)), []):
                for ufunc in (np.add, np.maximum, np.fmin, np.multiply):
                    want = ufunc.reduceat(xa, index, axis=0)
                    got = ufunc.reduceat(a, index, axis=0)
                    full = got.full_array()
                    ok = full.shape == want.shape and full.dtype == want.dtype
                    ok = ok and np.allclose(full, want, rtol=1e-12, atol=0, equal_nan=True)
                    verdict.bits(f"{ufunc.__name__} {label} {index}", full)
                    verdict.check(ok, f"{ufunc.__name__}.reduceat {label} {index}: {full!r}")
            want = np.add.reduceat(xa, [0, 2, 1], axis=1)
            same(
                verdict, f"add.reduceat axis 1 {label}", np.add.reduceat(a, [0, 2, 1], axis=1), want
            )
        for label, a, xa in variants(mesh, np.stack([INT, INT[::-1]], axis=1)):
            for ufunc in (np.add, np.minimum, np.bitwise_or, np.logical_and):
                idx = [1, 6, 0, xa.shape[0] - 2]
                same(verdict, f"{ufunc.__name__}.reduceat int {label}",
                     ufunc.reduceat(a, idx), ufunc.reduceat(xa, idx))  # fmt: skip


def test_real_if_close(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    eps = np.finfo(np.float64).eps
    with np.errstate(over="ignore"):  # 1e300 is inf in complex64
        small = H.astype(np.complex64)
    with BitVerdict(comm) as verdict:
        for values, tol in [(H + 1j * eps, 100), (H + 1j * 1e-3, 100), (H + 1j * 1e-3, 1e-2),
                            (small, 1000), (H, 100)]:  # fmt: skip
            for label, a, xa in variants(mesh, values):
                got, want = np.real_if_close(a, tol=tol), np.real_if_close(xa, tol=tol)
                same(verdict, f"real_if_close {label} {values.dtype} {tol}", got, want)
        rest = [Replicate()] * (mesh.ndim - 1)
        p = dmesh.distribute(H + 1j * eps, mesh, [Partial("sum"), *rest])
        value = p.full_array().real  # its terms' sum: -0.0 + 0.0 is 0.0
        same(verdict, "real_if_close of a partial sum", np.real_if_close(p), value)


def test_refusals_raise_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    a = dmesh.distribute(H, mesh, [Shard(0), *rest])
    index = dmesh.distribute(np.array([0, 1]), mesh)
    assert_raises_all(comm, UnsupportedError, np.add.at, a, index, 1.0, match="DArray indices")
    assert_raises_all(comm, IndexError, np.add.at, a, [0, 12], 1.0, match="out of bounds")
    assert_raises_all(comm, UnsupportedError, np.add.at, a, slice(0, 2), 1.0, match="integers")
    p = dmesh.distribute(H, mesh, [Partial("sum"), *rest])
    assert_raises_all(comm, UnsupportedError, np.add.at, p, [0], 1.0, match="partial")
    assert_raises_all(comm, UnsupportedError, np.add.at, a, [0], a, match="replicated")
    assert_raises_all(comm, IndexError, np.add.reduceat, a, [0, 12], match="out of bounds")
    assert_raises_all(comm, UnsupportedError, np.add.reduceat, a, index, match="DArray")
    assert_raises_all(comm, UnsupportedError, np.subtract.reduceat, a, [0, 2])  # not associative
