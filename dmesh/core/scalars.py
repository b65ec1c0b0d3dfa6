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

__all__ = ["KEY_SCALARS", "KIND_TYPED", "PYTHON_SCALARS"]

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
