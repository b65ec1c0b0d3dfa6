"""Data types and data type functions of the Array API standard (2024.12).

The dtypes are NumPy's scalar types, as in NumPy's own namespace
(``xp.float64 is np.float64``, equal to ``x.dtype`` of a float64 array).
Promotion follows the standard's table for dtypes of one kind (no
value-based casting); between kinds, where the standard leaves it to the
library, :func:`result_type` and :func:`can_cast` give NumPy's answers (so
``can_cast(a, b)`` holds exactly where ``result_type(a, b) == b``).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmesh.darray import DArray
from dmesh.darray_array_api import Sharding

__all__ = [
    "astype",
    "bool",
    "can_cast",
    "complex64",
    "complex128",
    "finfo",
    "float32",
    "float64",
    "iinfo",
    "int8",
    "int16",
    "int32",
    "int64",
    "isdtype",
    "result_type",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]  # fmt: skip

# The dtype names are NumPy's scalar types, as in NumPy's own namespace
# (``xp.float64 is np.float64``, equal to ``np.dtype("float64")``, which is what
# ``x.dtype`` gives). Not dtype instances: ``np.dtype(None)`` is float64, so an
# instance compares equal to ``None``, which a library's ``table.get(key) == dtype``
# would read as a match. ``bool`` is set through globals() so that the builtin
# stays usable in this module as ``builtins.bool``.
globals()["bool"] = np.bool_
int8 = np.int8
int16 = np.int16
int32 = np.int32
int64 = np.int64
uint8 = np.uint8
uint16 = np.uint16
uint32 = np.uint32
uint64 = np.uint64
float32 = np.float32
float64 = np.float64
complex64 = np.complex64
complex128 = np.complex128

# The same as dtype instances, for the checks below.
BOOL = np.dtype(np.bool_)
SIGNED: tuple[np.dtype, ...] = tuple(np.dtype(t) for t in (int8, int16, int32, int64))
UNSIGNED: tuple[np.dtype, ...] = tuple(np.dtype(t) for t in (uint8, uint16, uint32, uint64))
REAL = (np.dtype(float32), np.dtype(float64))
COMPLEX = (np.dtype(complex64), np.dtype(complex128))
DTYPES: tuple[np.dtype, ...] = (BOOL, *SIGNED, *UNSIGNED, *REAL, *COMPLEX)
KINDS: dict[str, tuple[np.dtype, ...]] = {
    "bool": (BOOL,),
    "signed integer": SIGNED,
    "unsigned integer": UNSIGNED,
    "integral": SIGNED + UNSIGNED,
    "real floating": REAL,
    "complex floating": COMPLEX,
    "numeric": SIGNED + UNSIGNED + REAL + COMPLEX,
}


def as_dtype(dtype: Any, function: str) -> np.dtype:
    """``dtype`` as one of the standard's dtypes, or a ``TypeError`` naming ``function``."""
    if isinstance(dtype, np.dtype) and dtype in DTYPES:
        return dtype
    try:
        dt: np.dtype | None = None
        if dtype is not None and not isinstance(dtype, str):
            dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt not in DTYPES:
        raise TypeError(
            f"{function}: expected a data type of the Array API standard (xp.float64, "
            f"xp.int32, xp.bool...), got {dtype!r}"
        )
    return dt


def _dtype_of(value: Any, function: str) -> np.dtype:
    """The dtype of a DArray or a dtype (no Python scalars)."""
    if isinstance(value, DArray):
        return np.dtype(value.dtype)
    return as_dtype(value, function)


def _same_kind(a: np.dtype, b: np.dtype) -> builtins.bool:
    """Whether the standard's promotion table has an entry for ``a`` and ``b``."""
    groups = ((BOOL,), SIGNED + UNSIGNED, REAL + COMPLEX)
    if (a == uint64 and b in SIGNED) or (b == uint64 and a in SIGNED):
        return False
    return any(a in g and b in g for g in groups)


def astype(
    x: DArray, dtype: Any, /, *, copy: builtins.bool = True, device: Sharding | None = None
) -> DArray:
    """``x.astype(dtype, copy=copy)``, then moved to ``device`` (complex to real refused)."""
    if not isinstance(x, DArray):
        raise TypeError(f"astype: expected a DArray, got {type(x).__name__}; use xp.asarray")
    dt = as_dtype(dtype, "astype")
    if device is not None and not isinstance(device, Sharding):
        raise TypeError(
            f"astype: device must be a dmesh.array_api.Sharding, got {type(device).__name__}"
        )
    if np.dtype(x.dtype) in COMPLEX and dt not in COMPLEX:
        raise TypeError(
            f"astype: the standard does not permit casting {x.dtype} to {dt}; "
            "take xp.real, xp.imag or xp.abs first"
        )
    out = x.astype(dt, copy=copy)
    if device is not None and device != out.device:
        out = out.to_device(device)
    return out


def can_cast(from_: Any, to: Any, /) -> builtins.bool:
    """Whether ``from_`` promotes to ``to``: the standard's table within a kind, NumPy's
    safe casting between kinds (``bool`` to ``float64``, ``int32`` to ``float64``)."""
    a = _dtype_of(from_, "can_cast")
    b = as_dtype(to, "can_cast")
    if _same_kind(a, b):
        return builtins.bool(np.promote_types(a, b) == b)
    return builtins.bool(np.can_cast(a, b, casting="safe"))


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The standard's promotion of DArrays, dtypes and Python scalars (no value-based casting).

    Between kinds (where the standard leaves promotion to the library) the answer
    is NumPy's; Python scalars must match the kind of the arrays and dtypes.
    """
    dtypes = [
        a for a in arrays_and_dtypes if not isinstance(a, (builtins.bool, int, float, complex))
    ]
    scalars = [a for a in arrays_and_dtypes if isinstance(a, (builtins.bool, int, float, complex))]
    if not dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    out = _dtype_of(dtypes[0], "result_type")
    for d in dtypes[1:]:
        out = np.promote_types(out, _dtype_of(d, "result_type"))
    for s in scalars:
        out = _promote_scalar(out, s)
    return out


def _promote_scalar(dt: np.dtype, s: Any) -> np.dtype:
    kind = "bool" if isinstance(s, builtins.bool) else type(s).__name__
    if isinstance(s, builtins.bool):
        ok = dt == BOOL
    elif isinstance(s, int):
        ok = dt != BOOL
        if dt in SIGNED + UNSIGNED and not np.iinfo(dt).min <= s <= np.iinfo(dt).max:
            raise OverflowError(f"result_type: the Python int {s} is out of range for {dt}")
    elif isinstance(s, float):
        ok = dt in REAL + COMPLEX
    else:
        if dt in REAL:
            return np.promote_types(dt, complex64)
        ok = dt in COMPLEX
    if not ok:
        raise TypeError(f"result_type: a Python {kind} does not promote with {dt}")
    return dt


@dataclass(frozen=True)
class finfo_object:  # noqa: N801 (the standard's name)
    """Machine limits of a floating-point dtype (complex: of its real components)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


@dataclass(frozen=True)
class iinfo_object:  # noqa: N801 (the standard's name)
    """Machine limits of an integer dtype."""

    bits: int
    max: int
    min: int
    dtype: np.dtype


def finfo(type: Any, /) -> finfo_object:
    """``np.finfo`` as the standard's object (Python floats; complex: the real dtype's)."""
    dt = _dtype_of(type, "finfo")
    if dt not in REAL + COMPLEX:
        raise TypeError(f"finfo: expected a floating-point dtype, got {dt}")
    f = np.finfo(dt)
    return finfo_object(
        int(f.bits), float(f.eps), float(f.max), float(f.min), float(f.smallest_normal),
        np.dtype(f.dtype),
    )  # fmt: skip


def iinfo(type: Any, /) -> iinfo_object:
    """``np.iinfo`` as the standard's object (Python ints)."""
    dt = _dtype_of(type, "iinfo")
    if dt not in SIGNED + UNSIGNED:
        raise TypeError(f"iinfo: expected an integer dtype, got {dt}")
    i = np.iinfo(dt)
    return iinfo_object(int(i.bits), int(i.max), int(i.min), dt)


def isdtype(dtype: Any, kind: Any) -> builtins.bool:
    """Whether ``dtype`` is ``kind``: a dtype, a kind name ('integral', 'numeric'...) or a tuple."""
    dt = as_dtype(dtype, "isdtype")
    if isinstance(kind, tuple):
        return any(isdtype(dt, k) for k in kind)
    if isinstance(kind, str):
        if kind not in KINDS:
            raise ValueError(
                f"isdtype: unknown kind {kind!r}; expected one of {', '.join(map(repr, KINDS))}"
            )
        return dt in KINDS[kind]
    if isinstance(kind, np.dtype) or (
        isinstance(kind, builtins.type) and kind is not builtins.bool
    ):
        return dt == as_dtype(kind, "isdtype")
    raise TypeError(f"isdtype: kind must be a dtype, a kind name or a tuple of them, got {kind!r}")
