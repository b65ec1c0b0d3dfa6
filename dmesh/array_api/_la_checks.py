"""Argument checks shared by the linear algebra and FFT functions of :mod:`dmesh.array_api`.

Every check reads only what every rank knows (types, dtypes, shapes), so a
bad argument raises the same error on every rank before any communication.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.array_api._checks import require
from dmesh.darray import DArray

__all__ = ["require", "require_kind", "require_negative_axis"]

# The standard's dtype categories, as NumPy dtype kinds.
KINDS = {
    "numeric": "iufc",
    "floating-point": "fc",
    "real floating-point": "f",
    "complex floating-point": "c",
}


def require_kind(name: str, kind: str, *arrays: Any) -> None:
    """Raise ``TypeError`` unless every one of ``arrays`` is a DArray of dtype category ``kind``."""
    require(name, *arrays)
    for x in arrays:
        if np.dtype(x.dtype).kind not in KINDS[kind]:
            raise TypeError(f"{name}: only {kind} dtypes are allowed, got {x.dtype}")


def require_negative_axis(name: str, axis: Any, *arrays: DArray) -> None:
    """Raise unless ``axis`` is a negative int within every array (as the standard asks)."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name}: axis must be an int, got {type(axis).__name__}")
    if axis >= 0:
        raise ValueError(f"{name}: axis must be negative (counted from the end), got {axis}")
    if axis < min(-1, *(-x.ndim for x in arrays)):
        raise ValueError(
            f"{name}: axis {axis} is out of bounds for arrays of ndim "
            f"{', '.join(str(x.ndim) for x in arrays)}"
        )
