"""``np.zeros_like``/``ones_like``/``full_like``/``copy`` of DArrays (issue 14, item 2):
the argument's layout, no communication, NumPy's values at 1-4 ranks."""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.collectives.errors import UnsupportedError
from helpers import Verdict, assert_all, assert_raises_all

X = np.arange(30.0).reshape(6, 5) - 7.5


def test_like_functions_keep_the_layout(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    with Verdict(comm) as verdict:
        for placements in ([Shard(0), *rest], [Shard(1), *rest], [Replicate(), *rest]):
            a = dmesh.distribute(X, mesh, placements)[1:]  # uneven, an empty block at 4+ ranks
            with debug.CommMode() as mode:
                made = {
                    "zeros": (np.zeros_like(a), np.zeros_like(X[1:])),
                    "ones int8": (np.ones_like(a, dtype=np.int8), np.ones_like(X[1:], np.int8)),
                    "full": (np.full_like(a, np.nan), np.full_like(X[1:], np.nan)),
                    "full int": (np.full_like(a, -3, dtype=int), np.full_like(X[1:], -3, int)),
                    "copy": (np.copy(a), np.copy(X[1:])),
                }
            verdict.check(mode.counts() == {}, f"communicated: {mode.counts()}")
            for name, (got, want) in made.items():
                verdict.check(got.spec.layout == a.spec.layout, f"{name}: layout {got.spec}")
                full = got.full_array()
                ok = full.dtype == want.dtype and np.array_equal(full, want, equal_nan=True)
                verdict.check(ok, f"{name} {placements}: {full!r}")
            other = np.zeros_like(a, shape=(3, 2))
            verdict.check(np.array_equal(other.full_array(), np.zeros((3, 2))), "shape=")


def test_partial_argument_gives_its_value(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """ones_like of a partial sum is ones, not the number of ranks."""
    for op in ("sum", "prod", "max", "min"):
        p = dmesh.distribute(X, mesh, [Partial(op)] + [Replicate()] * (mesh.ndim - 1))
        for got, want in (
            (np.ones_like(p), np.ones_like(X)),
            (np.full_like(p, 2.5), np.full_like(X, 2.5)),
        ):
            assert_all(comm, np.array_equal(got.full_array(), want), f"{op}: {got.full_array()}")
        copied = np.copy(p)
        assert_all(comm, np.array_equal(copied.full_array(), X), f"copy of {op}")


def test_unsupported_keywords_raise_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(X, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, UnsupportedError, np.zeros_like, a, order="F", match="order")
    assert_raises_all(comm, UnsupportedError, np.ones_like, a, subok=False, match="subok")
    assert_raises_all(comm, UnsupportedError, np.copy, a, order="F", match="order")


def test_empty_like_keeps_the_layout(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.empty_like: the argument's layout and dtype (or the given ones); values unspecified."""
    rest = [Replicate()] * (mesh.ndim - 1)
    with Verdict(comm) as verdict:
        for placements in ([Shard(0), *rest], [Shard(1), *rest], [Partial("sum"), *rest]):
            a = dmesh.distribute(X, mesh, placements)[1:]
            with debug.CommMode() as mode:
                got = np.empty_like(a)
                typed = np.empty_like(a, dtype=np.int16)
                other = np.empty_like(a, shape=(7, 3))
            verdict.check(mode.counts() == {}, f"communicated: {mode.counts()}")
            layout = a.spec.layout
            verdict.check(got.spec.layout.bounds == layout.bounds, f"layout {got.spec}")
            verdict.check(not any(p.is_partial() for p in got.placements), "partial result")
            verdict.check((got.shape, got.dtype) == ((5, 5), X.dtype), f"{got.spec}")
            verdict.check(typed.dtype == np.int16 and typed.local.dtype == np.int16, "dtype=")
            verdict.check(got.local.shape == a.local.shape, f"block {got.local.shape}")
            verdict.check(other.shape == (7, 3), f"shape= {other.shape}")
    assert_raises_all(comm, UnsupportedError, np.empty_like, a, order="F", match="order")


def test_astype_function(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.astype(x, dtype, copy=) (NumPy 2.1): block by block, NumPy's casts of hostile values."""
    hostile = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 2.5, -2.5, 1e300, -7.9, 3.0, 127.6])
    rest = [Replicate()] * (mesh.ndim - 1)
    with Verdict(comm) as verdict:
        for placements in ([Shard(0), *rest], [Replicate(), *rest], [Partial("max"), *rest]):
            a = dmesh.distribute(hostile, mesh, placements)[2:]  # uneven, empty blocks
            for dtype in (np.float32, np.complex64, bool, np.float64):
                with np.errstate(all="ignore"):
                    got, want = np.astype(a, dtype), np.astype(hostile[2:], dtype)
                full = got.full_array()
                verdict.check(full.dtype == want.dtype, f"{dtype}: {full.dtype}")
                verdict.check(full.tobytes() == want.tobytes(), f"{dtype} {placements}: {full!r}")
            same = np.astype(a, np.float64, copy=False)
            verdict.check(same is a, "copy=False of the same dtype is the argument")
            verdict.check(np.astype(a, np.float64) is not a, "copy=True copies")
        ints = dmesh.distribute(np.array([np.iinfo(np.int64).min, -1, 0, 2**40]), mesh)
        got = np.astype(ints, np.int32).full_array()
        want = np.astype(np.array([np.iinfo(np.int64).min, -1, 0, 2**40]), np.int32)
        verdict.check(np.array_equal(got, want), f"int64 to int32 wraps as NumPy: {got}")
    assert_raises_all(comm, UnsupportedError, np.astype, a, np.int8, device="gpu")


def _nep35_calls(a: dmesh.DArray) -> list[tuple[str, Any, Any]]:
    """(label, dmesh's result, NumPy's) of the creation functions called with like=a."""
    rows = np.array([[1.5, -0.0, np.nan], [np.inf, 2, 3]])
    calls: list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]] = [
        ("zeros", np.zeros, (5,), {}),
        ("zeros 2-D int", np.zeros, ((3, 4),), {"dtype": np.int32}),
        ("ones", np.ones, (7,), {"dtype": bool}),
        ("empty", np.empty, ((2, 3),), {}),
        ("full", np.full, ((4, 2), np.nan), {}),
        ("full int", np.full, (6, -3), {"dtype": np.int8}),
        ("full inferred", np.full, (3, np.uint16(9)), {}),
        ("arange", np.arange, (10,), {}),
        ("arange step", np.arange, (-3, 8, 3), {}),
        ("arange float", np.arange, (0.5, 2.0, 0.25), {}),
        ("arange negative", np.arange, (5, -4, -2), {"dtype": np.float32}),
        ("arange stop=", np.arange, (), {"stop": 4}),
        ("arange empty", np.arange, (3, 1), {}),
        ("eye", np.eye, (4,), {}),
        ("eye M k", np.eye, (3, 5, -1), {"dtype": int}),
        ("identity", np.identity, (3,), {"dtype": np.complex64}),
        ("tri", np.tri, (4, 3, 1), {}),
        ("fromfunction", np.fromfunction, (lambda i, j: i - 2 * j, (3, 4)), {"dtype": int}),
        ("array", np.array, (rows,), {}),
        ("array list", np.array, ([[1, 2], [3, 4], [5, 6]],), {"dtype": np.float32}),
        ("array ndmin", np.array, ([1, 2, 3],), {"ndmin": 2}),
        ("array scalar", np.array, (2.5,), {}),
        ("asarray", np.asarray, (rows,), {}),
        ("asanyarray", np.asanyarray, ([3, 1, 2],), {}),
        ("ascontiguousarray", np.ascontiguousarray, (rows.T,), {}),
    ]
    out = []
    for label, func, args, kwargs in calls:
        want = func(*args, **kwargs)
        out.append((label, func(*args, **kwargs, like=a), want))
    return out


def test_nep35_like(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.zeros(5, like=a) and friends: a DArray on a's mesh laid out as dmesh.zeros's, no
    communication, NumPy's values (np.empty's compared by shape and dtype only)."""
    for placements in ([Shard(0)], [Replicate()]):
        a = dmesh.distribute(X, mesh, placements + [Replicate()] * (mesh.ndim - 1))
        with Verdict(comm) as verdict:
            with debug.CommMode() as mode:
                results = _nep35_calls(a)
            verdict.check(mode.counts() == {}, f"communicated: {mode.counts()}")
            for label, got, want in results:
                if not isinstance(got, dmesh.DArray):
                    verdict.check(False, f"{label}: {type(got).__name__}")
                    continue
                default = [Shard(0) if want.ndim else Replicate()]
                default += [Replicate()] * (mesh.ndim - 1)
                verdict.check(got.mesh is mesh, f"{label}: another mesh")
                verdict.check(list(got.placements) == default, f"{label}: {got.placements}")
                full = got.full_array()
                verdict.check((full.shape, full.dtype) == (want.shape, want.dtype), f"{label}")
                if label != "empty":
                    ok = np.array_equal(full, want, equal_nan=True)
                    verdict.check(ok, f"{label}: {full!r} != {want!r}")


def test_nep35_with_a_darray_object(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.array(b, like=a)/np.asarray(b, like=a) of a DArray b: b's layout, copied or not."""
    a = dmesh.distribute(X, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    b = a[1:]
    copied = np.array(b, like=a)
    same = np.asarray(b, like=a)
    cast = np.asarray(b, dtype=np.float32, like=a)
    ok = copied is not b and copied.spec == b.spec and same is b and cast.dtype == np.float32
    assert_all(comm, ok, f"{copied.spec} {same is b} {cast.dtype}")
    assert_all(comm, np.array_equal(cast.full_array(), X[1:].astype(np.float32)))


def test_nep35_refusals_raise_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(X, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, UnsupportedError, np.zeros, 3, order="F", like=a, match="order")
    assert_raises_all(comm, UnsupportedError, np.ones, 3, device="gpu", like=a, match="device")
    assert_raises_all(comm, UnsupportedError, np.array, [a, a], like=a, match="gather")
    assert_raises_all(comm, UnsupportedError, np.full, 3, a, like=a, match="fill_value")
    assert_raises_all(comm, UnsupportedError, np.array, a, ndmin=3, like=a, match="ndmin")
    assert_raises_all(comm, ValueError, np.asarray, a, np.int8, copy=False, like=a)


def test_shape_keeps_the_sharding_of_aligned_trailing_dims(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """``np.zeros_like(u, shape=(steps, n))`` of a sharded ``u`` of ``n`` points keeps ``u``'s
    blocks on its last dim (trailing dims align, as in broadcasting), so that storing
    ``U[t] = u`` moves nothing; a shape with no dim to carry the sharding takes the
    creation default. No message either way."""
    rest = [Replicate()] * (mesh.ndim - 1)
    with Verdict(comm) as verdict:
        u = dmesh.distribute(np.arange(12.0), mesh, [Shard(0), *rest])[1:]  # uneven
        with debug.CommMode() as mode:
            made = [np.zeros_like(u, shape=(4, 11)), np.full_like(u, 2.5, shape=(2, 3, 11)),
                    np.empty_like(u, shape=(4, 11), dtype=np.int32)]  # fmt: skip
            other = np.ones_like(u, shape=(11, 4))
        verdict.check(mode.counts() == {}, f"communicated: {mode.counts()}")
        for got in made:
            last = got.ndim - 1
            verdict.check(got.placements[0] == Shard(last), f"{got.spec}")
            verdict.check(got.spec.layout.bounds[last] == u.spec.layout.bounds[0], f"{got.spec}")
        verdict.check(np.array_equal(made[1].full_array(), np.full((2, 3, 11), 2.5)), "full")
        verdict.check(np.array_equal(other.full_array(), np.ones((11, 4))), "ones, default")
        U = made[0]
        with debug.CommMode() as mode:
            U[0] = u
            U[1] = U[0] * 2
        verdict.check(mode.counts() == {}, f"U[t] = u communicated: {mode.counts()}")
        want = np.zeros((4, 11))
        want[0] = np.arange(1.0, 12.0)
        want[1] = want[0] * 2
        verdict.check(np.array_equal(U.full_array(), want), f"{U.full_array()}")
