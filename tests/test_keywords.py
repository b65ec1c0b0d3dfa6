"""``where=`` and ``out=`` on ufuncs, ``where=``/``initial=``/``out=`` on reductions.

Compared with NumPy on one process, over placements of the operands, the
mask and ``out`` (uneven and empty blocks at 3 and 4 ranks).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import assert_all, assert_equal_all, assert_raises_all, same_on_every_rank

TOL = {"rtol": 1e-12, "atol": 1e-12}


def placements_of(mesh: dmesh.DeviceMesh, ndim: int, partial: bool = False) -> list[list]:
    choices = [Replicate()] + [Shard(d) for d in range(ndim)]
    if partial:
        choices.append(Partial("sum"))
    return [list(p) for p in itertools.product(choices, repeat=mesh.ndim)]


DATA = np.arange(15.0).reshape(3, 5) - 6.0
MASK = DATA % 3 != 0


def test_ufunc_where_with_out(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    want = np.full(DATA.shape, -1.0)
    np.divide(1.0, DATA, out=want, where=DATA != 0)
    for p_a, p_out in itertools.product(placements_of(mesh, 2), placements_of(mesh, 2, True)):
        a = dmesh.distribute(DATA, mesh, p_a)
        out = dmesh.distribute(np.full(DATA.shape, -1.0), mesh, p_out)  # Partial: terms
        got = np.divide(1.0, a, out=out, where=a != 0)
        assert_all(comm, got is out and out.placements == tuple(p_out), "out was not filled")
        assert_equal_all(comm, out.full_array(), want, **TOL)


def test_ufunc_where_broadcast_mask(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    row_mask = np.array([True, False, True, True, False])
    want = np.zeros(DATA.shape)
    np.add(DATA, 10.0, out=want, where=row_mask)
    for p_a, p_m in itertools.product(placements_of(mesh, 2), placements_of(mesh, 1)):
        a = dmesh.distribute(DATA, mesh, p_a)
        m = dmesh.distribute(row_mask, mesh, p_m)
        out = dmesh.zeros(DATA.shape, mesh=mesh, placements=p_a)
        np.add(a, 10.0, out=out, where=m)
        assert_equal_all(comm, out.full_array(), want)
        # Without out, the selected values are NumPy's (the rest is undefined).
        free = np.add(a, 10.0, where=m).full_array()
        assert_equal_all(comm, free[:, row_mask], (DATA + 10.0)[:, row_mask])
    with dmesh.implicit_replication():
        out = dmesh.zeros(DATA.shape, mesh=mesh)
        np.add(dmesh.distribute(DATA, mesh, [Shard(1)] * mesh.ndim), 10.0, out=out, where=row_mask)
    assert_equal_all(comm, out.full_array(), want)


@pytest.mark.parametrize("func", [np.sum, np.prod, np.any, np.all, np.mean])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_reduction_where(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, func: object, axis: object
) -> None:
    data = DATA / 4.0 if func is np.prod else DATA
    want = func(data, axis=axis, where=MASK)  # type: ignore[operator]
    for p_a, p_m in itertools.product(placements_of(mesh, 2), placements_of(mesh, 2)[:3]):
        a = dmesh.distribute(data, mesh, p_a)
        m = dmesh.distribute(MASK, mesh, p_m)
        got = func(a, axis=axis, where=m)  # type: ignore[operator]
        assert_equal_all(comm, np.asarray(got.full_array()), np.asarray(want), **TOL)


@pytest.mark.parametrize("func", [np.max, np.min])
def test_extrema_where_and_initial(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, func: object
) -> None:
    for p_a in placements_of(mesh, 2):
        a = dmesh.distribute(DATA, mesh, p_a)
        m = dmesh.distribute(MASK, mesh, p_a)
        for axis in (None, 0, 1):
            got = func(a, axis=axis, where=m, initial=0.5)  # type: ignore[operator]
            want = func(DATA, axis=axis, where=MASK, initial=0.5)  # type: ignore[operator]
            assert_equal_all(comm, np.asarray(got.full_array()), np.asarray(want))
        empty = dmesh.distribute(np.zeros((0, 3)), mesh, [Shard(0)] * mesh.ndim)
        got = func(empty, axis=0, initial=2.0)  # type: ignore[operator]
        assert_equal_all(comm, got.full_array(), np.full(3, 2.0))
        assert_raises_all(comm, ValueError, func, a, where=m, match="initial")


def test_sum_initial_and_ufunc_reduce(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    ints = np.arange(-4, 11)
    for p_a in placements_of(mesh, 1):
        a = dmesh.distribute(ints, mesh, p_a)
        assert_equal_all(comm, np.sum(a, initial=5).full_array(), np.sum(ints, initial=5))
        assert_equal_all(
            comm, np.prod(a[4:8], initial=3).full_array(), np.prod(ints[4:8], initial=3)
        )
        got = np.add.reduce(a, where=a > 0)
        assert_equal_all(comm, got.full_array(), np.add.reduce(ints, where=ints > 0))
        got = np.maximum.reduce(a, where=a < 3, initial=-100)
        assert_equal_all(
            comm, got.full_array(), np.maximum.reduce(ints, where=ints < 3, initial=-100)
        )


def test_reduction_out(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    for p_a, p_out in itertools.product(placements_of(mesh, 2), placements_of(mesh, 1, True)):
        a = dmesh.distribute(DATA, mesh, p_a)
        out = dmesh.zeros(
            (5,), mesh=mesh, placements=[Replicate() if p.is_partial() else p for p in p_out]
        )
        if any(p.is_partial() for p in p_out):
            out = out.redistribute(placements=p_out)
        got = np.sum(a, axis=0, out=out, where=a > -3)
        assert_all(comm, got is out and out.placements == tuple(p_out), "out was not filled")
        assert_equal_all(comm, out.full_array(), np.sum(DATA, axis=0, where=DATA > -3))
        np.add.reduce(a, axis=0, out=out)
        assert_equal_all(comm, out.full_array(), DATA.sum(axis=0))
    ints = dmesh.zeros((3,), dtype=np.int64, mesh=mesh)
    np.max(dmesh.distribute(DATA, mesh, [Shard(1)] * mesh.ndim), axis=1, out=ints)
    assert_equal_all(comm, ints.full_array(), DATA.max(axis=1).astype(np.int64))


def test_keyword_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(DATA, mesh, [Shard(0)] * mesh.ndim)
    wrong = dmesh.zeros((4,), mesh=mesh)
    assert_raises_all(comm, ValueError, np.sum, a, axis=0, out=wrong, match="shape")
    assert_raises_all(comm, TypeError, np.sum, a, axis=0, out=np.zeros(5), match="DArray")
    assert_raises_all(comm, TypeError, np.add, a, 1.0, where=MASK, match="distribute")
    assert_raises_all(comm, ValueError, np.add, a, 1.0, out=wrong, where=True)
    assert_raises_all(comm, NotImplementedError, np.nansum, a, where=a > 0, match="where")


def test_ndarray_out_with_darray_input_raises_clearly(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    # c += d with c an ndarray and d a DArray: NumPy hands DArray the call with out=(c,).
    # A clear error on every rank, naming what was given (not its values), and c unchanged.
    d = dmesh.distribute(np.arange(6.0), mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    c = np.ones(6)
    with pytest.raises(dmesh.ArgumentTypeError, match=r"numpy.ndarray float64 \(6,\)") as info:
        c += d
    assert "zeros_like" in str(info.value)
    assert "array([" not in str(info.value)
    assert_equal_all(comm, c, np.ones(6))


def test_reduction_arguments_bind_as_numpys(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Positional and keyword arguments of a reduction with out= are bound by each function's
    own parameter order (np.sum takes dtype before out, np.max has none), with Python's
    TypeError for too many, repeated or unknown ones, on every rank."""
    a = dmesh.distribute(DATA, mesh, [Shard(0)] * mesh.ndim)
    out = dmesh.zeros((5,), mesh=mesh)
    np.sum(a, 0, None, out=out)
    assert_equal_all(comm, out.full_array(), DATA.sum(0))
    np.max(a, 0, out=out, keepdims=False)
    assert_equal_all(comm, out.full_array(), DATA.max(0))
    np.min(a, 0, out=out, initial=100.0, where=a > 0)
    assert_equal_all(comm, out.full_array(), DATA.min(0, initial=100.0, where=DATA > 0))
    assert_raises_all(comm, TypeError, np.sum, a, 0, None, None, False, 0, True, 5, out=out)
    assert_raises_all(comm, TypeError, np.max, a, 0, out=out, axis=0)
    assert_raises_all(comm, TypeError, np.max, a, 0, out=out, dtype=float)
    assert_raises_all(comm, TypeError, np.mean, a, 0, None, None, False, True, out=out)


def test_repeated_out_calls_write_into_out(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.add(a, b, out=o) repeated (the second call straight into o's block) gives NumPy's
    values, casts as NumPy (same_kind) and reads an input that is out as NumPy does."""
    for placements in placements_of(mesh, 2):
        a = dmesh.distribute(DATA, mesh, placements)
        b = dmesh.distribute(-2.0 * DATA, mesh, placements)
        o = dmesh.zeros_like(a)
        o32 = dmesh.zeros(DATA.shape, dtype=np.float32, mesh=mesh, placements=placements)
        o_int = dmesh.zeros(DATA.shape, dtype=np.int64, mesh=mesh, placements=placements)
        for scale in (1.0, 3.0):
            assert_all(comm, np.multiply(a, scale, out=o) is o, "out not returned")
            assert_equal_all(comm, o.full_array(), DATA * scale)
            np.add(a, b, out=o32)
            assert_equal_all(comm, o32.full_array(), (DATA - 2.0 * DATA).astype(np.float32))
            assert_raises_all(comm, TypeError, np.add, a, b, out=o_int)
        np.add(o, o, out=o)
        assert_equal_all(comm, o.full_array(), 6.0 * DATA)


def test_cached_extrema_of_empty_blocks(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """max/min whose blocks are empty on some ranks (2 rows over up to 4 ranks), called
    twice (the second from the cache, its identity worked out once), for every dtype kind,
    with NaN, -0.0 and integer extremes."""
    cases = [
        np.array([[np.nan, -0.0, 1.0], [-np.inf, 0.0, np.inf]]),
        np.array([[-128, 127, 0], [5, -1, -128]], dtype=np.int8),
        np.array([[0, 255, 7], [255, 0, 1]], dtype=np.uint8),
        np.array([[True, False, False], [False, False, True]]),
        np.array([[1.5, np.nan, -2.0], [0.5, 3.0, -1.0]], dtype=np.float16),
    ]
    for data in cases:
        for placements in placements_of(mesh, 2):
            x = dmesh.distribute(data, mesh, placements)
            for _ in range(2):
                for func in (np.max, np.min):
                    for axis in (None, 0, 1):
                        got = func(x, axis=axis)
                        want = func(data, axis=axis)
                        full = got.full_array() if isinstance(got, dmesh.DArray) else got
                        assert_all(comm, np.asarray(full).dtype == want.dtype, "dtype")
                        assert_equal_all(comm, np.asarray(full), want)
        if data.dtype.kind in "fiu":  # a Partial(max)/Partial(min) operand of its own op
            for func, op in ((np.max, "max"), (np.min, "min")):
                x = dmesh.distribute(data, mesh, [Partial(op)] * mesh.ndim)
                for _ in range(2):
                    got = np.asarray(func(x, axis=0).full_array())
                    assert_equal_all(comm, got, func(data, axis=0))
                    same_on_every_rank(comm, got)


def test_reductions_into_out_repeated(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A reduction into out=, repeated (the second call straight into out's block: the local
    reduction, then one Allreduce into it where that is the plan), gives NumPy's values at
    every placement of the operand and of out, casts into out as NumPy does (unsafe), and
    every rank holds the same bits, NaNs included."""
    data = DATA.copy()
    data[1, 2] = np.nan
    ints = (DATA * 7).astype(np.int64) - 2**62
    for p_a, p_out in itertools.product(placements_of(mesh, 2), placements_of(mesh, 1, True)):
        a = dmesh.distribute(data, mesh, p_a)
        ai = dmesh.distribute(ints, mesh, p_a)
        out = dmesh.zeros((5,), mesh=mesh).redistribute(placements=p_out)  # (Partial too)
        p_out = [Replicate() if p.is_partial() else p for p in p_out]
        out32 = dmesh.zeros((5,), dtype=np.float32, mesh=mesh, placements=p_out)
        out_int = dmesh.zeros((3,), dtype=np.int64, mesh=mesh, placements=p_out)
        for _ in range(2):
            for func in (np.sum, np.prod, np.max, np.min, np.mean):
                assert_all(comm, func(a, 0, out=out) is out, "out not returned")
                got = out.full_array()
                assert_equal_all(comm, got, func(data, 0), **TOL)  # (sums in another order)
                same_on_every_rank(comm, got)
                func(a, axis=0, out=out32)
                want32 = func(data, 0).astype(np.float32)
                assert_equal_all(comm, out32.full_array(), want32, rtol=1e-6)
            np.sum(ai, 1, out=out_int)
            assert_equal_all(comm, out_int.full_array(), ints.sum(1))
            np.sum(a, 1, out=out_int)  # float into int: NumPy's unsafe cast (NaN as NumPy)
            want = np.zeros(3, dtype=np.int64)
            with np.errstate(invalid="ignore"):
                np.sum(data, 1, out=want)
                assert_equal_all(comm, out_int.full_array(), want)
    wrong = dmesh.zeros((4,), mesh=mesh)
    for _ in range(2):
        assert_raises_all(comm, ValueError, np.sum, a, 0, out=wrong, match="shape")


def test_positional_arguments_are_keyed_by_value(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """Calls with positional static arguments (np.sum(a, 0)), repeated and interleaved with
    other values of the same arguments, each get their own plan: NumPy's answer every time."""
    data = np.arange(24.0).reshape(2, 3, 4) - 11.5
    calls = [
        (np.sum, (0,)), (np.sum, (1,)), (np.sum, (-1,)), (np.sum, (None,)), (np.sum, ((0, 2),)),
        (np.sum, (1, None, None, True)), (np.mean, (2,)), (np.max, (0,)), (np.max, (1, None, True)),
        (np.prod, (2,)), (np.cumsum, (1,)), (np.argmax, (2,)), (np.any, (0,)),
        (np.moveaxis, (0, -1)), (np.swapaxes, (0, 2)), (np.transpose, ((2, 0, 1),)),
        (np.expand_dims, (1,)), (np.flip, (0,)), (np.diff, (1, 2)), (np.diff, (2, 0)),
    ]  # fmt: skip
    for placements in placements_of(mesh, 3):
        a = dmesh.distribute(data, mesh, placements)
        for _ in range(2):
            for func, args in calls:
                got = func(a, *args)
                want = func(data, *args)
                full = got.full_array() if isinstance(got, dmesh.DArray) else got
                assert_all(comm, np.shape(full) == np.shape(want), f"{func.__name__}{args}")
                assert_equal_all(comm, np.asarray(full), want)
