"""Basic indices give views: writes through them reach the base array, as in NumPy.

In NumPy ``a[i]``, ``a[i, j:k]``, ``a[..., i]``, chains of them and views of
views share memory with ``a``: ``[...] =``, ``v[k] = x``, ``+=``/``*=``, a
ufunc's ``out=``, ``np.copyto``, ``.fill`` and in-place methods such as
``.sort()`` on the view change ``a``, and a view read after a write to ``a``
shows the write. These tests run the same code on a NumPy array in one process
and on a DArray under every placement of the mesh (Replicate, Shard of each
axis, 2-D meshes at 4 ranks), including 0-d views (``a[1, 2, ...]``), uneven
and empty blocks (dims shorter than the mesh), negative and NumPy integer
keys, and int64 extremes and float NaN/inf/-0.0 compared bit for bit; then
they compare the base (and the view where the case returns one) with NumPy's
on every rank. A Hypothesis test draws chains of 1 to 3 basic keys followed by
a write. Issue 28, item 1.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from helpers import Verdict, assert_all, assert_raises_all

R = Replicate()
A55 = np.arange(25).reshape(5, 5)
PERMUTED = np.random.default_rng(28).permutation(35).reshape(7, 5) - 17
FLOATS = np.array([[1.5, -0.0, np.nan, np.inf, -np.inf], [0.0, -2.5, 3.0, -np.nan, 7.0]])
INTS = np.array([[np.iinfo(np.int64).min, -1, 0, 1, np.iinfo(np.int64).max], [5, -6, 7, -8, 9]])


def layouts(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[Any]]:
    """Every placement list of the mesh: Replicate or Shard of one array axis per mesh dim."""
    choices: list[Any] = [R] + [Shard(axis) for axis in range(ndim)]
    return [list(p) for p in itertools.product(choices, repeat=mesh.ndim)]


def value_of(x: Any) -> np.ndarray:
    """The global value of a DArray (collective), or of a NumPy array or scalar."""
    return x.full_array() if isinstance(x, dmesh.DArray) else np.asarray(x)


def same(actual: Any, expected: Any, where: str) -> tuple[bool, str]:
    """(equal, why not): shape, dtype, values with NaN equal to NaN, the sign of every zero."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False, f"{where}: {actual.shape} {actual.dtype} != {expected.shape} {expected.dtype}"
    floating = expected.dtype.kind in "fc"
    if not np.array_equal(actual, expected, equal_nan=floating):
        return False, f"{where}:\n{actual}\n!= NumPy's\n{expected}"
    if floating:
        zeros = expected == 0
        if not np.array_equal(np.signbit(actual[zeros]), np.signbit(expected[zeros])):
            return False, f"{where}: the sign of a zero differs:\n{actual}\n!= NumPy's\n{expected}"
    return True, ""


@dataclass(frozen=True)
class Case:
    """Writes run on a NumPy array and on a DArray alike; ``write`` may return a view to check."""

    name: str
    data: np.ndarray
    write: Callable[[Any], Any]


def run_case(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, case: Case) -> None:
    """``case.write`` on NumPy's array and on the DArray of every layout; compare base and view."""
    expected = case.data.copy()
    expected_view = case.write(expected)
    with Verdict(comm) as verdict:
        for placements in layouts(mesh, case.data.ndim):
            where = f"{case.name} {case.data.shape} {placements}"
            d = dmesh.distribute(case.data, mesh, placements)
            try:
                view = case.write(d)
            except Exception as exc:  # dmesh agrees on errors: every rank lands here together
                verdict.check(False, f"{where}: raised {type(exc).__name__}: {exc}")
                continue
            verdict.check(*same(d.full_array(), expected, f"{where}: base"))
            if expected_view is not None:
                verdict.check(*same(value_of(view), expected_view, f"{where}: view"))


# -- the cases of the issue ---------------------------------------------------------------


def row_iadd(a: Any) -> Any:
    row = a[4]
    row += 100  # NumPy: a[4] changes
    return row


def row_imul_negative_index(a: Any) -> Any:
    row = a[-2]
    row *= -3
    return row


def row_ellipsis_assign(a: Any) -> None:
    a[0][...] = -1


def slice_then_row(a: Any) -> None:
    a[2:4][1][...] = -1


def columns_then_row(a: Any) -> None:
    a[:, 1:3][0][...] = -1


def copyto_row(a: Any) -> None:
    np.copyto(a[0, :], np.array([9, -8, 7, -6, 5]))


def row_slice_assign_list(a: Any) -> Any:
    row = a[4]
    row[1:3] = [5, 6]
    return row


def row_element_assign(a: Any) -> Any:
    v = a[2]
    v[3] = 42
    v[-1] = -42
    return v


def view_of_view(a: Any) -> Any:
    v = a[1]
    w = v[1:3]
    w[...] = 0
    return v


def view_of_view_iadd(a: Any) -> Any:
    v = a[1:4, 1:]
    w = v[1]
    w += 10
    return v


def darray_value(a: Any) -> Any:
    b = a * 2 + 1  # another array: a DArray for a DArray
    a[0][...] = b[1]
    return b


def value_from_same_base(a: Any) -> None:
    a[0][...] = a[4]


def read_after_base_write(a: Any) -> Any:
    row = a[4]
    a[4, 1] = 7
    return row


def column_read_after_base_write(a: Any) -> Any:
    col = a[:, 2]
    a[1:3] = -5
    return col


def read_after_base_iadd(a: Any) -> Any:
    row = a[3]
    a += 1
    return row


def numpy_integer_keys(a: Any) -> Any:
    v = a[np.int64(3)]
    v[...] = -3
    w = a[np.int64(-1)]
    w[np.int64(-2)] = 99
    return w


def augmented_through_chain(a: Any) -> None:
    a[2:4][1] += 1000
    a[:, 3][-1] *= 2


def row_fill(a: Any) -> Any:
    row = a[3]
    row.fill(-9)
    return row


def column_fill(a: Any) -> Any:
    col = a[..., 1]
    col.fill(11)
    return col


def column_iadd(a: Any) -> Any:
    col = a[..., -1]
    col += 5
    return col


def ufunc_out_row(a: Any) -> Any:
    row = a[2]
    np.add(row, 1, out=row)
    np.negative(a[0], out=a[4])
    np.multiply(a[1], 3, out=(a[3],))
    return row


def ufunc_out_column(a: Any) -> None:
    np.subtract(a[:, 0], a[:, 1], out=a[:, 4])


def zero_d_views(a: Any) -> Any:
    v = a[1, 2, ...]  # a 0-d view, not a scalar
    v[...] = 70
    w = a[-1, -1, ...]
    w += 1
    np.copyto(a[0, 4, ...], 9)
    return v


def zero_d_of_row(a: Any) -> Any:
    row = a[3]
    z = row[2, ...]
    z[...] = -77
    return z


def sort_row(a: Any) -> Any:
    row = a[1]
    row.sort()
    return row


def sort_column(a: Any) -> Any:
    col = a[:, 2]
    col.sort()
    return col


def sort_block(a: Any) -> None:
    a[1:6, 1:].sort(axis=0)


def zero_d_out_views(d: Any) -> Any:
    np.multiply(d[1], d[2], out=d[..., 0])  # 1-D d: d[..., 0] is a 0-d view
    return d[..., 0]


def zero_d_out_scalars(d: Any) -> None:
    np.multiply(2.5, -4.0, out=d[..., 0])


def zero_d_copyto_and_iadd(d: Any) -> Any:
    z = d[-1, ...]
    np.copyto(z, -0.0)
    y = d[..., 2]
    y += np.inf
    return z


def reshape_element_assign(a: Any) -> Any:
    flat = a.reshape(-1)  # NumPy: a view of the C-contiguous a; dmesh moves elements here
    flat[7] = -7
    flat[::6] += 1000
    return flat


def ravel_in_place(a: Any) -> Any:
    flat = a.ravel()
    flat *= -1
    np.copyto(flat[3:9], 5)
    return flat


def reshape_row_of_reshape(a: Any) -> Any:
    r = a.reshape(1, a.size)
    row = r[0]
    row[2:5] = -3  # a view of a view of the reshape
    r[0, 10:12][...] = 99
    return r


def reshape_of_slice(a: Any) -> None:
    r = a[1:].reshape(-1)
    r.fill(-1)
    a.reshape(a.size)[-1] = 12345
    # (not read: a reshape that moved elements does not see later writes to its base)


def reshape_of_strided_copies(a: Any) -> Any:
    r = a[:, :3].reshape(-1)  # NumPy: a column slice is strided, its reshape a copy
    r[4] = 99
    t = a.T.reshape(-1)  # a transpose too
    t[0] += 1
    return r


def reshape_of_row_view(a: Any) -> Any:
    r = a[1].reshape(1, -1)  # a row of a C-contiguous array: NumPy's reshape is a view
    r[0, 2] = -9
    a[3].ravel()[1:3] += 1000
    return r


def iterate_rows(a: Any) -> None:
    for i, row in enumerate(a):  # NumPy's iteration yields views
        row *= i - 2


# -- views that functions and methods make ----------------------------------------------


def view_method(a: Any) -> Any:
    v = a.view()
    v[1] = -1  # a block view, or a detached row: either way a changes
    w = a[2].view()
    w += 10
    return v


def clip_out_row(a: Any) -> Any:
    np.clip(a[0], 2, 4, out=a[0])
    np.clip(a, -3, 30, out=a)
    np.round(a[:, 1] * 2, 0, out=a[:, 2])
    return a[0]


LINE = np.arange(5.0) * 1.5 - 2.0
CASES = [
    Case("view_method", A55, view_method),
    Case("clip_out_row", A55, clip_out_row),
    Case("reshape_element_assign", A55, reshape_element_assign),
    Case("ravel_in_place", A55, ravel_in_place),
    Case("reshape_row_of_reshape", A55, reshape_row_of_reshape),
    Case("reshape_of_slice", A55, reshape_of_slice),
    Case("iterate_rows", A55, iterate_rows),
    Case("reshape_of_strided_copies", A55, reshape_of_strided_copies),
    Case("reshape_of_row_view", A55, reshape_of_row_view),
    Case("row_iadd", A55, row_iadd),
    Case("row_imul_negative_index", A55, row_imul_negative_index),
    Case("row_ellipsis_assign", A55, row_ellipsis_assign),
    Case("slice_then_row", A55, slice_then_row),
    Case("columns_then_row", A55, columns_then_row),
    Case("copyto_row", A55, copyto_row),
    Case("row_slice_assign_list", A55, row_slice_assign_list),
    Case("row_element_assign", A55, row_element_assign),
    Case("view_of_view", A55, view_of_view),
    Case("view_of_view_iadd", A55, view_of_view_iadd),
    Case("darray_value", A55, darray_value),
    Case("value_from_same_base", A55, value_from_same_base),
    Case("read_after_base_write", A55, read_after_base_write),
    Case("column_read_after_base_write", A55, column_read_after_base_write),
    Case("read_after_base_iadd", A55, read_after_base_iadd),
    Case("numpy_integer_keys", A55, numpy_integer_keys),
    Case("augmented_through_chain", A55, augmented_through_chain),
    Case("row_fill", A55, row_fill),
    Case("column_fill", A55, column_fill),
    Case("column_iadd", A55, column_iadd),
    Case("ufunc_out_row", A55, ufunc_out_row),
    Case("ufunc_out_column", A55, ufunc_out_column),
    Case("zero_d_views", A55, zero_d_views),
    Case("zero_d_of_row", A55, zero_d_of_row),
    Case("sort_row", PERMUTED, sort_row),
    Case("sort_column", PERMUTED, sort_column),
    Case("sort_block", PERMUTED, sort_block),
    Case("zero_d_out_views", LINE, zero_d_out_views),
    Case("zero_d_out_scalars", LINE, zero_d_out_scalars),
    Case("zero_d_copyto_and_iadd", LINE, zero_d_copyto_and_iadd),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_view_writes(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, case: Case) -> None:
    """Each case of the issue (and its neighbours) writes through views as NumPy does."""
    run_case(comm, mesh, case)


# -- uneven and empty blocks ---------------------------------------------------------------


def every_row_column_and_element(a: Any) -> None:
    rows, cols = a.shape
    for i in range(rows):
        row = a[i]
        row += i + 1
    for j in range(cols):
        col = a[:, -1 - j]
        col *= 2
    for i in range(rows):
        a[i][i % cols, ...] = -i  # a 0-d view of a row view
        a[i, (i + 1) % cols : cols][...] = 100 + i


@pytest.mark.parametrize("shape", [(7, 5), (5, 7), (1, 3), (2, 3), (3, 1), (3, 2)], ids=str)
def test_uneven_and_empty_blocks(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: tuple[int, int]
) -> None:
    """Every row, column and a diagonal of 0-d views written, over uneven and empty blocks."""
    data = np.arange(np.prod(shape)).reshape(shape) * 3 - 7
    run_case(comm, mesh, Case("every_row_column_and_element", data, every_row_column_and_element))


# -- extremes, bit for bit -----------------------------------------------------------------


def extreme_float_writes(a: Any) -> Any:
    row = a[1]
    row[...] = FLOATS[0][::-1]
    a[0, 1:3] = [-0.0, np.nan]
    col = a[..., 3]
    col *= -1.0  # inf to -inf, 0.0 to -0.0, NaN stays NaN
    np.copyto(a[1, 4, ...], -0.0)
    a[:, 0].fill(-np.inf)
    return row


def extreme_int_writes(a: Any) -> Any:
    row = a[0]
    row *= -1  # -min wraps to min, as in NumPy
    col = a[..., 4]
    col += 1  # max + 1 wraps to min
    a[1, 1:3] = [np.iinfo(np.int64).max, np.iinfo(np.int64).min]
    np.copyto(a[0, 2, ...], np.iinfo(np.int64).min)
    return row


@pytest.mark.parametrize(
    "case",
    [
        Case("extreme_floats", FLOATS, extreme_float_writes),
        Case("int64_extremes", INTS, extreme_int_writes),
    ],
    ids=lambda c: c.name,
)
def test_extremes_bit_for_bit(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, case: Case) -> None:
    """int64 min/max wrap as in NumPy; NaN, inf and -0.0's sign survive writes through views."""
    run_case(comm, mesh, case)


# -- a negative step -----------------------------------------------------------------------


def reversed_then_first(a: Any) -> Any:
    r = a[::-1]
    r[0] = 5
    return r


@pytest.mark.parametrize("shape", [(7,), (7, 5)], ids=str)
def test_negative_step_view(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: tuple[int, ...]
) -> None:
    """``a[::-1][0] = 5`` writes ``a[-1]``, as in NumPy (a negative step is a view there too)."""
    data = np.arange(np.prod(shape)).reshape(shape) - 3
    run_case(comm, mesh, Case("reversed_then_first", data, reversed_then_first))


# -- generated chains of keys --------------------------------------------------------------


def an_index(draw: st.DrawFn, n: int) -> Any:
    """An integer in range for a dim of ``n`` (negative ones too), some as NumPy integers."""
    i = draw(st.integers(-n, n - 1))
    return np.int64(i) if draw(st.booleans()) else i


def a_slice(draw: st.DrawFn, n: int) -> slice:
    """A slice with positive steps only (a negative step on a sharded dim gives a copy)."""
    bound = st.none() | st.integers(-n - 1, n + 1)
    return slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3])))


def a_key(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    """A basic key valid for ``shape``: ints, slices, at most one Ellipsis, some None."""
    ndim = len(shape)
    used = draw(st.integers(0, ndim))
    ellipsis = draw(st.booleans())
    head = draw(st.integers(0, used)) if ellipsis else used
    dims = list(range(head)) + list(range(ndim - (used - head), ndim))
    items: list[Any] = [
        an_index(draw, shape[d]) if shape[d] and draw(st.booleans()) else a_slice(draw, shape[d])
        for d in dims
    ]
    if ellipsis:
        items.insert(head, Ellipsis)
    if all(isinstance(i, (int, np.integer)) for i in items) and len(items) == ndim:
        items.append(Ellipsis)  # N ints on an N-d array give a NumPy scalar, not a view
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


@st.composite
def chains(draw: st.DrawFn) -> tuple[tuple[int, ...], np.dtype, list[Any], str, Any]:
    """(shape, dtype, keys, write, value): 1 to 3 keys, each valid for the view it indexes."""
    shape = tuple(draw(st.integers(1, top)) for top in (6, 5, 3)[: draw(st.integers(1, 3))])
    dtype = np.dtype(draw(st.sampled_from(["int64", "float64"])))
    keys: list[Any] = []
    view_shape = shape
    for _ in range(draw(st.integers(1, 3))):
        key = a_key(draw, view_shape)
        keys.append(key)
        view_shape = np.empty(view_shape)[key].shape
    write = draw(st.sampled_from(["assign", "iadd", "copyto", "fill", "ufunc_out"]))
    if dtype.kind == "f":
        value: Any = draw(st.sampled_from([1.5, -0.0, np.nan, np.inf, -np.inf, -2.0]))
    else:
        value = draw(st.integers(-9, 9))
    return shape, dtype, keys, write, value


def write_through(base: Any, keys: list[Any], write: str, value: Any, source: np.ndarray) -> Any:
    """Take the chain of views of ``base`` and write through the last one; return it."""
    view = base
    for key in keys:
        view = view[key]
    if write == "assign":
        view[...] = value
    elif write == "iadd":
        view += value
    elif write == "copyto":
        np.copyto(view, source)
    elif write == "fill":
        view.fill(value)
    else:
        np.add(view, 1, out=view)
    return view


@given(chain=chains())
def test_generated_view_chains(
    comm: MPI.Intracomm,
    mesh: dmesh.DeviceMesh,
    chain: tuple[tuple[int, ...], np.dtype, list[Any], str, Any],
) -> None:
    """Each chain under every layout of the mesh, against NumPy.

    Derandomized (tests/conftest.py): every rank draws the same chains.
    """
    shape, dtype, keys, write, value = chain
    data = (np.arange(int(np.prod(shape))).reshape(shape) - 5).astype(dtype)
    view_shape = shape
    for key in keys:
        view_shape = np.empty(view_shape)[key].shape
    source = (-np.arange(int(np.prod(view_shape))) - 1).reshape(view_shape).astype(dtype)
    source.reshape(-1)[::3] = value  # NaN, inf or -0.0 among the values copied, for floats
    expected = data.copy()
    expected_view = write_through(expected, keys, write, value, source)
    shared = expected_view.size == 0 or np.shares_memory(expected_view, expected)
    assert isinstance(expected_view, np.ndarray), "NumPy's chain is a view, not a scalar"
    assert shared, "NumPy's chain is a view"
    chained = "".join(f"[{k!r}]" for k in keys)
    with Verdict(comm) as verdict:
        for placements in layouts(mesh, len(shape)):
            where = f"{shape} {dtype} {placements} a{chained} {write} {value}"
            d = dmesh.distribute(data, mesh, placements)
            try:
                view = write_through(d, keys, write, value, source)
            except Exception as exc:  # dmesh agrees on errors: every rank lands here together
                verdict.check(False, f"{where}: raised {type(exc).__name__}: {exc}")
                continue
            verdict.check(*same(d.full_array(), expected, f"{where}: base"))
            verdict.check(*same(value_of(view), expected_view, f"{where}: view"))


def test_functions_of_detached_views(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.real/np.imag of a detached view write through; other view functions refuse writes.

    ``a[:, 1].real[...] = x`` writes ``a`` in NumPy; in dmesh ``np.real`` of a
    detached view is the selection of ``np.real(a)``. ``a[1].T`` shares the view's
    elements but cannot be traced back to ``a``: a write raises on every rank
    instead of being lost. ``np.reshape(a[1], ...)`` of a contiguous row is NumPy's
    view: written back through the row.
    """
    base = (np.arange(20.0) - 7).reshape(4, 5) + 1j * np.arange(20.0).reshape(4, 5)
    verdict = Verdict(comm)
    for placements in layouts(mesh, 2):
        a = dmesh.distribute(base, mesh, placements)
        want = base.copy()
        col = a[:, 1]
        col.real[...] = -3.0
        want[:, 1].real[...] = -3.0
        np.imag(a[2])[1:3] = 9.0
        want[2].imag[1:3] = 9.0
        a[0].imag = 4.0
        want[0].imag = 4.0
        verdict.equal(a.full_array(), want)
        derived = a[1].T if a[1]._view is not None else None
        if derived is not None:
            assert_raises_all(comm, NotImplementedError, derived.__setitem__, Ellipsis, 0.0)
            assert_raises_all(comm, NotImplementedError, derived.fill, 0.0)
            verdict.equal(derived.full_array(), want[1].T)
            reshaped = np.reshape(a[1], (5, 1))  # a row's reshape: written back through it
            reshaped[0] = 1.0
            np.add(reshaped, 1, out=reshaped)
            shown = np.reshape(want[1], (5, 1))
            shown[0] = 1.0
            np.add(shown, 1, out=shown)
        verdict.equal(a.full_array(), want)
    verdict.agree()


def test_writes_through_views_in_compiled_functions(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """Inside ``dmesh.compile`` a detached view is made eagerly, so writes through it land;
    in-place ops on recorded results (``b += 1`` on a LazyArray) run too."""

    @dmesh.compile
    def rows(a: Any) -> Any:
        row = a[4]
        row += 100
        a[0][...] = -1
        return a.sum()

    @dmesh.compile
    def in_place(a: Any) -> Any:
        b = a * 2
        b += 1
        c = b[1:]
        c *= 3
        if float(b.sum()) > 0:  # a graph break
            b[0] = 7
        return b

    verdict = Verdict(comm)
    for placements in layouts(mesh, 2):
        for _ in range(2):  # traced, then replayed
            a = dmesh.distribute(A55.astype(float), mesh, placements)
            total = rows(a)
            want = A55.astype(float)
            want[4] += 100
            want[0] = -1
            verdict.equal(a.full_array(), want)
            verdict.check(float(total) == want.sum(), f"sum {float(total)} != {want.sum()}")
            b = in_place(dmesh.distribute(A55.astype(float), mesh, placements))
            want = A55 * 2.0 + 1
            want[1:] *= 3
            want[0] = 7
            verdict.equal(b.full_array(), want)
    verdict.agree()


def test_in_place_on_a_row_raises_on_every_rank(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """``row += 1.5`` on an int row is a casting error in NumPy: every rank raises it, the
    ranks that hold the row and those holding identity terms alike, and nothing changes."""
    for placements in layouts(mesh, 2):
        a = dmesh.distribute(A55, mesh, placements)
        row = a[4]

        def add_in_place(row: Any = row) -> None:
            row += 1.5

        assert_raises_all(comm, TypeError, add_in_place)
        row *= np.int64(-3)
        want = A55.copy()
        want[4] *= -3
        verdict = Verdict(comm)
        verdict.equal(a.full_array(), want)
        verdict.agree()


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_views_of_partial_arrays(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, op: str) -> None:
    """Writes through views of a ``Partial(op)`` array reduce it first and land, bit for bit
    (NaN, +-inf, -0.0 in the terms' values)."""
    base = np.array([[1.0, np.nan, -np.inf, 4.0], [-0.0, 2.0, np.inf, -3.0], [5.0, -1.0, 0.0, 7.0]])
    a = dmesh.distribute(base, mesh, [dmesh.Partial(op)] + [R] * (mesh.ndim - 1))
    want = base.copy()
    row = a[1]
    row[1:3] = -9.0
    want[1, 1:3] = -9.0
    column = a[:, 2]
    column += 1
    want[:, 2] += 1
    a[0][...] = a[2]
    want[0] = want[2]
    last = a[2]
    np.multiply(last, 2, out=last)
    want[2] *= 2
    verdict = Verdict(comm)
    verdict.check(*same(a.full_array(), want, f"Partial({op})"))
    verdict.agree()


def test_read_only_views_raise_numpys_error(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.diagonal and np.broadcast_to give read-only views in NumPy: a write raises its
    ValueError on every rank, of an array and of a detached row alike, never lost."""
    for placements in layouts(mesh, 2):
        d = dmesh.distribute(A55, mesh, placements)
        for made in (np.diagonal(d), np.broadcast_to(d[1], (3, 5)), d.diagonal()):
            assert_raises_all(comm, ValueError, made.__setitem__, 0, 1, match="read-only")
        assert_all(comm, np.array_equal(d.full_array(), A55))
        v = d.view(np.int64 if A55.dtype == np.float64 else np.float64)
        assert_all(comm, np.array_equal(v.full_array(), A55.view(v.dtype)))
