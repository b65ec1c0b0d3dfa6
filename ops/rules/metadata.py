"""NumPy functions of a DArray's dtype only: ``np.result_type``, ``np.can_cast``,
``np.min_scalar_type``.

They need no data (every rank knows the dtype), so each is NumPy's function of
the dtypes; NumPy's own code calls them on its arguments (``np.cov`` asks
``np.result_type(m, np.float64)``). A 0-d DArray counts as an array, not as a
Python scalar: NEP 50 gives its dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.darray import DArray
from dmesh.ops.registry import decompose


def _dtype_of(x: Any) -> Any:
    return x.dtype if isinstance(x, DArray) else x


@decompose(np.result_type)
def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """``np.result_type`` with each DArray standing for its dtype."""
    return np.result_type(*[_dtype_of(x) for x in arrays_and_dtypes])


@decompose(np.can_cast)
def can_cast(from_: Any, to: Any, casting: Any = "safe") -> bool:
    """``np.can_cast`` from a DArray's dtype."""
    return bool(np.can_cast(_dtype_of(from_), _dtype_of(to), casting))


@decompose(np.min_scalar_type)
def min_scalar_type(a: Any) -> np.dtype:
    """``np.min_scalar_type`` of a DArray: its dtype (NumPy's answer for arrays of 1+ dims).

    NumPy looks at the value only for a 0-d array; a 0-d DArray's value is a
    collective read, as ``a.item()``.
    """
    if isinstance(a, DArray) and a.ndim == 0:
        value: np.dtype = np.min_scalar_type(np.asarray(a.item(), a.dtype))
        return value
    dtype: np.dtype = np.dtype(_dtype_of(a))
    return dtype
