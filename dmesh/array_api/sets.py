"""Set functions of the Array API standard (2024.12) on DArrays (``unique_*``).

They map onto NumPy 2's ``np.unique_all``/``unique_counts``/``unique_inverse``/
``unique_values``, which dispatch to the distributed rules: the unique values
sorted, NaNs each distinct (``equal_nan=False``), ``inverse_indices`` shaped
like ``x``. The results are named tuples with the standard's field names.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import numpy as np

from dmesh.array_api._checks import require
from dmesh.darray import DArray

__all__: list[str] = ["unique_all", "unique_counts", "unique_inverse", "unique_values"]

_np: Any = np  # NumPy untyped: its functions return DArrays here, by dispatch


class UniqueAllResult(NamedTuple):
    """What ``unique_all`` returns."""

    values: DArray
    indices: DArray
    inverse_indices: DArray
    counts: DArray


class UniqueCountsResult(NamedTuple):
    """What ``unique_counts`` returns."""

    values: DArray
    counts: DArray


class UniqueInverseResult(NamedTuple):
    """What ``unique_inverse`` returns."""

    values: DArray
    inverse_indices: DArray


def unique_all(x: DArray, /) -> UniqueAllResult:
    """``np.unique_all``: unique values, first indices, inverse indices (x's shape), counts."""
    require("unique_all", x)
    r = _np.unique_all(x)
    return UniqueAllResult(r.values, r.indices, r.inverse_indices, r.counts)


def unique_counts(x: DArray, /) -> UniqueCountsResult:
    """``np.unique_counts``: unique values and how often each occurs."""
    require("unique_counts", x)
    r = _np.unique_counts(x)
    return UniqueCountsResult(r.values, r.counts)


def unique_inverse(x: DArray, /) -> UniqueInverseResult:
    """``np.unique_inverse``: unique values and inverse indices (x's shape)."""
    require("unique_inverse", x)
    r = _np.unique_inverse(x)
    return UniqueInverseResult(r.values, r.inverse_indices)


def unique_values(x: DArray, /) -> DArray:
    """``np.unique_values``: the unique values, sorted, each NaN kept."""
    require("unique_values", x)
    return cast(DArray, _np.unique_values(x))
