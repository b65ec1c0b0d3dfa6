"""NumPy scalar operands (``np.float64(2)``, ``np.int8(-128)``) are cached by their type.

Their type is their dtype (``dmesh.core.scalars``), so a step keyed by it
holds for every value: the second call with another value of the same type
is served from the cache and must still give NumPy's values and dtype. Python
scalars of the same kind stay apart (NumPy 2 types them weakly, NEP 50).
Numeric 0-d arrays are keyed by their dtype, as strongly typed as NumPy scalars.
Checked on every mesh with uneven and empty blocks, hostile values (NaN,
+-inf, -0.0, integer extremes) and the same bits on every rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Shard, _call_keys
from dmesh.core.scalars import KEY_SCALARS
from dmesh.ops import pipeline
from helpers import assert_all, assert_equal_all, same_on_every_rank

# (array dtype, scalar values of one NumPy type: the first call decides, the others hit the cache)
CASES: list[tuple[Any, list[Any]]] = [
    (np.float64, [np.float64(2.5), np.float64(np.nan), np.float64(-np.inf), np.float64(-0.0)]),
    (np.float32, [np.float64(1e300), np.float64(3.0)]),  # float64 wins: strong scalar
    (np.float32, [np.float32(np.inf), np.float32(-2.0)]),
    (np.int8, [np.int8(-128), np.int8(127), np.int8(3)]),
    (np.int8, [np.int64(2**40), np.int64(-1)]),  # int64 result
    (np.int64, [np.int64(np.iinfo(np.int64).max), np.int64(np.iinfo(np.int64).min)]),
    (np.uint8, [np.uint8(255), np.int16(-300)]),
    (np.complex128, [np.complex64(1 - 2j), np.complex64(np.nan)]),
    (np.bool_, [np.bool_(True), np.bool_(False)]),
    (np.float64, [np.float16(0.5), np.float16(-np.inf)]),
]
OPS = [
    ("add", lambda a, s: a + s),
    ("rmul", lambda a, s: s * a),
    ("sub", lambda a, s: np.subtract(a, s)),
    ("less", lambda a, s: a < s),
    ("maximum", lambda a, s: np.maximum(s, a)),
]


def data(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    values = np.arange(-3, np.prod(shape) - 3).reshape(shape)
    if np.dtype(dtype).kind == "f":
        values = values * 0.75
        values.flat[:2] = [np.nan, -0.0][: values.size]
    return values.astype(dtype)


@pytest.mark.parametrize("zero_d", [False, True], ids=["scalar", "0-d array"])
@pytest.mark.parametrize("shape", [(7, 3), (1, 5), (2, 1)], ids=str)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_numpy_scalars_against_numpy(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: tuple[int, ...], case: int, zero_d: bool
) -> None:
    dtype, scalars = CASES[case]
    if zero_d:  # the same values as 0-d arrays: keyed by their dtype
        scalars = [np.array(s) for s in scalars]
    a = data(shape, dtype)
    x = dmesh.distribute(a, mesh, [Shard(0)] + [Shard(1)] * (mesh.ndim - 1))
    for name, op in OPS:
        for s in scalars:
            # (mixed types may overflow or be undefined: NumPy says what happens)
            with np.errstate(all="ignore"):
                try:
                    want = op(a, s)
                except TypeError as exc:  # NumPy's error (bool - bool), on every rank
                    with pytest.raises(type(exc)):
                        op(x, s)
                    continue
                got = op(x, s)
            assert_all(comm, got.dtype == want.dtype, f"{name} {s!r}: {got.dtype} != {want.dtype}")
            full = got.full_array()
            assert_equal_all(comm, full, want)
            same_on_every_rank(comm, full)


def test_numpy_scalars_hit_the_cache(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(np.arange(12.0).reshape(4, 3), mesh, [Shard(0)] * mesh.ndim)
    _ = x * np.float64(2)
    key = _call_keys.call_key(np.multiply, (x, np.float64(3)), {})
    assert_all(comm, key is not None and pipeline.lookup(key) is not None, "not cached")
    # Python's float and NumPy's float64 are different keys (weak and strong types).
    assert_all(comm, key != _call_keys.call_key(np.multiply, (x, 3.0), {}), "same key")


def test_zero_d_arrays_are_keyed_by_their_dtype(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """A 0-d array's step is found again for another value of its dtype, and 0-d arrays of
    other dtypes (or shapes: a 1-element 1-d array broadcasts the same but is no key) get
    their own result dtypes."""
    a = np.arange(-4, 8, dtype=np.int8).reshape(4, 3)
    x = dmesh.distribute(a, mesh, [Shard(0)] * mesh.ndim)
    _ = x + np.array(np.int8(1))
    key = _call_keys.call_key(np.add, (x, np.array(np.int8(-128))), {})
    assert_all(comm, key is not None and pipeline.lookup(key) is not None, "not cached")
    assert_all(comm, _call_keys.call_key(np.add, (x, np.array([1], np.int8)), {}) is None, "1-d")
    assert_all(comm, _call_keys.call_key(np.add, (x, np.array("x")), {}) is None, "str")
    for z in (np.array(np.int8(-128)), np.array(2.5), np.array(np.int64(2**40)), np.array(True)):
        with np.errstate(all="ignore"):
            want, got = a + z, x + z
            r_want, r_got = (z - a, z - x) if z.dtype != bool else (z ^ a, z ^ x)
        assert_all(comm, got.dtype == want.dtype, f"{z!r}: {got.dtype} != {want.dtype}")
        assert_equal_all(comm, got.full_array(), want)
        assert_equal_all(comm, r_got.full_array(), r_want)


def test_key_scalars_are_typed_by_their_type() -> None:
    for kind in KEY_SCALARS:
        if kind in (int, float, complex, bool):
            continue
        assert np.dtype(kind) == np.array(kind(1)).dtype, kind
    for excluded in (np.timedelta64, np.datetime64, np.str_, np.bytes_, np.void):
        assert excluded not in KEY_SCALARS
