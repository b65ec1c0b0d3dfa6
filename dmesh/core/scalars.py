"""The scalar operands whose type says all a cached op needs to know of them.

A step of the dispatch cache is keyed by its operands' specs and, for a
scalar, its type: the decision never depends on a scalar's value, and its
dtype must follow from the type. It does for Python's ``int``, ``float``,
``complex`` and ``bool`` (NumPy 2 types them by kind, as "weak" scalars:
NEP 50) and for NumPy's numbers and ``bool_`` (``np.float64(2)``,
``np.int32(7)``: the type is the dtype). A NumPy scalar is keyed only from
NumPy 2 on: before, NumPy chose a result dtype by a scalar's value. Not
``datetime64``/``timedelta64`` (the unit is in the dtype, not the type), nor
strings, bytes or void scalars (their size is in the dtype).
"""

from __future__ import annotations

import numpy as np

__all__ = ["KEY_SCALARS", "KIND_TYPED", "PYTHON_SCALARS", "power_ufunc"]

PYTHON_SCALARS: frozenset[type] = frozenset({int, float, complex, bool})
# Whether NumPy types scalars by kind, not value (NEP 50: NumPy 2 on).
KIND_TYPED = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def _numpy_scalar_types() -> frozenset[type]:
    if not KIND_TYPED:
        return frozenset()
    kinds = {
        t
        for t in set(np.sctypeDict.values())
        if issubclass(t, (np.number, np.bool_)) and not issubclass(t, np.timedelta64)
    }  # (timedelta64 is a signed integer type to NumPy)
    return frozenset(kinds)


# Scalar types a step's key may hold (for every other operand the call is
# planned afresh, or keyed by what it is: a DArray by its spec).
KEY_SCALARS: frozenset[type] = PYTHON_SCALARS | _numpy_scalar_types()


# NumPy's ``ndarray ** scalar`` (``fast_scalar_power``) from 2.3 on: an exact Python
# int -1 or 2, or an exact float 0.5, on a float or complex array calls the unary
# ufunc, whose complex results differ from np.power's in the last bits.
EXACT_FAST_POWERS = np.lib.NumpyVersion(np.__version__) >= "2.3.0"
_FAST_POWERS: dict[tuple[type, object], np.ufunc] = {
    (int, -1): np.reciprocal, (int, 2): np.square, (float, 0.5): np.sqrt,
}  # fmt: skip
# Before 2.3 (NumPy 1 too): any real scalar of these values; square alone for other dtypes.
_FAST_POWERS_1: dict[float, np.ufunc] = {
    1.0: np.positive, -1.0: np.reciprocal, 0.5: np.sqrt, 2.0: np.square,
}  # fmt: skip


def power_ufunc(dtype: np.dtype, exponent: object) -> np.ufunc:
    """The ufunc NumPy's ``array ** exponent`` calls for an array of ``dtype``: np.power,
    or the unary ufunc (``np.square``, ``np.sqrt``, ``np.reciprocal``) of its fast path."""
    kind = type(exponent)
    if EXACT_FAST_POWERS:
        fast = _FAST_POWERS.get((kind, exponent)) if kind is int or kind is float else None
        return fast if fast is not None and dtype.kind in "fc" else np.power
    return _power_ufunc_before_2_3(dtype, exponent)


def _power_ufunc_before_2_3(dtype: np.dtype, exponent: object) -> np.ufunc:
    """``power_ufunc`` as NumPy before 2.3 chose: by the exponent's value, for any Python
    or NumPy int or float (``np.float64(2.0)`` squares a float32 array, keeping float32)."""
    kind = type(exponent)
    if not issubclass(kind, (int, float, np.integer, np.floating)):
        return np.power
    value = float(exponent)  # type: ignore[arg-type]
    if dtype.kind in "fc":
        return _FAST_POWERS_1.get(value, np.power)
    # An integer array to a float 2.0: NumPy squares it cast to float64, np.power's bits.
    integral = issubclass(kind, (int, np.integer))
    return np.square if value == 2.0 and integral else np.power
