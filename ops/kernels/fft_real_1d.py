"""``rfft``/``irfft`` of an even number ``n = 2h`` of points of a sharded 1-D DArray, as a
complex FFT of ``h`` points: half the work and half the bytes of the ``n``-point one.

Forward: the signal's pairs ``z[j] = x[2j] + i x[2j+1]`` are each block seen as complex
(a view, once the blocks start at even offsets), ``Z = FFT_h(z)`` (the four-step
algorithm of :mod:`dmesh.ops.kernels.fft_1d`), and with ``W[k] = conj(Z[(h - k) mod h])``
(the spectrum mirrored: one exchange of the blocks and one of a cell),

    X[k] = (Z[k] + W[k]) / 2 - i w_n^k (Z[k] - W[k]) / 2,   k < h,
    X[h] = Re Z[0] - Im Z[0],

so the half spectrum comes out in balanced blocks (the ``n``-point transform cut to
``h + 1`` left nearly all of it on the first ranks). Inverse: with
``A[k] = X[k]`` and ``B[k] = conj(X[h - k])`` (the imaginary parts of ``X[0]`` and
``X[h]`` dropped, as NumPy's ``irfft`` ignores them),

    Z[k] = (A[k] + B[k]) / 2 + i w_n^(-k) (A[k] - B[k]) / 2,

``z = IFFT_h(Z)`` and each block of ``z`` seen as pairs of reals is the signal's
block. NumPy's values to rounding (about 1e-15 relative). :func:`applies` says when
(``n`` even, at least two points per block pair, a real input to ``rfft``, a
half spectrum of at least ``h + 1`` points to ``irfft``); the other calls keep the
``n``-point path.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.core.layout import Layout, balanced_bounds, sharding_mesh_dims
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = ["applies", "irfft_half", "rfft_half"]

# (n, first k, end k, sign, dtype, array module) -> w_n^(sign k) for the block's k
_twiddle_cache: dict[tuple[Any, ...], Any] = {}
TWIDDLE_CACHE = 8


def _levels(layout: Layout) -> tuple[int, ...]:
    return tuple(layout.mesh_shape[m] for m in sharding_mesh_dims(layout.placements, 0))


def applies(a: DArray, kind: str, n: int) -> bool:
    """Whether ``np.fft.<kind>`` of ``n`` points of ``a`` takes the half-length transform."""
    blocks = math.prod(_levels(a.spec.layout))
    if n % 2 or n // 2 < 2 * blocks:
        return False
    if kind == "rfft":
        return a.dtype.kind in "biuf" and a.shape[0] >= n
    return kind == "irfft" and a.dtype.kind in "fc" and a.shape[0] >= n // 2 + 1


def _twiddles(n: int, lo: int, hi: int, sign: float, like: Any) -> Any:
    """``exp(sign 2 pi i k / n)`` for ``lo <= k < hi`` in ``like``'s dtype (cached)."""
    xp = array_module(like)
    key = (n, lo, hi, sign, like.dtype, xp.__name__)
    found = _twiddle_cache.get(key)
    if found is None:
        angle = xp.arange(lo, hi, dtype=np.float64) * (sign * 2.0 * np.pi / n)
        found = (xp.cos(angle) + 1j * xp.sin(angle)).astype(like.dtype)
        if len(_twiddle_cache) >= TWIDDLE_CACHE:
            _twiddle_cache.clear()
        _twiddle_cache[key] = found
    return found


def _halves(layout: Layout, h: int) -> Layout:
    """The balanced layout of ``h`` points on ``layout``'s mesh dims."""
    return Layout(
        layout.mesh_shape, layout.placements, (h,), (balanced_bounds(h, _levels(layout)),)
    )


def _scale(norm: Any, n: int, forward: bool) -> float:
    """The factor that turns the unnormalized (``backward``) result into ``norm``'s."""
    if norm in (None, "backward"):
        return 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n) if forward else math.sqrt(n)
    return 1.0 / n if forward else float(n)  # "forward" (checked by the caller)


def rfft_half(a: DArray, n: int, norm: Any, four_step: Any) -> DArray:
    """``np.fft.rfft(a, n, norm)`` for a real ``a`` of at least ``n`` points (collective)."""
    h = n // 2
    start = a.spec.layout
    half = _halves(start, h)
    if a.shape[0] > n:
        a = a[:n]
    paired = tuple(2 * b for b in half.bounds[0])  # type: ignore[union-attr]
    pairs = Layout(start.mesh_shape, start.placements, (n,), (paired,))
    x = a.with_layout(pairs)
    dtype = np.fft.rfft(np.zeros(2, a.dtype)).dtype  # complex64 for float32, else complex128
    xp = array_module(x.local)
    real = xp.ascontiguousarray(x.local, dtype=np.zeros(0, dtype).real.dtype)
    z = DArray(real.view(dtype), DArraySpec(a.mesh, half, np.dtype(dtype)))
    spectrum: DArray = four_step(z, h, False, None, "rfft")
    mirrored: DArray = np.conj(np.roll(spectrum[::-1], 1))  # W[k] = conj(Z[(h - k) mod h])
    layout = spectrum.spec.layout
    mirrored = mirrored.with_layout(layout)
    last = complex(spectrum[0])  # collective: every rank gets Z[0]
    if a.mesh.is_member:
        lo, hi = layout.block(a.mesh.coordinate)[0]
        zk, wk = spectrum.local, mirrored.local
        block = 0.5 * (zk + wk) - 0.5j * _twiddles(n, lo, hi, -1.0, zk) * (zk - wk)
        if layout.block_number(a.mesh.coordinate, 0) == len(layout.bounds[0]) - 2:  # type: ignore[arg-type]
            # The last block ends the half spectrum with X[h].
            block = xp.concatenate([block, xp.asarray([last.real - last.imag], dtype)])
    else:
        block = xp.empty(0, dtype)
    scale = _scale(norm, n, True)
    if scale != 1.0:
        block *= scale
    bounds = (*layout.bounds[0][:-1], h + 1)  # type: ignore[index]
    out = Layout(start.mesh_shape, start.placements, (h + 1,), (bounds,))
    return DArray(block.astype(dtype, copy=False), DArraySpec(a.mesh, out, np.dtype(dtype)))


def irfft_half(a: DArray, n: int, norm: Any, four_step: Any) -> DArray:
    """``np.fft.irfft(a, n, norm)`` for a half spectrum of at least ``n // 2 + 1`` points."""
    h = n // 2
    start = a.spec.layout
    half = _halves(start, h)
    dtype = np.fft.ifft(np.zeros(1, a.dtype)).dtype  # complex64 for complex64, else complex128
    lower = a[:h].with_layout(half)  # A[k] = X[k]
    mirrored: Any = np.conj(a[1 : h + 1][::-1])  # B[k] = conj(X[h - k])
    upper: DArray = mirrored.with_layout(half)
    xp = array_module(lower.local)
    if a.mesh.is_member:
        lo, hi = half.block(a.mesh.coordinate)[0]
        ak = lower.local.astype(dtype)  # (copies: changed below)
        bk = upper.local.astype(dtype)
        if lo == 0 and hi > 0:  # NumPy's c2r transform reads only the real parts of X[0], X[h]
            ak[0], bk[0] = ak[0].real, bk[0].real
        block = 0.5 * (ak + bk) + 0.5j * _twiddles(n, lo, hi, 1.0, ak) * (ak - bk)
    else:
        block = xp.empty(0, dtype)
    spectrum = DArray(block, DArraySpec(a.mesh, half, np.dtype(dtype)))
    z: DArray = four_step(spectrum, h, True, None, "irfft")
    real_dtype = np.zeros(0, dtype).real.dtype
    local = xp.ascontiguousarray(z.local).view(real_dtype)
    scale = _scale(norm, n, False)
    if scale != 1.0:
        local = local * scale
    layout = z.spec.layout
    bounds = tuple(2 * b for b in layout.bounds[0])  # type: ignore[union-attr]
    out = Layout(start.mesh_shape, start.placements, (n,), (bounds,))
    return DArray(local, DArraySpec(a.mesh, out, np.dtype(real_dtype)))
