"""``fftfreq`` and ``rfftfreq`` as DArrays: the sample frequencies of a DFT.

Each rank computes its block from its global index range (no communication),
by NumPy's formula: the integer frequency index times ``1 / (n * d)``, so the
values are NumPy's bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError
from dmesh.creation import _build, _dtype, _xp_of
from dmesh.darray import DArray

__all__ = ["fftfreq", "rfftfreq"]


def _scale(name: str, n: Any, d: Any) -> tuple[int, Any, np.dtype]:
    """``n``, NumPy's ``val = 1.0 / (n * d)`` and the result dtype (int64 index times val)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ArgumentError(f"{name}: n should be an integer, got {n!r}")
    val = 1.0 / (n * d)  # ZeroDivisionError for n * d == 0, as NumPy, on every rank
    return int(n), val, _dtype((np.empty(0, np.int64) * val).dtype)


def fftfreq(n: int, d: Any = 1.0, *, mesh: Any = None, placements: Any = None) -> DArray:
    """``np.fft.fftfreq(n, d)``: ``[0, 1, ..., n//2 - 1 or so, -(n//2), ..., -1] / (n * d)``."""
    length, val, dt = _scale("fftfreq", n, d)
    positive = (length - 1) // 2 + 1  # indices below it are non-negative frequencies

    def fill(slices: tuple[slice, ...], local: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        index = xp.arange(slices[0].start, slices[0].stop, dtype=np.int64)
        return (xp.where(index < positive, index, index - length) * val).astype(dt, copy=False)

    return _build((length,), mesh, placements, dt, fill)


def rfftfreq(n: int, d: Any = 1.0, *, mesh: Any = None, placements: Any = None) -> DArray:
    """``np.fft.rfftfreq(n, d)``: ``[0, 1, ..., n//2] / (n * d)``."""
    length, val, dt = _scale("rfftfreq", n, d)

    def fill(slices: tuple[slice, ...], local: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        index = xp.arange(slices[0].start, slices[0].stop, dtype=np.int64)
        return (index * val).astype(dt, copy=False)

    return _build((length // 2 + 1,), mesh, placements, dt, fill)
