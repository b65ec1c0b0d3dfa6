"""Window functions as DArrays: ``hanning``, ``hamming``, ``blackman``, ``bartlett``, ``kaiser``.

Each rank computes its block from its global index range (no communication)
with NumPy's own formulas, term by term, so the values are NumPy's bit for
bit: NumPy builds ``n = arange(1 - M, M, 2)`` in float64, whose element ``i``
is ``(1 - M) + i * 2.0`` (``arange`` fills ``start + i * delta``), then
applies elementwise functions to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh.creation import _build, _xp_of
from dmesh.darray import DArray

__all__ = ["bartlett", "blackman", "hamming", "hanning", "kaiser"]

F64 = np.dtype(np.float64)


def _symmetric(
    M: Any, formula: Callable[[Any, Any, Any], Any], mesh: Any, placements: Any
) -> DArray:
    """A window of ``formula(xp, n, M)`` over ``n = arange(1 - M, M, 2)`` (float64 ``M``)."""
    m = np.array([0.0, M])[1]  # NumPy's "at least float64" conversion of M
    if m < 1:
        length = 0
    elif m == 1:
        length = 1
    else:
        length = max(0, math.ceil((m - (1 - m)) / 2))

    def fill(slices: tuple[slice, ...], local: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        if m == 1:
            return xp.ones(local, F64)
        i = xp.arange(slices[0].start, slices[0].stop, dtype=np.float64)
        return formula(xp, (1 - m) + i * 2.0, m)

    return _build((length,), mesh, placements, F64, fill)


def hanning(M: Any, *, mesh: Any = None, placements: Any = None) -> DArray:
    """``np.hanning(M)``: ``0.5 + 0.5 cos(pi n / (M - 1))``."""
    return _symmetric(M, lambda xp, n, m: 0.5 + 0.5 * xp.cos(np.pi * n / (m - 1)), mesh, placements)


def hamming(M: Any, *, mesh: Any = None, placements: Any = None) -> DArray:
    """``np.hamming(M)``: ``0.54 + 0.46 cos(pi n / (M - 1))``."""
    return _symmetric(
        M, lambda xp, n, m: 0.54 + 0.46 * xp.cos(np.pi * n / (m - 1)), mesh, placements
    )


def blackman(M: Any, *, mesh: Any = None, placements: Any = None) -> DArray:
    """``np.blackman(M)``: ``0.42 + 0.5 cos(pi n / (M - 1)) + 0.08 cos(2 pi n / (M - 1))``."""

    def formula(xp: Any, n: Any, m: Any) -> Any:
        return 0.42 + 0.5 * xp.cos(np.pi * n / (m - 1)) + 0.08 * xp.cos(2.0 * np.pi * n / (m - 1))

    return _symmetric(M, formula, mesh, placements)


def bartlett(M: Any, *, mesh: Any = None, placements: Any = None) -> DArray:
    """``np.bartlett(M)``: the triangular window ``1 - |n| / (M - 1)``, as NumPy writes it."""

    def formula(xp: Any, n: Any, m: Any) -> Any:
        return xp.where(xp.less_equal(n, 0), 1 + n / (m - 1), 1 - n / (m - 1))

    return _symmetric(M, formula, mesh, placements)


def kaiser(M: Any, beta: Any, *, mesh: Any = None, placements: Any = None) -> DArray:
    """``np.kaiser(M, beta)``: ``i0(beta sqrt(1 - ((n - alpha) / alpha)^2)) / i0(beta)``."""
    values = np.array([0.0, M, beta])
    m, b = values[1], values[2]
    length = 1 if m == 1 else max(0, math.ceil(m))  # NumPy's arange(0, M)

    def fill(slices: tuple[slice, ...], local: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        if m == 1:
            return xp.ones(local, F64)
        n = xp.arange(slices[0].start, slices[0].stop, dtype=np.float64)
        alpha = (m - 1) / 2.0
        with np.errstate(all="ignore"):  # as NumPy's, where M < 2 gives NaN
            return np.i0(b * xp.sqrt(1 - ((n - alpha) / alpha) ** 2.0)) / np.i0(b)

    return _build((length,), mesh, placements, F64, fill)
