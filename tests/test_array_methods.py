"""ndarray's methods and properties on DArrays (issue 14, items 1, 3, 5, 6, 7): each is its
``np.`` function, and the in-place ones write into the array's blocks, at 1-4 ranks."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import ArgumentError
from helpers import BitVerdict, Verdict, assert_raises_all

X = np.array([[3.0, -1.5, np.nan], [-0.0, 2.0, 7.0], [np.inf, -4.0, 0.5], [1.0, 1.0, -np.inf],
              [5.0, 0.0, -2.0]])  # fmt: skip


def _layouts(mesh: dmesh.DeviceMesh) -> list[list[object]]:
    rest = [Replicate()] * (mesh.ndim - 1)
    shard_both = [Shard(0), Shard(1)] if mesh.ndim == 2 else [Shard(1)]
    return [[Shard(0), *rest], [Shard(1), *rest], [Replicate(), *rest], shard_both]


def _arrays(mesh: dmesh.DeviceMesh) -> list[tuple[str, dmesh.DArray, np.ndarray]]:
    """Balanced, uneven and (at 4+ ranks along dim 0) empty blocks."""
    out = []
    for placements in _layouts(mesh):
        out.append((f"{placements}", dmesh.distribute(X, mesh, placements), X))
        whole = np.concatenate([X, X])
        out.append((f"{placements}[6:]", dmesh.distribute(whole, mesh, placements)[6:], X[1:]))
    return out


def test_sizes_and_views(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for name, a, x in _arrays(mesh):
            verdict.check(a.itemsize == x.itemsize and a.nbytes == x.nbytes, f"{name}: sizes")
            for label, got, want in (
                ("flatten", a.flatten(), x.flatten()),
                ("mT", a.mT, x.mT),
                ("swapaxes", a.swapaxes(0, 1), x.swapaxes(0, 1)),
                ("squeeze", a[:, :1].squeeze(), x[:, :1].squeeze()),
                ("cumsum 0", a.cumsum(axis=0), x.cumsum(axis=0)),
                ("cumprod 1", a.cumprod(axis=1), x.cumprod(axis=1)),
                ("max", a.max(axis=0), x.max(axis=0)),
                ("argmin", a.argmin(axis=1), x.argmin(axis=1)),
                ("dot", a.T.dot(a[:, :1]), x.T.dot(x[:, :1])),
            ):
                full = got.full_array()
                verdict.check(
                    full.shape == want.shape and full.dtype == want.dtype
                    and np.allclose(full, want, equal_nan=True, rtol=1e-12),
                    f"{name} {label}: {full!r} != {want!r}",
                )  # fmt: skip
                verdict.bits(f"{name} {label}", full)


def test_item_with_an_index(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for name, a, x in _arrays(mesh):
            for args in ((0,), (7,), (-1,), (1, 2), ((2, 0),)):
                got, want = a.item(*args), x.item(*args)
                verdict.check(
                    type(got) is type(want) and (got == want or (got != got and want != want)),
                    f"{name} item{args}: {got!r} != {want!r}",
                )
                verdict.bits(f"{name} item{args}", got)
            verdict.check(a.flat[4].full_array() == x.flat[4], f"{name} flat[4]")
    a = dmesh.distribute(X, mesh, _layouts(mesh)[0])
    assert_raises_all(comm, ArgumentError, a.item, 15, match="out of range")
    assert_raises_all(comm, ArgumentError, a.item, 1, 2, 3, match="one per dim")


def test_in_place_sort_fill_and_flat(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for name, a, x in _arrays(mesh):
            for axis in (0, 1, -1):
                b, y = a.copy(), x.copy()
                view = b[:, :]  # a view of b's blocks: sees the sort, as NumPy's views do
                b.sort(axis=axis)
                y.sort(axis=axis)
                verdict.check(b.spec == a.spec, f"{name}: sort kept the layout")
                for label, got in (("sort", b), ("view", view)):
                    full = got.full_array()
                    verdict.check(np.array_equal(full, y, equal_nan=True), f"{name} {label}")
                    verdict.bits(f"{name} {label} axis {axis}", full)
            c, y = a.copy(), x.copy()
            c.fill(-3.25)
            y.fill(-3.25)
            c.flat[2] = 9.0
            y.flat[2] = 9.0
            verdict.check(np.array_equal(c.full_array(), y), f"{name} fill/flat")


def test_partial_arrays_in_place(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """fill of a partial sum holds the value, not one term per rank; sort sorts the sum."""
    rest = [Replicate()] * (mesh.ndim - 1)
    finite = np.nan_to_num(X, nan=1.0, posinf=6.0, neginf=-6.0)
    with BitVerdict(comm) as verdict:
        p = dmesh.distribute(finite, mesh, [Partial("sum"), *rest])
        p.sort(axis=0)
        verdict.check(np.array_equal(p.full_array(), np.sort(finite, axis=0)), "sort of P(sum)")
        q = dmesh.distribute(finite, mesh, [Partial("sum"), *rest])
        q.fill(2.5)
        verdict.check(np.array_equal(q.full_array(), np.full_like(finite, 2.5)), "fill P(sum)")
        verdict.bits("fill", q.full_array())


def test_real_imag_setters_and_astype(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    z = X + 1j * X[::-1]
    with BitVerdict(comm) as verdict:
        for placements in _layouts(mesh):
            a = dmesh.distribute(z, mesh, placements)
            r = dmesh.distribute(X, mesh, placements)
            want = z.copy()
            a.real = 4.0
            want.real = 4.0
            a.imag = r
            want.imag = X
            verdict.check(np.array_equal(a.full_array(), want, equal_nan=True), "setters")
            verdict.bits(f"{placements}", a.full_array())
            verdict.check(r.astype(np.float64, copy=False) is r, "astype copy=False")
            verdict.check(r.astype(np.float64) is not r, "astype copies")
    r = dmesh.distribute(X, mesh, _layouts(mesh)[0])
    assert_raises_all(comm, TypeError, setattr, r, "imag", 1.0, match="no imaginary")
    assert_raises_all(comm, TypeError, r.astype, np.int8, casting="safe", match="cannot cast")


def test_flat_assignment_takes_an_integer_or_a_slice(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """``a.flat[i] = v`` and ``a.flat[start:stop:step] = v`` (a short ``v`` repeated, as
    NumPy repeats it) on every layout; a tuple key raises on every rank."""
    with Verdict(comm) as verdict:
        for placements in _layouts(mesh):
            a, y = dmesh.distribute(X, mesh, placements), X.copy()
            for key, value in ((slice(1, 3), 1.0), (slice(None, None, 4), [7.0, -0.0]),
                               (slice(-2, None), np.inf), (slice(5, 2), 3.0)):  # fmt: skip
                a.flat[key] = value
                y.flat[key] = value
            verdict.check(np.array_equal(a.full_array(), y, equal_nan=True), f"{placements}")
    a = dmesh.distribute(X, mesh, _layouts(mesh)[0])
    assert_raises_all(comm, ArgumentError, a.flat.__setitem__, (0,), 1.0, match="or a slice")


def test_astype_of_partial_arrays_casts_the_value(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """np.sum(a, 0).astype(int) truncates the sum, not each rank's term."""
    rest = [Replicate()] * (mesh.ndim - 1)
    x = np.full((3, 2), 0.5) * np.arange(1, 3)
    with BitVerdict(comm) as verdict:
        for op, dtype in (("sum", np.int64), ("sum", np.float32), ("max", np.complex128),
                          ("min", np.int8), ("prod", np.bool_), ("max", np.float32)):  # fmt: skip
            p = dmesh.distribute(x, mesh, [Partial(op), *rest])
            got = p.astype(dtype).full_array()
            want = x.astype(dtype)
            verdict.check(
                got.dtype == want.dtype and np.array_equal(got, want), f"{op} -> {dtype}: {got}"
            )
            verdict.bits(f"{op} {dtype}", got)
