"""Repeated ``argmax``/``argmin`` and ``concatenate``/``stack``/``vstack``/``hstack`` calls.

A call of specs seen before takes a kept plan (``ops/kernels/argextreme.py``,
``ops/kernels/joins.py``): every case here runs at least twice and is compared
with NumPy each time, on hostile values (NaN, ties across blocks, -0.0, +-inf,
integer extremes, booleans, complex numbers) and layouts with uneven and empty
blocks. The stale-plan tests change one thing at a time between calls of one
spec (axis, keepdims, max or min, the values, the other operand's spec), so a
plan kept under too coarse a key, or a block kept instead of a plan, fails.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI
from set_layouts import check, layouts

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.debug import CommMode
from helpers import BitVerdict, assert_all, assert_raises_all

BIG = np.iinfo(np.int64)
NAN = np.nan
VECTORS = {
    "ties": np.array([1.0, 3.0, -2.0, 3.0, 0.0, 3.0, -2.0, 1.0, -2.0, 3.0, 0.5]),
    "nan": np.array([1.0, 4.0, NAN, 9.0, -1.0, NAN, 9.0, -5.0, 2.0]),
    "late nan": np.array([-np.inf, -np.inf, 5.0, np.inf, np.inf, 0.0, NAN]),
    "zeros": np.array([0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0]),
    "extremes": np.array([BIG.min, 5, BIG.max, BIG.min, 0, BIG.max, 7], dtype=np.int64),
    "all min": np.full(9, BIG.min, dtype=np.int64),
    "uint8": np.array([3, 255, 0, 255, 1, 0, 9], dtype=np.uint8),
    "bool": np.array([False, False, True, False, True, True, False]),
    "float32": np.array([2.5, -1.0, 7.0, 7.0, -3.0, NAN, 1.0, -3.0], dtype=np.float32),
    "complex": np.array([1 + 1j, 1 + 2j, 2 - 5j, complex(NAN, 0), 2 - 5j, 1 + 2j, 0j]),
}
_R = np.random.default_rng(31)
MATRIX = np.round(_R.standard_normal((7, 5)), 1)
MATRIX[2, 3] = MATRIX[5, 3] = NAN  # two NaNs in one column, in different row blocks
MATRIX[:, 1] = 4.0  # a column of ties: the first row wins
MATRIX[4, 0] = MATRIX[1, 0] = 9.0
MATRICES = {
    "float": MATRIX,
    "int": np.where(np.isnan(MATRIX), 0, MATRIX * 10).astype(np.int32),
    "complex": MATRIX + 1j * MATRIX[::-1],
}
FUNCS = [("argmax", np.argmax), ("argmin", np.argmin)]


def _arg_cases(x: np.ndarray) -> list[tuple[Any, bool]]:
    axes: list[Any] = [None, *range(x.ndim), -1]
    return [(axis, keepdims) for axis in axes for keepdims in (False, True)]


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_argextreme_vectors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, name: str) -> None:
    x = VECTORS[name]
    with BitVerdict(comm) as verdict:
        for label, d in layouts(mesh, x):
            for (fname, func), (axis, keepdims) in zip(FUNCS * 4, _arg_cases(x) * 2):
                want = func(x, axis=axis, keepdims=keepdims)
                for call in range(2):  # the second takes the kept plan
                    got = func(d, axis=axis, keepdims=keepdims)
                    check(verdict, f"{name} {label} {fname} {axis} {keepdims} #{call}", got, want)
            for call in range(2):  # the methods, and the plain calls
                check(verdict, f"{name} {label} a.argmax() #{call}", d.argmax(), x.argmax())
                check(verdict, f"{name} {label} argmin(a) #{call}", np.argmin(d), np.argmin(x))


@pytest.mark.parametrize("name", sorted(MATRICES))
def test_argextreme_matrices(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, name: str) -> None:
    x = MATRICES[name]
    with BitVerdict(comm) as verdict:
        for label, d in layouts(mesh, x):
            for fname, func in FUNCS:
                for axis, keepdims in _arg_cases(x):
                    want = func(x, axis=axis, keepdims=keepdims)
                    for call in range(2):
                        got = func(d, axis=axis, keepdims=keepdims)
                        check(verdict, f"{name} {label} {fname} {axis} {keepdims} #{call}",
                              got, want)  # fmt: skip


def test_complex_max_min(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``np.max``/``np.min`` of complex data share the kernel (values, not indices)."""
    x = MATRICES["complex"]
    with BitVerdict(comm) as verdict:
        for label, d in layouts(mesh, x):
            for func in (np.max, np.min):
                for axis in (None, 0, 1):
                    for call in range(2):
                        check(verdict, f"{func.__name__} {label} {axis} #{call}",
                              func(d, axis=axis), func(x, axis=axis))  # fmt: skip


def test_argextreme_stale_plans(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """One spec, one thing changed per call: axis, keepdims, max or min, the values."""
    x = MATRIX.copy()
    d = dmesh.distribute(x, mesh, [Shard(0)] * mesh.ndim)
    calls: list[tuple[Any, Any, bool]] = [
        (np.argmax, 0, False), (np.argmax, 1, False), (np.argmax, 0, False),
        (np.argmax, 0, True), (np.argmin, 0, True), (np.argmin, None, False),
        (np.argmax, None, False), (np.argmax, -2, False), (np.argmax, None, True),
    ]  # fmt: skip
    with BitVerdict(comm) as verdict:
        for step in range(2):
            for func, axis, keepdims in calls:
                check(verdict, f"{func.__name__} {axis} {keepdims} step {step}",
                      func(d, axis=axis, keepdims=keepdims),
                      func(x, axis=axis, keepdims=keepdims))  # fmt: skip
            # New values in the same blocks (the spec unchanged): the plan holds no values.
            x = -x
            d[...] = x
        # Other specs of the same shape in a row: replicated, uneven, then sharded again.
        for label, other in layouts(mesh, x):
            check(verdict, f"argmin {label}", np.argmin(other, axis=0), np.argmin(x, axis=0))
            check(verdict, "argmin S(0) again", np.argmin(d, axis=0), np.argmin(x, axis=0))


def test_argextreme_partial(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Partial terms are reduced first, on every call."""
    rest = [Replicate()] * (mesh.ndim - 1)
    x = VECTORS["extremes"] % 1000
    with BitVerdict(comm) as verdict:
        for op in ("sum", "max"):
            d = dmesh.distribute(x, mesh, [Partial(op), *rest])
            for call in range(2):
                check(verdict, f"P({op}) argmax #{call}", np.argmax(d), np.argmax(x))
                check(verdict, f"P({op}) argmin 0 #{call}", np.argmin(d, axis=0), np.argmin(x, 0))


def test_argextreme_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """NumPy's errors on every rank, on the second call too (errors are never kept)."""
    empty = dmesh.distribute(np.zeros((0, 3)), mesh, [Shard(0)] * mesh.ndim)
    d = dmesh.distribute(MATRIX, mesh, [Shard(0)] * mesh.ndim)
    for _ in range(2):
        assert_raises_all(comm, ValueError, np.argmax, empty)
        assert_raises_all(comm, ValueError, np.argmin, empty, axis=0)
        assert_raises_all(comm, np.exceptions.AxisError, np.argmax, d, axis=2)
        assert_raises_all(comm, np.exceptions.AxisError, np.argmin, d, axis=-3)
        got = np.argmax(empty, axis=1)  # a non-empty axis of an empty array: an empty result
        assert_all(comm, np.asarray(got.full_array()).shape == (0,), "argmax(axis=1) of (0, 3)")


def test_argextreme_traffic_kept(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """The kept plan sends what the first call sent (two small all-gathers per mesh dim
    that shards the reduced axis), under a watching debug tool too."""
    d = dmesh.distribute(MATRIX, mesh, [Shard(0)] * mesh.ndim)
    for axis in (0, 1, None):
        seen = []
        for _ in range(2):
            with CommMode() as mode:
                np.argmin(d, axis=axis)
            seen.append([(r.collective, r.sent_bytes, r.received_bytes) for r in mode.records])
        sharded = axis != 1 and mesh.size() > 1
        assert_all(comm, seen[0] == seen[1], f"axis {axis}: {seen}")
        assert_all(comm, all(c == "all_gather" for c, _, _ in seen[0]), f"{seen[0]}")
        assert_all(comm, (len(seen[0]) > 0) == sharded, f"axis {axis}: {seen[0]}")


JOIN_A = np.arange(35, dtype=np.float64).reshape(7, 5) - 17.0
JOIN_A[3, 2] = NAN
JOIN_A[0, 0] = -0.0
JOIN_B = (np.arange(35).reshape(7, 5) * 3 % 11).astype(np.int32)


def _join_calls(x: np.ndarray) -> list[tuple[str, Any, dict[str, Any]]]:
    calls: list[tuple[str, Any, dict[str, Any]]] = [
        ("concatenate", np.concatenate, {}),
        ("stack", np.stack, {}),
        ("stack -1", np.stack, {"axis": -1}),
        ("vstack", np.vstack, {}),
        ("hstack", np.hstack, {}),
    ]
    if x.ndim > 1:
        calls += [
            ("concatenate 1", np.concatenate, {"axis": 1}),
            ("concatenate -1", np.concatenate, {"axis": -1}),
            ("stack 1", np.stack, {"axis": 1}),
        ]
    return calls


@pytest.mark.parametrize("shape", ["1-D", "2-D"])
def test_joins(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: str) -> None:
    """Each join of two operands (the same layout, or another) twice, against NumPy."""
    a, b = (JOIN_A[:, 1], JOIN_B[:, 1]) if shape == "1-D" else (JOIN_A, JOIN_B)
    with BitVerdict(comm) as verdict:
        pairs = list(zip(layouts(mesh, a), layouts(mesh, b)))
        pairs += list(zip(layouts(mesh, a), list(layouts(mesh, a))[::-1]))
        for (la, da), (lb, db) in pairs:
            for name, func, kwargs in _join_calls(a):
                want = func([a, b if db.dtype == b.dtype else a], **kwargs)
                for call in range(2):
                    got = func([da, db], **kwargs)
                    check(verdict, f"{name} {la} + {lb} #{call}", got, want)
                    got = func((da, da, db), **kwargs)  # a tuple, three operands
                    want3 = func((a, a, b if db.dtype == b.dtype else a), **kwargs)
                    check(verdict, f"{name} ({la}, {la}, {lb}) #{call}", got, want3)


def test_join_stale_plans(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """One join kept, then new values, another axis, another spec, other keywords."""
    a, b = JOIN_A.copy(), JOIN_B.astype(np.float64)
    shard = [Shard(0)] * mesh.ndim
    da, db = dmesh.distribute(a, mesh, shard), dmesh.distribute(b, mesh, shard)
    rb = dmesh.distribute(b, mesh, [Replicate()] * mesh.ndim)
    with BitVerdict(comm) as verdict:
        for step in range(2):
            for func, axis in [(np.concatenate, 0), (np.concatenate, 1), (np.stack, 0),
                               (np.stack, 2), (np.concatenate, 0), (np.stack, 1)]:  # fmt: skip
                name = f"{func.__name__} {axis} step {step}"
                check(verdict, name, func([da, db], axis=axis), func([a, b], axis=axis))
                check(verdict, f"{name} (R)", func([da, rb], axis=axis), func([a, b], axis=axis))
                check(verdict, f"{name} (b, a)", func([db, da], axis), func([b, a], axis))
            a = a * 2 - 1  # new values, written into the same blocks
            da[...] = a
        check(verdict, "vstack", np.vstack([da, db]), np.vstack([a, b]))
        check(verdict, "hstack", np.hstack([da, db]), np.hstack([a, b]))
        check(verdict, "concatenate dtype", np.concatenate([da, db], dtype=np.float32),
              np.concatenate([a, b], dtype=np.float32))  # fmt: skip
        check(verdict, "concatenate None", np.concatenate([da, db], axis=None),
              np.concatenate([a, b], axis=None))  # fmt: skip
        check(verdict, "concatenate NumPy operand", np.concatenate([da, b]),
              np.concatenate([a, b]))  # fmt: skip
        check(verdict, "concatenate again", np.concatenate([da, db]), np.concatenate([a, b]))
        check(verdict, "vstack rows", np.vstack([da[0], db[1]]), np.vstack([a[0], b[1]]))
        check(verdict, "vstack rows again", np.vstack([da[0], db[1]]), np.vstack([a[0], b[1]]))


def test_join_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """NumPy's errors on every rank, after the same specs were joined."""
    shard = [Shard(0)] * mesh.ndim
    da = dmesh.distribute(JOIN_A, mesh, shard)
    short = dmesh.distribute(JOIN_A[:, :3], mesh, shard)
    for _ in range(2):
        np.concatenate([da, da])
        np.stack([da, da])
        assert_raises_all(comm, ValueError, np.concatenate, [da, short], axis=0)
        assert_raises_all(comm, ValueError, np.stack, [da, short])
        assert_raises_all(comm, np.exceptions.AxisError, np.concatenate, [da, da], axis=2)
        assert_raises_all(comm, np.exceptions.AxisError, np.stack, [da, da], axis=3)
        # casting= refuses what promotion changes, with or without dtype=, as NumPy.
        ints = dmesh.distribute(JOIN_B, mesh, shard)
        np.concatenate([ints, da])  # (kept: the same specs, the default casting)
        for casting in ("no", "equiv"):
            assert_raises_all(comm, TypeError, np.concatenate, [ints, da], casting=casting)
            assert_raises_all(comm, TypeError, np.vstack, [ints, da], casting=casting)
            assert_raises_all(comm, TypeError, np.hstack, [ints, da], casting=casting)
        with BitVerdict(comm) as verdict:
            for casting in ("safe", "same_kind", "unsafe"):
                want = np.concatenate([JOIN_B, JOIN_A], casting=casting)
                check(verdict, casting, np.concatenate([ints, da], casting=casting), want)


def test_sharded_join_one_exchange(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Operands sharded along the joining axis: their pieces travel together, one
    all-to-all at most (none at one rank), on the first call and the kept one alike."""
    rest = [Replicate()] * (mesh.ndim - 1)
    a = dmesh.distribute(JOIN_A, mesh, [Shard(0), *rest])
    b = dmesh.distribute(JOIN_B, mesh, [Shard(0), *rest])
    rolled = dmesh.distribute(np.concatenate([JOIN_A, JOIN_A]), mesh, [Shard(0), *rest])[3:10]
    with BitVerdict(comm) as verdict:
        for label, operands in [("a, b", [a, b]), ("b, a, a", [b, a, a]), ("uneven", [rolled, a])]:
            want = np.concatenate([np.asarray(x.full_array()) for x in operands])
            counts = []
            for call in range(2):
                with CommMode() as mode:
                    got = np.concatenate(operands)
                counts.append(mode.counts())
                check(verdict, f"{label} #{call}", got, want)
            verdict.check(counts[0] == counts[1], f"{label}: {counts}")
            verdict.check(sum(counts[0].values()) <= (mesh.size() > 1), f"{label}: {counts}")
