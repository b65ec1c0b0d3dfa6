"""Reshapes, ``*_like`` and ``astype`` planned once (ops/kernels/views.py, rules/creation_like.py).

A reshape's plan and a ``*_like`` call's result spec are kept per (spec, shape,
dtype): every case is called at least twice (the second call takes the kept
plan) and interleaved with other shapes, dtypes and specs, so a stale plan
shows as a wrong value, shape, dtype or layout. NumPy's values bit for bit,
its errors on every rank, and a view of the block stays one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from helpers import Verdict, assert_raises_all, hostile_values


def _same(got: Any, want: np.ndarray) -> bool:
    """NumPy's bits, and a spec that describes the block (a stale one would not)."""
    full = got.full_array()
    spec_ok = (got.dtype, got.shape) == (want.dtype, want.shape)
    block_ok = got.local.dtype == got.dtype and got.local.shape == got.spec.local_shape()
    return bool(spec_ok and block_ok and full.dtype == want.dtype and full.shape == want.shape
                and full.tobytes() == want.tobytes())  # fmt: skip


def _rest(mesh: dmesh.DeviceMesh) -> list[Any]:
    return [Replicate()] * (mesh.ndim - 1)


# Targets in a row for one array of 1,000 elements: views and moves, -1 and ints.
TARGETS: list[Any] = [(25, 40), (40, 25), (-1,), 1000, (10, -1), (1000, 1), (2, 5, 100),
                      (8, 125), (-1, 8), (125, 8), (1, 1000), (25, 40)]  # fmt: skip


def test_repeated_reshapes_in_a_row(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """The same array through many shapes, twice over, and the method forms too."""
    with Verdict(comm) as verdict:
        for source in ((40, 25), (1000,)):
            x = hostile_values(source)
            for placements in ([Shard(0), *_rest(mesh)], [Replicate(), *_rest(mesh)]):
                a = dmesh.distribute(x, mesh, placements)
                for _ in range(2):
                    for shape in TARGETS:
                        got = np.reshape(a, shape)
                        verdict.check(_same(got, np.reshape(x, shape)), f"{source} -> {shape}")
                        verdict.check(got.spec.local_shape() == got.local.shape, f"{got.spec}")
                    for got, want in ((a.reshape(-1), x.reshape(-1)), (a.ravel(), x.ravel()),
                                      (np.ravel(a), np.ravel(x)),
                                      (a.reshape(8, 125), x.reshape(8, 125)),
                                      (a.reshape((125, 8)), x.reshape((125, 8)))):  # fmt: skip
                        verdict.check(_same(got, want), f"{source} method form {want.shape}")


def test_other_specs_same_shape(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """One target, arrays of other dtypes, bounds and placements in turn: each its own plan."""
    rest = _rest(mesh)
    x = hostile_values((12, 10))
    with Verdict(comm) as verdict:
        arrays = []
        for dtype in (np.float64, np.int8, np.complex64, np.bool_):
            xd = hostile_values((12, 10), dtype)
            arrays.append((dmesh.distribute(xd, mesh, [Shard(0), *rest]), xd))
        big = hostile_values((13, 10))
        arrays.append((dmesh.distribute(big, mesh, [Shard(0), *rest])[1:], big[1:]))  # uneven
        arrays.append((dmesh.distribute(big, mesh, [Shard(0), *rest])[:12], big[:12]))
        arrays.append((dmesh.distribute(x, mesh, [Shard(1), *rest]), x))
        arrays.append((dmesh.distribute(x, mesh, [Partial("sum"), *rest]), x))
        for _ in range(2):
            for a, xa in arrays:
                for shape in ((10, 12), (-1,), (4, 30), (120, 1)):
                    got = np.reshape(a, shape)
                    verdict.check(_same(got, np.reshape(xa, shape)), f"{a.spec} -> {shape}")


def test_empty_and_one_element(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Empty arrays (new empty blocks) and one element to 0-d, each twice."""
    rest = _rest(mesh)
    with Verdict(comm) as verdict:
        e = dmesh.distribute(np.zeros((4, 0)), mesh, [Shard(0), *rest])
        one = dmesh.distribute(np.array([-0.0]), mesh, [Shard(0), *rest])
        for _ in range(2):
            for shape in ((0, 4), (-1,), (2, 0, 2), 0, (0,)):
                got = np.reshape(e, shape)
                verdict.check(_same(got, np.reshape(np.zeros((4, 0)), shape)), f"empty {shape}")
            for shape in ((), (1, 1), -1):
                got = np.reshape(one, shape)
                verdict.check(_same(got, np.reshape(np.array([-0.0]), shape)), f"one {shape}")


def test_views_stay_views(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A reshape that is a view of the block writes through, on the first call and the next;
    one whose elements move is written back to a C-contiguous argument, as NumPy's view."""
    rest = _rest(mesh)
    with Verdict(comm) as verdict:
        for shape in ((25, 40), (8, 125), (-1,), (40, 25)):
            x = hostile_values((40, 25))
            a = dmesh.distribute(x, mesh, [Shard(0), *rest])
            for k in range(2):
                r = a.reshape(shape)
                # A view of the block, or (elements moved) a copy written back to a.
                shares = r.local.size == 0 or np.shares_memory(r.local, a.local)
                verdict.check(shares == (r._view is None), f"{shape}: {r._view} (call {k})")
                r[0] = 100.0 + k
                np.reshape(x, shape)[0] = 100.0 + k
                verdict.check(_same(a, x), f"{shape}: the write did not reach a (call {k})")
        x = hostile_values((40, 25))
        a = dmesh.distribute(x, mesh, [Shard(0), *rest])
        for k in range(2):
            flat = a.ravel()
            flat[3:7] = -5.0 - k
            x.ravel()[3:7] = -5.0 - k
            verdict.check(_same(a, x), f"ravel write (call {k})")
            col = a[:, :3].reshape(-1)  # NumPy: a copy of a strided selection
            col[...] = 0.0
            verdict.check(_same(a, x), f"copy of a strided selection wrote back (call {k})")


def test_reshape_errors_every_time(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """NumPy's errors on every rank, also after the same spec's good shapes were planned."""
    a = dmesh.distribute(hostile_values((40, 25)), mesh, [Shard(0), *_rest(mesh)])
    for _ in range(2):
        a.reshape(25, 40)
        a.reshape(2, 500)
        assert_raises_all(comm, ValueError, np.reshape, a, (-1, -1))
        assert_raises_all(comm, ValueError, np.reshape, a, (3, 333))
        assert_raises_all(comm, ValueError, np.reshape, a, 999)
        assert_raises_all(comm, ValueError, np.reshape, a, (-2, -500))
        assert_raises_all(comm, TypeError, np.reshape, a, (25.0, 40))  # equals (25, 40)
        assert_raises_all(comm, TypeError, np.reshape, a, (2.0, 500))
        assert_raises_all(comm, TypeError, np.reshape, a, None)
    with Verdict(comm) as verdict:  # NumPy integers are shapes, as NumPy takes them
        x = hostile_values((40, 25))
        got = np.reshape(a, (np.int64(25), np.int32(40)))
        verdict.check(_same(got, np.reshape(x, (25, 40))), "NumPy integer shape")
        got = np.reshape(a, [np.int64(-1)])
        verdict.check(_same(got, np.reshape(x, -1)), "list shape")


def test_squeeze_and_expand_dims_repeated(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = _rest(mesh)
    x = hostile_values((6, 1, 4))
    a = dmesh.distribute(x, mesh, [Shard(0), *rest])
    with Verdict(comm) as verdict:
        for _ in range(2):
            verdict.check(_same(np.squeeze(a), np.squeeze(x)), "squeeze")
            verdict.check(_same(np.squeeze(a, 1), np.squeeze(x, 1)), "squeeze 1")
            verdict.check(_same(np.expand_dims(a, 0), np.expand_dims(x, 0)), "expand 0")
            verdict.check(_same(np.expand_dims(a, -1), np.expand_dims(x, -1)), "expand -1")


def test_like_functions_in_a_row(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """The *_like calls with other dtypes, fills and shapes in turn, twice over, no messages."""
    rest = _rest(mesh)
    with Verdict(comm) as verdict:
        for placements in ([Shard(0), *rest], [Replicate(), *rest], [Partial("sum"), *rest]):
            for key in (slice(None), slice(1, None)):  # balanced, then uneven (empty at 4)
                x = hostile_values((13, 7))[key]
                a = dmesh.distribute(hostile_values((13, 7)), mesh, placements)[key]
                xi = hostile_values((13, 7), np.int64)[key]
                ai = dmesh.distribute(hostile_values((13, 7), np.int64), mesh, placements)[key]
                big = (2, *x.shape)
                calls: list[tuple[Any, Any, tuple[Any, ...], dict[str, Any]]] = [
                    (np.zeros_like, a, (), {}),
                    (np.zeros_like, a, (), {"dtype": np.float32}),
                    (np.ones_like, a, (), {}),
                    (np.ones_like, a, (), {"dtype": "i1"}),
                    (np.full_like, a, (np.nan,), {}),
                    (np.full_like, a, (-0.0,), {}),
                    (np.full_like, a, (np.inf,), {"dtype": np.float16}),
                    (np.full_like, a, (2.5,), {"dtype": int}),
                    (np.full_like, a, (np.int64(-7),), {}),
                    (np.full_like, ai, (np.iinfo(np.int64).max,), {}),
                    (np.zeros_like, ai, (), {}),
                    (np.full_like, a, (1 + 2j,), {"dtype": complex}),
                    (np.zeros_like, a, (), {"shape": (3, 2)}),
                    (np.full_like, a, (4.0,), {"shape": big}),
                    (np.ones_like, a, (), {"shape": x.shape}),
                    (np.full_like, a, (9,), {"shape": 5}),
                    (np.full_like, a, ([1.0] * x.shape[1],), {}),
                ]
                for k in range(2):
                    for n, (func, arg, args, kwargs) in enumerate(calls):
                        with debug.CommMode() as mode:
                            got = func(arg, *args, **kwargs)
                        want = func(x if arg is a else xi, *args, **kwargs)
                        verdict.check(mode.counts() == {}, f"{n} communicated: {mode.counts()}")
                        verdict.check(_same(got, want), f"{placements}[{key}] call {n} ({k})")
                        if got.shape == a.shape:
                            same = got.spec.layout.bounds == a.spec.layout.bounds
                            verdict.check(same, f"call {n}: layout {got.spec} of {a.spec}")
                        verdict.check(not any(p.is_partial() for p in got.placements), f"{n}")
                    for dtype in (None, np.int16, np.float32):
                        got = np.empty_like(a, dtype=dtype)
                        want = np.empty_like(x, dtype=dtype)
                        ok = got.dtype == want.dtype and got.shape == want.shape
                        verdict.check(ok and got.local.dtype == want.dtype, f"empty_like {dtype}")
                        verdict.check(got.spec.layout.bounds == a.spec.layout.bounds, "bounds")
                    got = np.empty_like(a, shape=(4, 3))
                    verdict.check(got.shape == (4, 3) and got.local.shape == got.spec.local_shape(),
                                  f"empty_like shape= {got.spec}")  # fmt: skip


def test_like_errors_every_time(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(hostile_values((6, 5)), mesh, [Shard(0), *_rest(mesh)])
    for _ in range(2):
        np.zeros_like(a, shape=(3, 2))
        assert_raises_all(comm, ValueError, np.zeros_like, a, shape=(-3, 2))
        assert_raises_all(comm, TypeError, np.zeros_like, a, dtype="no such dtype")


def test_astype_in_a_row(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.astype with other dtypes and copy= in turn, twice over; partial arguments too."""
    rest = _rest(mesh)
    x = hostile_values((13, 7))
    x[1, :3] = [1e300, -1e-300, 5e-324]  # overflow to inf in float32, subnormals
    finite = np.where(np.isfinite(x) & (np.abs(x) < 100), x, 3.5)
    with Verdict(comm) as verdict:
        for placements in ([Shard(0), *rest], [Shard(1), *rest], [Replicate(), *rest]):
            a = dmesh.distribute(x, mesh, placements)[1:]
            f = dmesh.distribute(finite, mesh, placements)[1:]
            for k in range(2):
                with np.errstate(over="ignore"):
                    want32 = np.astype(x[1:], np.float32)
                    got32 = np.astype(a, np.float32)
                verdict.check(_same(got32, want32), f"float32 ({k})")
                verdict.check(got32.spec.layout == a.spec.layout, f"layout {got32.spec}")
                verdict.check(np.astype(a, np.float64, copy=False) is a, "copy=False")
                same = np.astype(a, np.float64)
                verdict.check(same is not a and _same(same, x[1:]), "copy")
                verdict.check(_same(np.astype(f, np.int8), np.astype(finite[1:], np.int8)), "int8")
                verdict.check(_same(np.astype(f, "c8"), np.astype(finite[1:], "c8")), "c8")
                verdict.check(_same(np.astype(f, bool), np.astype(finite[1:], bool)), "bool")
        p = dmesh.distribute(finite / 4, mesh, [Partial("sum"), *rest])
        total = finite / 4
        for k in range(2):  # a partial cast to int reduces first: the cast of the sum
            got = np.astype(p, np.int64)
            verdict.check(_same(got, total.astype(np.int64)), f"partial to int ({k})")
            kept = np.astype(p, np.float64)
            verdict.check(kept.placements == p.placements and _same(kept, total), "partial kept")
