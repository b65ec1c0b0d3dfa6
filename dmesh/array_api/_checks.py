"""Argument checks shared by the manipulation, statistics, searching, sorting, set,
utility and indexing groups of :mod:`dmesh.array_api`.

Every check looks at what every rank knows (types, dtypes, shapes), so an error
is raised on every rank before any communication.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentTypeError
from dmesh.darray import DArray


def require(name: str, *arrays: Any) -> None:
    """Raise ``TypeError`` on every rank unless each of ``arrays`` is a DArray."""
    for a in arrays:
        if not isinstance(a, DArray):
            raise ArgumentTypeError(
                f"{name}: expected a DArray, got {type(a).__name__}; "
                "make one with xp.asarray (no silent conversion)"
            )


def require_sequence(name: str, arrays: Any) -> list[DArray]:
    """A list of the DArrays of a tuple or list argument (``concat``, ``stack``)."""
    if not isinstance(arrays, (tuple, list)):
        raise ArgumentTypeError(
            f"{name}: expected a tuple or list of DArrays, got {type(arrays).__name__}"
        )
    require(name, *arrays)
    return list(arrays)


def require_real(name: str, x: DArray) -> None:
    """Raise ``TypeError`` unless ``x`` has a real numeric (integer or floating) dtype."""
    if x.dtype.kind not in "iuf":
        raise ArgumentTypeError(f"{name}: needs a real numeric array, got {x.dtype}")


def check_scalar(name: str, value: Any, dtype: np.dtype) -> None:
    """TypeError unless a Python scalar may join an array of ``dtype`` (standard's rules)."""
    kind = dtype.kind
    if isinstance(value, bool):
        ok = kind == "b"
    elif isinstance(value, int):
        ok = kind in "iufc"
    elif isinstance(value, float):
        ok = kind in "fc"
    elif isinstance(value, complex):
        ok = kind == "c"
    else:
        raise ArgumentTypeError(
            f"{name}: expected a DArray or a Python scalar, got {type(value).__name__}; "
            "make arrays with xp.asarray"
        )
    if not ok:
        raise ArgumentTypeError(
            f"{name}: a Python {type(value).__name__} does not combine with a {dtype} array"
        )
