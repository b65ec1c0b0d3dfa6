"""The FFT of a sharded 1-D DArray whose length has no four-step factorization: Bluestein.

With ``jk = (j^2 + k^2 - (k - j)^2) / 2`` the DFT of ``n`` points is a
convolution (Bluestein's chirp z-transform, as NumPy's pocketfft does for
large primes):

    X[k] = c[k] * sum_j (x[j] c[j]) conj(c[k - j]),    c[j] = exp(-i pi j^2 / n)

(``+i`` for the inverse). The convolution is done by three four-step FFTs of a
power-of-two length ``m >= 2n - 1`` (and at least ``blocks^2``, so that it
factors over the blocks): ``x c`` zero-padded to ``m``, and the filter ``b``
(``conj(c[j])`` at ``j`` and ``m - j`` for ``j < n``) made by each rank for its
own indices. Every chirp angle is reduced modulo ``2n`` in integers first, so
it is exact before the one rounding of ``cos``/``sin``. No rank holds more than
its block; the result is NumPy's to rounding (a few 1e-15 relative to the
largest value for the lengths tested).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = ["bluestein", "padded_length"]


def padded_length(n: int, blocks: int, factors: Any) -> int:
    """The power of two ``m >= 2n - 1`` that the four-step algorithm factors over ``blocks``."""
    m = 1
    while m < 2 * n - 1:
        m *= 2
    while factors(m, blocks) is None:
        m *= 2
    return m


def _chirp(indices: np.ndarray, n: int, inverse: bool, xp: Any) -> Any:
    """``exp(-+i pi j^2 / n)`` at ``indices``: ``j^2`` reduced mod ``2n`` before scaling."""
    square = (indices.astype(np.int64) ** 2) % (2 * n)
    angle = xp.asarray(square * ((1.0 if inverse else -1.0) * np.pi / n))
    return xp.cos(angle) + 1j * xp.sin(angle)


def _scale(n: int, inverse: bool, norm: Any) -> float:
    """NumPy's normalization of an (inverse) transform of ``n`` points."""
    if norm in (None, "backward"):
        return 1.0 / n if inverse else 1.0
    if norm == "ortho":
        return 1.0 / float(np.sqrt(n))
    return 1.0 if inverse else 1.0 / n  # "forward"


def _offset(a: DArray) -> int:
    return int(a.spec.offsets()[0]) if a.mesh.is_member else 0


def bluestein(a: DArray, n: int, inverse: bool, norm: Any, name: str, four_step: Any,
              factors: Any, blocks: int) -> DArray:  # fmt: skip
    """``np.fft.fft`` (``ifft``) of ``n`` points of the sharded 1-D ``a`` by a chirp convolution.

    ``four_step(x, m, inverse, norm, name)`` transforms the power-of-two length.
    Collective.
    """
    dtype = np.fft.fft(np.zeros(1, a.dtype)).dtype  # NumPy's: complex64 for float32
    a = a.reduce_partials()
    if a.shape[0] > n:
        a = a[:n]
    m = padded_length(n, blocks, factors)
    xp = array_module(a.local)
    j = np.arange(_offset(a), _offset(a) + a.local.shape[0])
    weighted = a.local.astype(np.complex128) * _chirp(j, n, inverse, xp)
    x = DArray(weighted, DArraySpec(a.mesh, a.spec.layout, np.dtype(np.complex128)))
    spectrum: Any = four_step(np.pad(x, (0, m - a.shape[0])), m, False, None, name)
    # The filter, in the spectrum's layout: each rank its own indices.
    k = np.arange(_offset(spectrum), _offset(spectrum) + spectrum.local.shape[0])
    mirrored = np.where(k < n, k, m - k)
    inside = (k < n) | (m - k < n)
    taps = xp.where(xp.asarray(inside), xp.conj(_chirp(np.where(inside, mirrored, 0), n,
                                                     inverse, xp)), 0)  # fmt: skip
    taps = DArray(taps.astype(np.complex128), DArraySpec(a.mesh, spectrum.spec.layout,
                                                          np.dtype(np.complex128)))  # fmt: skip
    response: Any = four_step(taps, m, False, None, name)
    product = spectrum * response.with_layout(spectrum.spec.layout)
    convolution: Any = four_step(product, m, True, None, name)[:n]
    k = np.arange(_offset(convolution), _offset(convolution) + convolution.local.shape[0])
    local = convolution.local * _chirp(k, n, inverse, xp) * _scale(n, inverse, norm)
    return DArray(local.astype(dtype), DArraySpec(a.mesh, convolution.spec.layout, dtype))
