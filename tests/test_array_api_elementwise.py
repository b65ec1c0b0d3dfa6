"""The Array API standard's elementwise functions on DArrays (issue 15).

Each function is compared with ``array_api_strict`` on the same values, in one
process: hostile values (NaN, +-inf, -0.0, integer extremes) for every dtype
the standard defines the function for (a dtype ``array_api_strict`` refuses
with a TypeError is skipped), on even, uneven and empty-block layouts. NaNs
compare as NaNs (their sign is free), zeros by their sign; every rank must
hold the same bits of every result.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import array_api_strict as xs
import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Shard
from dmesh.array_api import elementwise
from helpers import BitVerdict, Verdict, assert_all, assert_raises_all, signature_mismatches

xs.set_array_api_strict_flags(api_version="2024.12")

_I64 = np.iinfo(np.int64)
_F = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e300, -5e-324, 0.75]
_C = [(np.nan, 0), (0, np.nan), (np.inf, 1), (-np.inf, -np.inf), (1, np.inf), (0, 0),
      (-0.0, 0), (0, -0.0), (1.5, -2), (-1, 0.5), (3, 4), (np.inf, np.nan)]  # fmt: skip
VALUES: dict[str, np.ndarray] = {
    "float64": np.array(_F),
    "float32": np.array([3e38 if v == 1e300 else v for v in _F], dtype=np.float32),
    "int8": np.array([-128, 127, -1, 0, 1, 2, -7, 5, 3], dtype=np.int8),
    "int64": np.array([_I64.min, _I64.max, -1, 0, 1, 2, -7, 5, 64]),
    "uint8": np.array([0, 1, 2, 255, 7, 128, 3], dtype=np.uint8),
    "complex128": np.array([complex(r, i) for r, i in _C]),
    "bool": np.array([True, False, True]),
}
# A Python scalar of each dtype's kind, for the binary functions' scalar operand.
SCALARS: dict[str, list[Any]] = {
    "float64": [-1.5, 0.0], "float32": [2.0, -0.0], "int8": [3, -1], "int64": [-2, 7],
    "uint8": [2, 0], "complex128": [1 - 2j], "bool": [True],
}  # fmt: skip


def _arity(name: str) -> int:
    return len(inspect.signature(getattr(xs, name)).parameters)


UNARY = [n for n in elementwise.__all__ if n != "clip" and _arity(n) == 1]
BINARY = [n for n in elementwise.__all__ if n != "clip" and _arity(n) == 2]


def _layouts(data: np.ndarray, mesh: dmesh.DeviceMesh) -> Iterator[tuple[str, np.ndarray, Any]]:
    """(label, values, DArray): an even split, an uneven one, and one with empty blocks."""
    shard = [Shard(0)] * mesh.ndim
    yield "even", data, dmesh.distribute(data, mesh, shard)
    grown = np.concatenate([data[:1], data])
    yield "uneven", data, dmesh.distribute(grown, mesh, shard)[1:]
    yield "empty blocks", data[:1], dmesh.distribute(data[:1], mesh, shard)


def _reference(name: str, *args: Any, **kwargs: Any) -> np.ndarray | None:
    """array_api_strict's answer as a NumPy array, or None where it refuses the call."""
    strict = [xs.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    try:
        with np.errstate(all="ignore"):
            result = getattr(xs, name)(*strict, **kwargs)
    except (TypeError, ValueError, OverflowError):
        return None  # not defined by the standard for these dtypes or values
    return np.asarray(result._array)


def _same(actual: np.ndarray, expected: np.ndarray, zero_sign: bool = True) -> bool:
    """Equal dtype, shape and values: NaN where NaN (any sign), zeros by sign (if ``zero_sign``)."""
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    if actual.dtype.kind == "c":
        return _same(actual.real, expected.real, zero_sign) and _same(
            actual.imag, expected.imag, zero_sign
        )
    if actual.dtype.kind != "f":
        return bool(np.array_equal(actual, expected))
    nan = np.isnan(expected)
    return bool(
        np.array_equal(np.isnan(actual), nan)
        and np.array_equal(actual[~nan], expected[~nan])
        and (not zero_sign or np.array_equal(np.signbit(actual[~nan]), np.signbit(expected[~nan])))
    )


def _check(
    v: BitVerdict, label: str, result: Any, expected: np.ndarray, zero_sign: bool = True
) -> None:
    """Record that ``result`` (a DArray) equals ``expected`` and its bits on this rank."""
    if not isinstance(result, dmesh.DArray):
        v.check(False, f"{label}: returned {type(result).__name__}, not a DArray")
        return
    full = np.asarray(result.full_array())
    v.check(_same(full, expected, zero_sign), f"{label}: got {full!r}, expected {expected!r}")
    v.bits(label, full)


def test_unary_functions_match_strict(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as v:
        for dtype, data in VALUES.items():
            for layout, values, x in _layouts(data, mesh):
                for name in UNARY:
                    expected = _reference(name, values)
                    if expected is not None:
                        result = getattr(elementwise, name)(x)
                        _check(v, f"{name}({dtype}, {layout})", result, expected)


def test_binary_functions_match_strict(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as v:
        for dtype, data in VALUES.items():
            n = data.size
            pairs = np.concatenate([np.repeat(data, n), np.tile(data, n)])  # every (a, b)
            for layout, values, x in _layouts(pairs, mesh):
                half = values.size // 2 if layout != "empty blocks" else 0
                x1, x2 = (x[:half], x[half:]) if half else (x, x)
                v1, v2 = (values[:half], values[half:]) if half else (values, values)
                for name in BINARY:
                    expected = _reference(name, v1, v2)
                    if expected is not None:
                        result = getattr(elementwise, name)(x1, x2)
                        _check(v, f"{name}({dtype}, {layout})", result, expected)


def test_binary_functions_with_a_python_scalar(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as v:
        for dtype, data in VALUES.items():
            for layout, values, x in _layouts(data, mesh):
                for name in BINARY:
                    func = getattr(elementwise, name)
                    for s in SCALARS[dtype]:
                        for args, ref in (((x, s), (values, s)), ((s, x), (s, values))):
                            expected = _reference(name, *ref)
                            if expected is not None:
                                label = f"{name}{tuple(type(a).__name__ for a in args)} {dtype}"
                                _check(v, f"{label} {layout} {s!r}", func(*args), expected)


@pytest.mark.parametrize(
    ("d1", "d2"),
    [
        ("int8", "int16"),
        ("uint8", "int8"),
        ("float32", "float64"),
        ("float32", "complex128"),
        ("int32", "uint32"),
        ("bool", "bool"),
    ],
)
def test_promotion_of_two_dtypes(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, d1: str, d2: str
) -> None:
    a = np.array([1, 0, 3, 2, 1]).astype(d1)
    b = np.array([2, 1, 1, 0, 1]).astype(d2)
    shard = [Shard(0)] * mesh.ndim
    x1, x2 = dmesh.distribute(a, mesh, shard), dmesh.distribute(b, mesh, shard)
    with BitVerdict(comm) as v:
        for name in ("add", "multiply", "maximum", "equal", "logical_or", "bitwise_or", "pow"):
            expected = _reference(name, a, b)
            if expected is not None:
                _check(v, f"{name}({d1}, {d2})", getattr(elementwise, name)(x1, x2), expected)


def test_pow_of_integers_to_negative_powers(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Truncated exact values (NumPy raises, on the ranks whose blocks hold one)."""
    base = np.array([1, -1, 2, 0, -3, -1, 5, 1, 7], dtype=np.int8)
    exp = np.array([-3, -3, -1, -2, 2, -2, 0, 4, -7], dtype=np.int8)
    want = np.array([int(b) ** int(e) if e >= 0 else int(1 / int(b) ** -int(e)) if b else 0
                     for b, e in zip(base, exp)], dtype=np.int8)  # fmt: skip
    with BitVerdict(comm) as v:
        for _, b, x in _layouts(base, mesh):
            for _, e, y in _layouts(exp, mesh):
                if b.size == e.size:
                    _check(v, f"pow {b.size}", elementwise.pow(x, y), want[: b.size])
            s = elementwise.pow(x, -1)
            _check(v, "pow(x, -1)", s, np.array([1, -1, 0, 0, 0, -1, 0, 1, 0], np.int8)[: b.size])
            _check(v, "pow(-1, y)", elementwise.pow(-1, x), _reference("pow", -1, np.abs(b)))


def test_clip(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    shard = [Shard(0)] * mesh.ndim
    bounds: list[Any] = [None, 0, 2, -1.5, 1000, -(2**70), np.nan]
    with BitVerdict(comm) as v:
        for dtype in ("float64", "float32", "int8", "uint8", "int64"):
            data = VALUES[dtype]
            lo = np.zeros_like(data) - (data.dtype.kind != "u")
            hi = np.full_like(data, 3)
            array_bounds = [(lo, dmesh.distribute(lo, mesh, shard)),
                            (hi, dmesh.distribute(hi, mesh, shard))]  # fmt: skip
            for layout, values, x in _layouts(data, mesh):
                for lo_s in bounds:
                    for hi_s in bounds[:4]:
                        if lo_s == 1000 and dtype in ("int8", "uint8"):
                            continue  # beyond the dtype: unspecified (here: the dtype's max)
                        expected = _reference("clip", values, min=lo_s, max=hi_s)
                        if expected is not None:
                            result = elementwise.clip(x, min=lo_s, max=hi_s)
                            label = f"clip({dtype} {layout}, {lo_s}, {hi_s})"
                            _check(v, label, result, expected, zero_sign=False)  # either zero
                if layout == "even":
                    for (ln, ld), (hn, hd) in [(array_bounds[0], array_bounds[1])]:
                        expected = _reference("clip", values, min=xs.asarray(ln), max=hn[0].item())
                        if expected is not None:
                            got = elementwise.clip(x, ld, int(hn[0]) if dtype[0] in "iu" else 3.0)
                            _check(v, f"clip({dtype}, array min)", got, expected)
                        expected = _reference("clip", values, max=xs.asarray(hn))
                        _check(v, f"clip({dtype}, array max)", elementwise.clip(x, max=hd),
                               expected)  # fmt: skip


def test_non_arrays_raise_type_error(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(np.arange(4.0), mesh, [Shard(0)] * mesh.ndim)
    with Verdict(comm) as v:
        for name in elementwise.__all__:
            func: Callable[..., Any] = getattr(elementwise, name)
            calls: list[tuple[Any, ...]] = [(np.arange(4.0),), ([1.0, 2.0],)]
            if name in BINARY:
                calls = [(np.arange(4.0), x), (x, np.arange(4.0)), (1.0, 2.0), (np.float64(1), x)]
            for args in calls:
                try:
                    func(*args)
                    v.check(False, f"{name}{tuple(type(a).__name__ for a in args)}: no error")
                except TypeError as exc:
                    v.check(name in str(exc), f"{name}: message {exc} does not name it")
    bad = dmesh.array_api.clip
    for kwargs in ({"min": np.zeros(4)}, {"max": 1j}):
        try:
            bad(x, **kwargs)
            ok = False
        except TypeError:
            ok = True
        assert_all(comm, ok, f"clip {kwargs}")


@pytest.mark.pure
def test_every_name_has_the_standard_signature() -> None:
    assert not signature_mismatches(elementwise, xs, elementwise.__all__)
    assert sorted(elementwise.__all__) == sorted(
        n
        for n in xs.__all__
        if getattr(getattr(xs, n), "__module__", "").endswith("_elementwise_functions")
    )


def test_zero_d_and_broadcasting(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    shard = [Shard(0)] * mesh.ndim
    a = np.array([[1.5], [-0.0], [np.nan]])
    b = np.array([2.0, -np.inf, 0.5, 3.0])
    x, y = dmesh.distribute(a, mesh, shard), dmesh.distribute(b, mesh, shard)
    zero_d = dmesh.distribute(np.array(-2.0), mesh, [dmesh.Replicate()] * mesh.ndim)
    with BitVerdict(comm) as v:
        for name in ("add", "atan2", "maximum", "less", "pow", "copysign"):
            func = getattr(elementwise, name)
            _check(v, f"{name} broadcast", func(x, y), _reference(name, a, b))
            _check(v, f"{name} 0-d", func(zero_d, y), _reference(name, np.array(-2.0), b))
            _check(v, f"{name} 0-d 0-d", func(zero_d, 1.5), _reference(name, np.array(-2.0), 1.5))
        for name in ("exp", "sign", "round", "abs", "isnan", "real"):
            got = getattr(elementwise, name)(zero_d)
            _check(v, f"{name} 0-d", got, _reference(name, np.array(-2.0)))


def test_out_of_range_python_int_raises_everywhere(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """An int8 array plus 300 raises on every rank, empty blocks included."""
    shard = [Shard(0)] * mesh.ndim
    for data in (np.arange(5, dtype=np.int8), np.arange(1, dtype=np.int8)):
        x = dmesh.distribute(data, mesh, shard)
        assert_raises_all(comm, OverflowError, elementwise.add, x, 300)
        assert_raises_all(comm, OverflowError, elementwise.multiply, -300, x)
