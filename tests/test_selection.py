"""Selection functions on DArrays agree with NumPy: np.argwhere, np.flatnonzero, np.choose,
np.select, np.piecewise, np.compress, np.extract, np.take_along_axis, np.unravel_index,
np.ravel_multi_index, np.take, and reading through boolean DArrays (``a[m]``, ``a[:, m]``).

Each case runs on every layout of ``selection_layouts`` (uneven and empty blocks
included) and is compared, gathered, with NumPy on one process; the bits must be the
same on every rank (one agreement per test).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI
from selection_layouts import full, same, variants

import dmesh
from dmesh import Replicate, Shard
from helpers import BitVerdict, assert_raises_all

X = np.array([[0.0, -0.0, np.nan, 3.0], [np.inf, -np.inf, 0.5, 0.0], [2.0, 0.0, -1.0, np.nan]])
X = np.concatenate([X, X[::-1] * 2])  # 6 x 4: uneven on 4 ranks, hostile values
INTS = np.array([[0, np.iinfo(np.int64).max, -1], [np.iinfo(np.int64).min, 0, 7]])


def check(verdict: BitVerdict, label: str, got: Any, want: Any) -> None:
    value = full(got)
    verdict.check(same(value, want), f"{label}: {value!r} != NumPy's {want!r}")
    for i, v in enumerate(value if isinstance(value, tuple) else (value,)):
        verdict.bits(f"{label}[{i}]", np.asarray(v))


def replicated(mesh: dmesh.DeviceMesh, x: Any) -> dmesh.DArray:
    return dmesh.distribute(np.asarray(x), mesh, [Replicate()] * mesh.ndim)


def sharded(mesh: dmesh.DeviceMesh, x: Any) -> dmesh.DArray:
    return dmesh.distribute(np.asarray(x), mesh, [Shard(0)] * mesh.ndim)


def test_argwhere_flatnonzero_nonzero(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as v:
        for x in (X, INTS, np.zeros((2, 0)), np.arange(5) % 2, np.zeros(3)):
            for label, make in variants(mesh, x):
                d = make()
                check(v, f"argwhere {label}", np.argwhere(d), np.argwhere(x))
                check(v, f"flatnonzero {label}", np.flatnonzero(d), np.flatnonzero(x))
                check(v, f"nonzero {label}", np.nonzero(d), np.nonzero(x))
                got = np.argwhere(d)
                kept = any(p.is_shard() for p in got.placements)
                v.check(kept or not any(p.is_shard() for p in d.placements), f"{label}: gathered")
        for x in (np.array(2.0), np.array(0)):
            d = replicated(mesh, x)
            check(v, "argwhere 0-d", np.argwhere(d), np.argwhere(x))
            check(v, "flatnonzero 0-d", np.flatnonzero(d), np.flatnonzero(x))
    assert_raises_all(comm, ValueError, np.nonzero, replicated(mesh, np.array(1)))


def test_boolean_darray_on_some_dims(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rows, cols = np.array([True, False, True, True, False, True]), np.array([0, 1, 1, 0]) > 0
    with BitVerdict(comm) as v:
        for label, make in variants(mesh, X):
            d = make()
            for mlabel, m in (("rows", rows), ("cols", cols)):
                for where in (replicated, sharded):
                    mask = where(mesh, m)
                    key = mask if mlabel == "rows" else (slice(None), mask)
                    want = X[m] if mlabel == "rows" else X[:, m]
                    check(v, f"{label} {mlabel}", d[key], want)
            check(v, f"{label} full mask", d[d > 0], X[X > 0])
            empty = sharded(mesh, np.zeros(6, bool))
            check(v, f"{label} no True", d[empty, 1:], X[np.zeros(6, bool), 1:])
    d = sharded(mesh, X)
    assert_raises_all(comm, IndexError, d.__getitem__, sharded(mesh, cols), match="did not match")
    assert_raises_all(comm, IndexError, d.__getitem__, d, match="valid indices")  # float


def test_choose_select_piecewise(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    index = np.array([[0, 2, 1, 0], [1, 1, 2, 0], [2, 0, 0, 1], [0, 0, 0, 0], [1, 2, 1, 2],
                      [2, 2, 2, 2]])  # fmt: skip
    third = np.arange(4, dtype=np.int8)
    with BitVerdict(comm) as v:
        for label, make in variants(mesh, X):
            d = make()
            idx = dmesh.distribute(index, mesh, d.placements) if "uneven" not in label else (
                replicated(mesh, index))  # fmt: skip
            want = np.choose(index, [X, -X, third])
            check(v, f"choose {label}", np.choose(idx, [d, -d, third]), want)
            check(v, f"choose array {label}", np.choose(index, [d, -d, third]), want)
            for mode in ("wrap", "clip"):
                check(v, f"choose {mode} {label}", np.choose(idx * 3 - 2, [d, 7, third], mode=mode),
                      np.choose(index * 3 - 2, [X, 7, third], mode=mode))  # fmt: skip
            conds, wconds = [d > 1, np.isnan(d)], [X > 1, np.isnan(X)]
            check(v, f"select {label}", np.select(conds, [d, 2], default=-0.0),
                  np.select(wconds, [X, 2], default=-0.0))  # fmt: skip
            ints = [np.arange(4, dtype=np.int8), 3]
            check(v, f"select int8 {label}", np.select(conds, ints), np.select(wconds, ints))
            funcs = [lambda t: t * 2, -1.5, lambda t: t - 1]
            got = np.piecewise(d, [d < 0, np.isinf(d)], funcs)
            check(v, f"piecewise {label}", got, np.piecewise(X, [X < 0, np.isinf(X)], funcs))
            got = np.piecewise(d, [d > 0], [np.negative])
            check(v, f"piecewise one {label}", got, np.piecewise(X, [X > 0], [np.negative]))
        for label, make in variants(mesh, X[:, 2]):
            d = make()
            check(v, f"piecewise 1-D {label}", np.piecewise(d, d > 0, [-1, np.abs]),
                  np.piecewise(X[:, 2], X[:, 2] > 0, [-1, np.abs]))  # fmt: skip
    d = sharded(mesh, X)
    big = sharded(mesh, index + 1)
    assert_raises_all(comm, ValueError, np.choose, big, [d, d, d], match="invalid entry")
    assert_raises_all(comm, TypeError, np.choose, d, [d, d], match="safe")
    assert_raises_all(comm, ValueError, np.select, [d > 0], [d, d], match="same length")
    assert_raises_all(comm, TypeError, np.select, [d], [d], match="boolean")
    assert_raises_all(comm, ValueError, np.piecewise, d, [d > 0], [1, 2, 3])


def test_compress_extract(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    c0, c1 = np.array([1, 0, 1, 1, 0, 1]), np.array([False, True, True])
    with BitVerdict(comm) as v:
        for label, make in variants(mesh, X):
            d = make()
            for where in (replicated, sharded):
                check(v, f"axis 0 {label}", np.compress(where(mesh, c0), d, axis=0),
                      np.compress(c0, X, axis=0))  # fmt: skip
                check(v, f"axis -1 {label}", np.compress(where(mesh, c1), d, axis=-1),
                      np.compress(c1, X, axis=-1))  # fmt: skip
                flat = np.arange(26) % 4 == 2  # longer than X.size, False past it
                check(v, f"flat {label}", np.compress(where(mesh, flat), d),
                      np.compress(flat, X))  # fmt: skip
            check(v, f"compress ndarray {label}", np.compress(c1, d, axis=1),
                  np.compress(c1, X, axis=1))  # fmt: skip
            check(v, f"extract {label}", np.extract(np.isnan(d) | (d < 0), d),
                  np.extract(np.isnan(X) | (X < 0), X))  # fmt: skip
            check(v, f"extract int {label}", np.extract(sharded(mesh, c0), d),
                  np.extract(c0, X))  # fmt: skip
            check(v, f"extract values {label}", np.extract(d, d), np.extract(X, X))
    d = sharded(mesh, X)
    long = sharded(mesh, np.array([0, 0, 0, 0, 1]))
    assert_raises_all(comm, IndexError, np.compress, long, d, axis=1, match="out of bounds")
    assert_raises_all(comm, ValueError, np.compress, d > 0, d, match="1-d")


def test_along_axis_and_take(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    idx1 = np.array([[3, -1, 0], [2, 2, 1], [0, 0, 0], [1, 3, 2], [-4, 0, 1], [3, 3, 3]])
    idx0 = np.array([[5, 0, -6, 2]])
    flat = np.array([23, 0, -24, 7, 7])
    with BitVerdict(comm) as v:
        for label, make in variants(mesh, X):
            d = make()
            for where in (replicated, sharded, lambda _m, x: x):
                check(v, f"axis 1 {label}", np.take_along_axis(d, where(mesh, idx1), axis=1),
                      np.take_along_axis(X, idx1, axis=1))  # fmt: skip
                check(v, f"axis 0 {label}", np.take_along_axis(d, where(mesh, idx0), axis=0),
                      np.take_along_axis(X, idx0, axis=0))  # fmt: skip
                check(v, f"flat {label}", np.take_along_axis(d, where(mesh, flat), axis=None),
                      np.take_along_axis(X, flat, axis=None))  # fmt: skip
            check(v, f"take None {label}", np.take(d, [-1, 0, 13, -24]),
                  np.take(X, [-1, 0, 13, -24]))  # fmt: skip
            check(v, f"take -1 {label}", np.take(d, [[-1], [2]], axis=-1),
                  np.take(X, [[-1], [2]], axis=-1))  # fmt: skip
            check(v, f"take wrap {label}", np.take(d, [30, -31], mode="wrap"),
                  np.take(X, [30, -31], mode="wrap"))  # fmt: skip
    d = sharded(mesh, X)
    assert_raises_all(comm, IndexError, np.take_along_axis, d, sharded(mesh, idx1 * 1.0), axis=1)
    assert_raises_all(comm, ValueError, np.take_along_axis, d, sharded(mesh, flat), axis=1)
    assert_raises_all(comm, IndexError, np.take_along_axis, d, sharded(mesh, idx1 + 4), axis=1,
                      match="out of bounds")  # fmt: skip


def test_unravel_and_ravel_multi_index(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    flat = np.array([0, 23, 5, 17, 11, 0, 6])
    rows, cols = np.array([0, 5, 3, 1, 2]), np.array([3, 0, 2, 2, 1])
    with BitVerdict(comm) as v:
        for label, make in variants(mesh, flat):
            d = make()
            for order in ("C", "F"):
                check(v, f"unravel {order} {label}", np.unravel_index(d, (6, 4), order=order),
                      np.unravel_index(flat, (6, 4), order=order))  # fmt: skip
            check(v, f"unravel int {label}", np.unravel_index(d, 24), np.unravel_index(flat, 24))
        for label, make in variants(mesh, rows):
            r = make()
            for order in ("C", "F"):
                got = np.ravel_multi_index((r, cols), (6, 4), order=order)
                want = np.ravel_multi_index((rows, cols), (6, 4), order=order)
                check(v, f"ravel {order} {label}", got, want)
            wild = (r * 3 - 5, cols + 2)
            for mode in ("wrap", "clip", ("clip", "wrap")):
                want = np.ravel_multi_index((rows * 3 - 5, cols + 2), (6, 4), mode=mode)
                check(
                    v, f"ravel {mode} {label}", np.ravel_multi_index(wild, (6, 4), mode=mode), want
                )
    d = sharded(mesh, flat)
    assert_raises_all(comm, ValueError, np.unravel_index, d, (4, 4), match="out of bounds")
    assert_raises_all(comm, ValueError, np.unravel_index, d - 1, (6, 4), match="-1")
    assert_raises_all(comm, TypeError, np.unravel_index, d * 1.0, (6, 4), match="int")
    r = sharded(mesh, rows)
    assert_raises_all(comm, ValueError, np.ravel_multi_index, (r, cols), (5, 4), match="invalid")
    assert_raises_all(comm, ValueError, np.ravel_multi_index, (r,), (6, 4), match="length 2")
    assert_raises_all(comm, TypeError, np.ravel_multi_index, (r * 1.0, cols), (6, 4))


def test_repeated_mask_selections(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """a[mask] over and over with masks of other counts per rank (all, none, one end, a
    shrinking set as Mandelbrot's): each call its own boundaries (the second and later calls
    take the cached checks and count exchange), NumPy's values and shape, leading masks of
    2-D arrays too, uneven and empty blocks at 3 and 4 ranks."""
    rng = np.random.default_rng(5)
    data = rng.standard_normal((7, 3))
    data[2, 1] = np.nan
    masks = [data[:, 0] > 0, np.ones(7, bool), np.zeros(7, bool), np.arange(7) >= 5,
             np.arange(7) < 1, data[:, 0] > 0]  # fmt: skip
    for placements in ([Shard(0)] * mesh.ndim, [Shard(0)] + [Replicate()] * (mesh.ndim - 1)):
        a = dmesh.distribute(data, mesh, placements)
        flat = dmesh.distribute(data[:, 1], mesh, placements)
        for m in masks * 2:
            dm = dmesh.distribute(m, mesh, placements)
            rows, values = a[dm], flat[dm]
            whole = dmesh.distribute(data > 0, mesh, placements)
            with BitVerdict(comm) as verdict:
                verdict.equal(rows.full_array(), data[m])
                verdict.equal(values.full_array(), data[:, 1][m])
                verdict.equal(a[whole].full_array(), data[data > 0])
                verdict.check(rows.shape == data[m].shape, f"shape {rows.shape}")
