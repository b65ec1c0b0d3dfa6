"""Axis arguments out of range or repeated raise NumPy's error on every rank, not a
wrapped-around answer (``axis % ndim``); valid negative axes still give NumPy's result.

Covers np.squeeze, np.expand_dims (ops/kernels/views.py), np.sort/np.argsort
(ops/kernels/sort.py), np.diff and the cumulative scans (ops/kernels/scan.py),
np.concatenate/np.stack (ops/rules/joining.py), np.trapezoid
(ops/rules/differences.py), the reductions (ops/rules/reductions.py),
np.partition (ops/kernels/partition.py), np.fft (ops/kernels/fft.py) and the
array API's sort (dmesh/array_api/sorting.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Shard
from dmesh.collectives.errors import ArgumentError, AxisArgumentError
from helpers import assert_equal_all, assert_raises_all

AxisError = np.exceptions.AxisError
X3 = np.arange(24.0).reshape(4, 3, 2) * 1.5 - 7.0
X3[1, 2, 0], X3[3, 0, 1] = -0.0, np.nan

Op = Callable[[Any, Any], Any]

# name -> f(a, axis); each takes one axis (or a tuple where the function does).
OPS: dict[str, Op] = {
    "sort": lambda a, ax: np.sort(a, axis=ax),
    "argsort": lambda a, ax: np.argsort(a, axis=ax, kind="stable"),
    "diff": lambda a, ax: np.diff(a, axis=ax),
    "cumsum": lambda a, ax: np.cumsum(a, axis=ax),
    "concatenate": lambda a, ax: np.concatenate([a, a], axis=ax),
    "stack": lambda a, ax: np.stack([a, a], axis=ax),
    "trapezoid": lambda a, ax: np.trapezoid(a, axis=ax),
    "sum": lambda a, ax: np.sum(a, axis=ax),
    "max": lambda a, ax: np.max(a, axis=ax),
    "partition": lambda a, ax: np.take(np.partition(a, 1, axis=ax), 1, axis=ax),
    "fft": lambda a, ax: np.fft.fft(a, axis=ax),
    "expand_dims": lambda a, ax: np.expand_dims(a, ax),
    "argmax": lambda a, ax: np.argmax(a, axis=ax),
    "average": lambda a, ax: np.average(a, axis=ax),
    "median": lambda a, ax: np.median(a, axis=ax),
    "add.accumulate": lambda a, ax: np.add.accumulate(a, axis=ax),
}


def _inputs(mesh: Any) -> list[Any]:
    """X3 sharded along its first and its last axis, and unevenly along the first."""
    s0 = dmesh.distribute(X3, mesh, [Shard(0)] * mesh.ndim)
    s2 = dmesh.distribute(X3, mesh, [Shard(2)] * mesh.ndim)
    uneven = dmesh.distribute(np.concatenate([X3[:1], X3]), mesh, [Shard(0)] * mesh.ndim)[1:]
    return [s0, s2, uneven]


def _bad_axis_error(name: str, axis: int) -> type[BaseException]:
    """The class NumPy raises for ``OPS[name]`` of X3 at ``axis``."""
    try:
        OPS[name](X3, axis)
    except (ValueError, IndexError, TypeError) as exc:
        return type(exc)
    raise AssertionError(f"NumPy's {name} accepted axis {axis}")


@pytest.mark.parametrize("name", sorted(OPS))
def test_out_of_range_axis_raises_numpys_error(comm: MPI.Comm, mesh: Any, name: str) -> None:
    for d in _inputs(mesh):
        extra = 1 if name in ("stack", "expand_dims") else 0  # axes of the result
        for axis in (3 + extra, -4 - extra, 7):
            expected = _bad_axis_error(name, axis)
            assert_raises_all(comm, expected, OPS[name], d, axis)
            if expected is AxisError:  # dmesh's own class is also an ArgumentError
                assert_raises_all(comm, ArgumentError, OPS[name], d, axis)


@pytest.mark.parametrize("name", sorted(OPS))
def test_negative_axes_give_numpys_result(comm: MPI.Comm, mesh: Any, name: str) -> None:
    extra = 1 if name in ("stack", "expand_dims") else 0
    for d in _inputs(mesh)[::2]:
        for axis in (-1, -2, -3 - extra):
            expected = OPS[name](X3, axis)
            actual = np.asarray(OPS[name](d, axis))  # sums: another order of terms
            assert_equal_all(comm, actual, expected, rtol=1e-13, atol=1e-13)


def test_squeeze(comm: MPI.Comm, mesh: Any) -> None:
    ones = np.full((1, 3, 1), 2.5)
    d = dmesh.distribute(ones, mesh, [Shard(1)] * mesh.ndim)
    for axis in (3, -4, (0, 3)):
        assert_raises_all(comm, AxisError, np.squeeze, d, axis=axis)
    for axis in ((0, 0), (0, -3), (2, -1)):
        assert_raises_all(comm, ValueError, np.squeeze, d, axis=axis, match="duplicate")
    assert_raises_all(comm, ValueError, np.squeeze, d, axis=1, match="size not equal to one")
    assert_raises_all(comm, TypeError, np.squeeze, d, axis=[0])  # as NumPy: no lists
    for axis in (None, 0, -1, -3, (0, -1), ()):
        assert_equal_all(comm, np.asarray(np.squeeze(d, axis=axis)), np.squeeze(ones, axis))
    scalar = dmesh.distribute(np.array(1.5), mesh, [dmesh.Replicate()] * mesh.ndim)
    assert_raises_all(comm, AxisError, np.squeeze, scalar, 0)  # was a ZeroDivisionError
    assert_equal_all(comm, np.asarray(np.squeeze(scalar, ())), np.array(1.5))


def test_expand_dims(comm: MPI.Comm, mesh: Any) -> None:
    v = np.arange(4.0)
    d = dmesh.distribute(v, mesh, [Shard(0)] * mesh.ndim)
    for axis in (2, -3, (0, 3), [0, -4]):
        assert_raises_all(comm, AxisError, np.expand_dims, d, axis)  # 1-D: was shape (4, 1)
    for axis in ((0, 0), (0, -3), [1, -2]):
        assert_raises_all(comm, ValueError, np.expand_dims, d, axis, match="repeated axis")
    for axis in (0, 1, -1, -2, (0, -1), [2, 0], (-1, -2, 0)):
        assert_equal_all(comm, np.asarray(np.expand_dims(d, axis)), np.expand_dims(v, axis))
        assert np.expand_dims(d, axis).shape == np.expand_dims(v, axis).shape


def test_zero_d_arrays(comm: MPI.Comm, mesh: Any) -> None:
    scalar = dmesh.distribute(np.array(1.5), mesh, [dmesh.Replicate()] * mesh.ndim)
    assert_raises_all(comm, AxisError, np.sort, scalar)  # axis=-1 of a 0-d array
    assert_raises_all(comm, ValueError, np.diff, scalar, match="at least one dimensional")
    assert_raises_all(comm, ValueError, np.concatenate, [scalar, scalar], match="zero-dim")
    assert_equal_all(comm, np.asarray(np.sort(scalar, axis=None)), np.array([1.5]))
    assert_equal_all(comm, np.asarray(np.stack([scalar, scalar], -1)), np.array([1.5, 1.5]))


def test_axis_types_and_class(comm: MPI.Comm, mesh: Any) -> None:
    d = _inputs(mesh)[0]
    for name in ("sort", "diff", "cumsum", "concatenate"):
        assert_raises_all(comm, TypeError, OPS[name], d, 1.0)  # NumPy refuses float axes
    assert_raises_all(comm, IndexError, OPS["sum"], d, 3)  # AxisError is an IndexError too
    exc = assert_raises_all(comm, AxisArgumentError, OPS["sum"], d, -4)
    assert str(exc) == "np.sum: axis -4 is out of bounds for array of dimension 3"


def test_array_api_sort_axis(comm: MPI.Comm, mesh: Any) -> None:
    xp = dmesh.array_api
    d = _inputs(mesh)[0]
    for axis in (3, -4):
        assert_raises_all(comm, AxisError, xp.sort, d, axis=axis)
        assert_raises_all(comm, AxisError, xp.argsort, d, axis=axis)
    assert_equal_all(comm, np.asarray(xp.sort(d, axis=-3)), np.sort(X3, axis=0))
