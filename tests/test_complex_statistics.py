"""var, std, the nan forms and linalg.norm on complex and hostile data agree with NumPy.

Complex data has a real variance (``mean(|x - mean(x)|**2)``, ``complex64`` to
``float32``) and a real norm; the nan forms divide in the dtype of the sum.
Every ``ord``/``axis`` case of ``np.linalg.norm`` is compared with NumPy on
one process, values, dtypes and errors (raised on every rank).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import Verdict

R = Replicate()
INF, NAN = np.inf, np.nan


def _complex(rows: int, cols: int, dtype: Any, hostile: bool) -> np.ndarray:
    rng = np.random.default_rng(rows * 31 + cols)
    data = rng.standard_normal((rows, cols)) * 3 - 1 + 1j * (rng.standard_normal((rows, cols)) - 2)
    if hostile and rows > 3 and cols > 2:
        data[1, 2] = complex(NAN, 1.0)
        data[3, 0] = complex(INF, -2.0)
        data[0, 1] = complex(-INF, INF)
        data[2, :] = complex(NAN, NAN)  # a row with no valid value
    return data.astype(dtype)


def _real(rows: int, cols: int, dtype: Any, hostile: bool) -> np.ndarray:
    return _complex(rows, cols, np.complex128, hostile).real.astype(dtype)


def _layouts(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    """Rows sharded (uneven, some blocks empty at 4 ranks), columns sharded, nested, replicated."""
    layouts = [[Shard(0)] + [R] * (mesh.ndim - 1), [Shard(1)] + [Shard(0)] * (mesh.ndim - 1)]
    return layouts + ([[Shard(0), Shard(0)], [R, R]] if mesh.ndim == 2 else [[R]])


def _tolerance(dtype: np.dtype) -> float:
    return 2e-5 if dtype in (np.float32, np.complex64) else 1e-12


class Compare:
    """Run one call on a DArray and on NumPy; record equal values and dtypes, or both raising."""

    def __init__(self, comm: MPI.Intracomm, verdict: Verdict) -> None:
        self.comm, self.verdict = comm, verdict

    def __call__(
        self, func: Callable[..., Any], a: Any, data: np.ndarray, unsupported: bool = False,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        """Compare ``func(a, **kwargs)`` with NumPy's ``func(data, **kwargs)``.

        With ``unsupported``, dmesh may also raise ``UnsupportedError`` instead.
        """
        where = f"{func.__name__}({data.dtype}{list(data.shape)}, {kwargs}) on {a.placements}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                expected: Any = np.asarray(func(data, **kwargs))
            except Exception as exc:  # NumPy's error: dmesh must raise a like one everywhere
                expected = exc
            try:
                got: Any = func(a, **kwargs)
            except Exception as exc:
                got = exc
            raised = isinstance(got, Exception)
            votes = self.comm.allgather(raised)  # agree before any collective of full_array
            if any(votes) and not all(votes):
                raise AssertionError(f"{where}: raised on ranks {votes}")
            if isinstance(expected, Exception):
                kind = TypeError if isinstance(expected, TypeError) else ValueError
                self.verdict.check(isinstance(got, kind), f"{where}: NumPy raised "
                                   f"{expected!r}, dmesh gave {got!r}")  # fmt: skip
                return
            if raised and unsupported:
                self.verdict.check(isinstance(got, NotImplementedError), f"{where}: {got!r}")
                return
            if raised:
                self.verdict.check(False, f"{where}: raised {got!r}; NumPy gives {expected}")
                return
            value = got.full_array() if isinstance(got, dmesh.DArray) else np.asarray(got)
        self.verdict.check(value.dtype == expected.dtype, f"{where}: {value.dtype}")
        tol = _tolerance(data.dtype)
        self.verdict.equal(value, expected.astype(value.dtype), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("hostile", [False, True])
def test_var_std_of_complex(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: Any, hostile: bool
) -> None:
    """The variance of complex data is real: complex64 gives float32, complex128 float64."""
    data = _complex(7, 3, dtype, hostile)
    with Verdict(comm) as verdict:
        compare = Compare(comm, verdict)
        for placements in _layouts(mesh):
            a = dmesh.distribute(data, mesh, placements)
            for func in (np.var, np.std):
                for axis in (None, 0, 1, (0, 1), -1):
                    compare(func, a, data, axis=axis)
                compare(func, a, data, axis=0, ddof=1, keepdims=True)
                compare(func, a, data, axis=1, ddof=3)  # ddof >= count: inf or NaN, as NumPy
        a = dmesh.distribute(data, mesh, _layouts(mesh)[0])
        verdict.check(a.var().dtype == data.var().dtype, f"DArray.var: {a.var().dtype}")


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float32, np.float64])
def test_nan_statistics(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: Any) -> None:
    """nanmean/nanvar/nanstd keep float32/complex64 precision; no values or dof <= 0 give NaN."""
    hostile = (
        _complex(7, 3, dtype, True) if np.dtype(dtype).kind == "c" else _real(7, 3, dtype, True)
    )
    with Verdict(comm) as verdict:
        compare = Compare(comm, verdict)
        for placements in _layouts(mesh):
            a = dmesh.distribute(hostile, mesh, placements)
            for func in (np.nanmean, np.nanvar, np.nanstd):
                for axis in (None, 0, 1):
                    compare(func, a, hostile, axis=axis)
                compare(func, a, hostile, axis=1, keepdims=True)
                if func is not np.nanmean:
                    compare(func, a, hostile, axis=0, ddof=1)
                    compare(func, a, hostile, axis=1, ddof=2)  # one valid value left: NaN


def test_statistics_of_partial_complex(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A Partial("sum") complex operand: var and norm reduce it as NumPy would the sum."""
    data = _complex(6, 4, np.complex128, False)
    placements: list[Any] = [Partial("sum")] + [Shard(1)] * (mesh.ndim - 1)
    with Verdict(comm) as verdict:
        compare = Compare(comm, verdict)
        a = dmesh.distribute(data, mesh, placements)
        compare(np.var, a, data, axis=0)
        compare(np.linalg.norm, a, data)
        compare(np.linalg.norm, a, data, axis=1)


VECTOR_ORDS: list[Any] = [None, 2, 1, 0, INF, -INF, 3, 0.5, -1, -2.5, "fro", "nuc"]
MATRIX_ORDS: list[Any] = [None, "fro", "f", 1, -1, INF, -INF, 2, -2, "nuc", 0, 3]


@pytest.mark.parametrize(
    ("kind", "hostile"),
    [("f8", False), ("f8", True), ("f4", True), ("c16", False), ("c16", True), ("c8", True),
     ("i8", False)],
)  # fmt: skip
def test_norm_every_ord_and_axis(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, kind: str, hostile: bool
) -> None:
    """Vector and matrix norms, each ord, axis and keepdims; invalid ones raise like NumPy."""
    dtype = np.dtype(kind)
    if dtype.kind == "c":
        matrix = _complex(7, 3, dtype, hostile)
    else:
        matrix = _real(7, 3, np.float64, hostile and dtype.kind == "f").astype(dtype)
    singular = not hostile  # NumPy's SVD does not converge on NaN/inf
    with Verdict(comm) as verdict:
        compare = Compare(comm, verdict)
        for placements in _layouts(mesh)[:2]:
            a = dmesh.distribute(matrix, mesh, placements)
            v, vector = a[:, 1], matrix[:, 1]  # a vector sharded like the rows, or Partial
            for ord in VECTOR_ORDS:
                for axis in (None, (-1,)):
                    compare(np.linalg.norm, v, vector, ord=ord, axis=axis)
                for axis in (0, 1):
                    compare(np.linalg.norm, a, matrix, ord=ord, axis=axis, keepdims=axis == 1)
            for ord in MATRIX_ORDS:
                if ord in (2, -2, "nuc") and not singular:
                    continue
                for axis in (None, (1, 0), (-1, -2)):
                    compare(np.linalg.norm, a, matrix, ord=ord, axis=axis, keepdims=axis is None)


def test_norm_argument_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Bad axes and orders raise NumPy's kind of error on every rank; int data is made float."""
    cube = np.arange(2 * 5 * 3, dtype=np.int8).reshape(2, 5, 3) * 7 - 60  # x*x overflows int8
    placements: list[Any] = [Shard(1)] + [Shard(2)] * (mesh.ndim - 1)
    with Verdict(comm) as verdict:
        compare = Compare(comm, verdict)
        a = dmesh.distribute(cube, mesh, placements)
        compare(np.linalg.norm, a, cube)
        compare(np.linalg.norm, a, cube, keepdims=True)
        for ord in (None, "fro", 1, INF, 2, "nuc"):
            stack = ord in (2, "nuc")  # a sharded stack of matrices has no SVD in dmesh
            compare(np.linalg.norm, a, cube, stack, ord=ord, axis=(0, 2))
            compare(np.linalg.norm, a, cube, stack, ord=ord, axis=(2, 1), keepdims=True)
            replicated = a.redistribute(mesh, [R] * mesh.ndim)
            compare(np.linalg.norm, replicated, cube, ord=ord, axis=(2, 0), keepdims=True)
        compare(np.linalg.norm, a, cube, ord=2)  # 3-D without axis: improper dimensions
        compare(np.linalg.norm, a, cube, axis=(0, 1, 2))
        compare(np.linalg.norm, a, cube, axis=(1, 1))  # duplicate axes
        compare(np.linalg.norm, a, cube, axis=(1, 3))  # out of range
        compare(np.linalg.norm, a, cube, axis=1.5)  # NumPy takes int(axis)
        compare(np.linalg.norm, a, cube, axis=[0])
        compare(np.linalg.norm, a[0], cube[0], ord="nuc", axis=1)
