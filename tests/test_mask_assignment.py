"""In-place writes into DArrays agree with NumPy: ``a[mask] = v`` (scalar, values of length
``mask.sum()``, a DArray of values), ``a[:, m] = v``, np.put, np.place, np.putmask,
np.copyto and np.put_along_axis, on every layout of ``selection_layouts`` (uneven and
empty blocks included) and on Partial targets (reduced in place first)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI
from selection_layouts import full, same, variants

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import BitVerdict, assert_raises_all

X = np.array([[0.0, -0.0, np.nan, 3.0], [np.inf, -np.inf, 0.5, 0.0], [2.0, 0.0, -1.0, np.nan]])
X = np.concatenate([X, X[::-1] * 2])  # 6 x 4
K = int(np.count_nonzero(X > 0))


def sharded(mesh: dmesh.DeviceMesh, x: Any) -> dmesh.DArray:
    return dmesh.distribute(np.asarray(x), mesh, [Shard(0)] * mesh.ndim)


def writes(mesh: dmesh.DeviceMesh) -> list[tuple[str, Callable[[Any, bool], None]]]:
    """(label, write): ``write(a, numpy)`` changes ``a``; ``numpy`` says whether ``a`` is
    NumPy's array (the arguments are then NumPy arrays too)."""

    def arr(x: Any, numpy: bool) -> Any:
        return np.asarray(x) if numpy else sharded(mesh, x)

    values = np.arange(K) * 1.5 - 3

    def mask_scalar(a: Any, numpy: bool) -> None:
        a[a > 0] = -0.0

    def mask_values(a: Any, numpy: bool) -> None:
        a[a > 0] = values

    def mask_darray(a: Any, numpy: bool) -> None:
        a[a > 0] = arr(values, numpy)

    def mask_one(a: Any, numpy: bool) -> None:
        a[np.isnan(a)] = np.array([7.0])

    def mask_columns(a: Any, numpy: bool) -> None:
        a[:, arr(np.array([True, False, False, True]), numpy)] = np.array([1.0, 2.0])

    def mask_rows(a: Any, numpy: bool) -> None:
        a[arr(np.array([0, 1, 1, 0, 0, 1]) > 0, numpy)] = arr(np.arange(12.0).reshape(3, 4), numpy)

    def mask_update(a: Any, numpy: bool) -> None:  # Mandelbrot's z[m] = z[m] ** 2 + c[m]
        m = np.abs(a) <= 2
        a[m] = a[m] ** 2 + (a * 0.5)[m]
        a[~np.isnan(a)] += 1

    def mask_rows_broadcast(a: Any, numpy: bool) -> None:
        rows = arr(np.array([1, 0, 1, 1, 0, 1]) > 0, numpy)
        a[rows] = np.array([1.0, -0.0, np.nan, 4.0])
        a[a[:, 0] > 3] = arr(np.array([[9.0, 8.0, 7.0, 6.0]]), numpy)
        a[~rows] = arr(np.array([-5.0, 5.0, -5.0, 5.0]), numpy)
        a[a[:, 1] < 0] = arr(np.array([0.0, 1.0, 2.0, 3.0]), numpy)  # a 1-D DArray, every row

    def put(a: Any, numpy: bool) -> None:
        np.put(a, arr(np.array([0, -1, 13, 13, 7]), numpy), arr(np.array([9.0, 8.0]), numpy))

    def put_modes(a: Any, numpy: bool) -> None:
        np.put(a, [30, -30], [1.0, 2.0], mode="clip")
        np.put(a, arr(np.array([30, -30]), numpy), [3.0, 4.0], mode="wrap")

    def place(a: Any, numpy: bool) -> None:
        np.place(a, np.isinf(a) | (a == 0), arr(np.array([5.0, -6.0, 7.0]), numpy))

    def place_list(a: Any, numpy: bool) -> None:
        np.place(a, a < 1, [1.0, 2.0])

    def putmask(a: Any, numpy: bool) -> None:
        np.putmask(a, a > 0, arr(np.arange(5.0) + 10, numpy))

    def putmask_same(a: Any, numpy: bool) -> None:
        np.putmask(a, np.isnan(a), arr(-np.arange(24.0).reshape(6, 4), numpy))

    def copyto(a: Any, numpy: bool) -> None:
        np.copyto(a, arr(np.arange(4.0), numpy), where=a > 1)

    def copyto_cast(a: Any, numpy: bool) -> None:
        np.copyto(a, arr(np.arange(4), numpy), casting="same_kind")
        np.copyto(a, 2.5, where=arr(np.array([[True], [False]] * 3), numpy))

    def put_along(a: Any, numpy: bool) -> None:
        index = np.array([[3], [0], [1], [1], [2], [0]])
        np.put_along_axis(a, arr(index, numpy), arr(np.arange(6.0).reshape(6, 1), numpy), axis=1)

    def put_along_flat(a: Any, numpy: bool) -> None:
        np.put_along_axis(a, arr(np.array([23, -24, 5]), numpy), [1.0, 2.0, -0.0], axis=None)

    return [
        (f.__name__, f)
        for f in (mask_scalar, mask_values, mask_darray, mask_one, mask_columns, mask_rows,
                  mask_update, mask_rows_broadcast, put,
                  put_modes, place, place_list, putmask, putmask_same, copyto, copyto_cast,
                  put_along, put_along_flat)
    ]  # fmt: skip


def test_writes(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as v:
        for name, write in writes(mesh):
            want = X.copy()
            write(want, True)
            for label, make in variants(mesh, X):
                d = make()
                placements = d.placements
                write(d, False)
                got = full(d)
                v.check(same(got, want), f"{name} {label}: {got!r} != {want!r}")
                v.check(d.placements == placements, f"{name} {label}: placements changed")
                v.bits(f"{name} {label}", got)


def test_partial_targets_are_reduced_first(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as v:
        for name, write in writes(mesh):
            want = X.copy()
            write(want, True)
            rest = [Replicate()] * (mesh.ndim - 1)
            d = dmesh.distribute(X, mesh, [Partial("sum"), *rest])
            write(d, False)
            v.check(not any(p.is_partial() for p in d.placements), f"{name}: still partial")
            got = full(d)
            v.check(same(got, want), f"{name} partial: {got!r} != {want!r}")


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    d = sharded(mesh, X)
    assert_raises_all(comm, ValueError, d.__setitem__, d > 0, np.arange(3.0), match="shape")
    short = sharded(mesh, np.array([True, False]))
    assert_raises_all(comm, IndexError, d.__setitem__, short, 1.0, match="did not match")
    assert_raises_all(comm, IndexError, np.put, d, sharded(mesh, np.array([24])), 1.0,
                      match="index 24 is out of bounds")  # fmt: skip
    assert_raises_all(comm, IndexError, np.put, d, [-25], 1.0, match="-25")
    assert_raises_all(comm, ValueError, np.put, d, [0], 1.0, mode="bad")
    assert_raises_all(comm, ValueError, np.place, d, d > 0, [], match="empty")
    assert_raises_all(comm, ValueError, np.place, d, np.array([True]), [1.0], match="same size")
    assert_raises_all(comm, ValueError, np.putmask, d, np.array([True]), [1.0], match="same size")
    ints = sharded(mesh, np.arange(24).reshape(6, 4))
    assert_raises_all(comm, TypeError, np.copyto, ints, d, match="same_kind")
    assert_raises_all(comm, TypeError, np.copyto, d, 1.0, where=ints, match="safe")
    assert_raises_all(comm, ValueError, np.copyto, d, np.ones(3), match="broadcast")
    assert_raises_all(comm, NotImplementedError, np.copyto, X.copy(), d)
    index = sharded(mesh, np.array([[4]] * 6))
    assert_raises_all(comm, IndexError, np.put_along_axis, d, index, 1.0, axis=1,
                      match="out of bounds")  # fmt: skip
    assert_raises_all(comm, ValueError, np.put_along_axis, d, index[:, 0], 1.0, axis=1)


def test_repeated_mask_assignments(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``a[m] = v`` of specs seen before takes the remembered route (no layouts, one
    count exchange, none on one block); a mask of the same spec whose counts lie
    elsewhere, or whose count differs, still gets NumPy's answer or NumPy's error."""
    x = np.arange(13.0) - 4
    x[[0, 5]] = [np.nan, -0.0]
    m1 = x > 0  # 7 of 13, at the end
    m2 = np.roll(m1, 5)  # as many, elsewhere
    with BitVerdict(comm) as v:
        for label, make in variants(mesh, x):
            if not make().ndim:
                continue
            want, a = x.copy(), make()
            masks = [a > 0, np.roll(a > 0, 5), a > 2]  # m1, m2, one fewer: in a's layout
            for step in range(3):  # the first call remembers, the others take the route
                want[m1] = want[m1] ** 2 - step
                a[masks[0]] = a[masks[0]] ** 2 - step
            value = a[masks[0]] * 2.0
            want[m2] = want[m1] * 2.0
            a[masks[1]] = value  # same specs, counts elsewhere
            v.check(same(full(a), want), f"{label}: {full(a)!r} != {want!r}")
            v.bits(label, full(a))
            before = full(a)
            assert_raises_all(comm, ValueError, a.__setitem__, masks[2], value)
            v.check(same(full(a), before), f"{label}: changed by a refused write")
