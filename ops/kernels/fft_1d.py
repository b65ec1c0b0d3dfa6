"""The FFT of a 1-D DArray sharded along its only axis: the four-step algorithm.

With ``n = n1 * n2``, input ``j = n2 * r + c`` and output ``k = k1 + n1 * k2``,

    y[k1 + n1 k2] = sum_c w_n2^(c k2) * w_n^(c k1) * sum_r x[n2 r + c] w_n1^(r k1)

so the signal, seen as an ``(n1, n2)`` matrix whose rows are sharded (a view
of each block once the blocks hold whole rows), is transformed along its
columns (the distributed FFT's transpose moves the sharding to the columns),
multiplied by the twiddle factors ``w_n^(c k1)`` (each rank its own columns),
transformed along its rows (the sharding moves back to the rows) and read in
the transposed order ``y = Y.T.ravel()`` (the sharding moves to the columns
once more, then each block is a view). Three all-to-alls in all, as for every
distributed 1-D FFT with its input and output in natural order; no rank holds
more than ``n / k`` elements of ``k`` blocks, and the result (balanced
blocks, multiples of ``n1``) is NumPy's to rounding (about 1e-15 relative).

``n1`` and ``n2`` must each be at least the number of blocks, so that every
block of both transposes has rows; a length with no such factorization (a
prime, or too few points per rank) is transformed by Bluestein's algorithm
(``fft_bluestein``: a convolution by three four-step FFTs of a power of two).

``n`` larger than the signal pads it with zeros where the blocks of whole rows
are made: the signal moves into those rows and each rank appends its zeros
locally, so no zero travels. ``irfft`` (and so ``hfft``) of ``n`` points builds
the full Hermitian spectrum of length ``n`` from the half spectrum, sharded
like the output (``X[k] = a[k]`` for ``k <= n // 2`` and ``conj(a[n - k])``
above, one distributed take; the imaginary parts of ``X[0]`` and, for even
``n``, ``X[n / 2]`` are dropped as NumPy's ``irfft`` ignores them), and returns
the real part of its four-step inverse: NumPy's values to rounding.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.layout import Layout, balanced_bounds, sharding_mesh_dims
from dmesh.core.placement import Placement, Shard, shorts
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels import fft_real_1d

__all__ = ["factor", "four_step", "sharded_1d"]


def factor(n: int, blocks: int) -> tuple[int, int] | None:
    """``(n1, n2)`` with ``n1 * n2 == n``, both at least ``blocks``, ``n1`` nearest ``sqrt(n)``."""
    best: tuple[int, int] | None = None
    for n1 in range(1, math.isqrt(n) + 1):
        if n % n1 == 0 and n1 >= blocks and n // n1 >= blocks:
            best = (n1, n // n1)  # the largest n1 <= sqrt(n) that fits
    return best


def _levels(layout: Layout) -> tuple[int, ...]:
    return tuple(layout.mesh_shape[m] for m in sharding_mesh_dims(layout.placements, 0))


def _with_shard(layout: Layout, dim: int, shape: tuple[int, ...]) -> Layout:
    """The layout of an array of ``shape`` sharded on ``dim`` by the mesh dims that shard dim 0."""
    placements: tuple[Placement, ...] = tuple(
        Shard(dim) if isinstance(p, Shard) else p for p in layout.placements
    )
    bounds: list[Any] = [None] * len(shape)
    bounds[dim] = balanced_bounds(shape[dim], _levels(layout))
    return Layout(layout.mesh_shape, placements, shape, tuple(bounds))


def _split(n: int, layout: Layout, name: str) -> tuple[int, int]:
    """``factor(n, blocks)`` for ``layout``'s blocks, or ``UnsupportedError`` (pure: no message)."""
    blocks = math.prod(_levels(layout))
    split = factor(n, blocks)
    if split is None:
        raise UnsupportedError(
            f"np.fft.{name}: the 1-D DArray of n = {n} points is sharded into {blocks} blocks "
            f"({shorts(layout.placements)}); the distributed 1-D FFT views it as an n1 x n2 matrix "
            f"with n1, n2 >= {blocks}, and {n} has no such factorization. Pad or cut the signal "
            "to a length with one (e.g. a power of two: np.fft.fft(a, n=...) pads or cuts it), "
            "or replicate it (a.redistribute(mesh, [Replicate()] * mesh.ndim))"
        )
    return split


def sharded_1d(a: DArray, kind: str, n: int | None, norm: Any) -> DArray:
    """``np.fft.<kind>`` (fft, ifft, rfft, irfft) of ``n`` points of the sharded 1-D ``a``.

    ``n`` (default: NumPy's) cuts or zero-pads the input. Collective; every
    error is raised on every rank before any message.
    """
    m = a.shape[0]
    if n is None:
        n = 2 * (m - 1) if kind == "irfft" else m
    if n < 1:
        raise ArgumentError(f"np.fft.{kind}: Invalid number of FFT data points ({n}) specified.")
    a = a.reduce_partials()
    if kind in ("rfft", "irfft") and fft_real_1d.applies(a, kind, n):  # n / 2 complex points
        half = fft_real_1d.rfft_half if kind == "rfft" else fft_real_1d.irfft_half
        return half(a, n, norm, four_step)
    if kind == "irfft":
        y = four_step(_hermitian(a, n), n, True, norm, kind)
        real = array_module(y.local).ascontiguousarray(y.local.real)
        return DArray(real, DArraySpec(a.mesh, y.spec.layout, np.dtype(real.dtype)))
    y = four_step(a, n, kind == "ifft", norm, kind)
    return y[: n // 2 + 1] if kind == "rfft" else y


def _hermitian(a: DArray, n: int) -> DArray:
    """The full spectrum ``X`` of ``n`` points whose half is ``a`` (as NumPy's irfft reads it).

    ``X[k] = a[k]`` for ``k <= n // 2`` (zero past ``a``'s end) and
    ``conj(a[n - k])`` above; ``X[0]`` and ``X[n / 2]`` (even ``n``) real.
    Sharded balanced on the mesh dims that shard ``a``: one distributed take.
    """
    m, half = a.shape[0], n // 2
    dtype = np.fft.ifft(np.zeros(1, a.dtype)).dtype  # complex64 for complex64, else complex128
    layout = _with_shard(a.spec.layout, 0, (n,))
    lo, hi = layout.block(a.mesh.coordinate)[0] if a.mesh.is_member else (0, 0)
    k = np.arange(lo, hi, dtype=np.intp)
    source = np.where(k <= half, k, n - k)
    xp = array_module(a.local)
    if m == 0:  # nothing to take: the padding alone
        return DArray(xp.zeros(hi - lo, dtype), DArraySpec(a.mesh, layout, np.dtype(dtype)))
    index = DArray(np.minimum(source, m - 1), DArraySpec(a.mesh, layout, np.dtype(np.intp)))
    taken: Any = np.take(a, index)
    block = taken.local.astype(dtype)  # a copy: changed in place below
    if block.size:
        block[xp.asarray(source >= m)] = 0  # past a's end: NumPy pads with zeros
        mirror = xp.asarray(k > half)
        block[mirror] = xp.conj(block[mirror])
        # NumPy's c2r transform reads only the real part of these two.
        real = xp.asarray((k == 0) | ((k == half) & (n % 2 == 0)))
        block[real] = block[real].real
    return DArray(block, DArraySpec(a.mesh, taken.spec.layout, np.dtype(block.dtype)))


# (n, n1, first column, end column, inverse, dtype, array module) -> the block's
# twiddle factors: computing them (a cosine and a sine per element) cost more
# than the FFTs themselves; a solver transforms the same length every step.
_twiddle_cache: dict[tuple[Any, ...], Any] = {}
TWIDDLE_CACHE = 8  # entries kept (each the size of a rank's block)


def _twiddles(n: int, n1: int, c_lo: int, c_hi: int, inverse: bool, like: Any) -> Any:
    """``w_n^(k1 c)`` for ``k1 < n1`` and this rank's columns ``c_lo <= c < c_hi`` (cached)."""
    xp = array_module(like)
    key = (n, n1, c_lo, c_hi, inverse, like.dtype, xp.__name__)
    found = _twiddle_cache.get(key)
    if found is None:
        k1 = xp.arange(n1, dtype=np.int64)[:, None]
        c = xp.arange(c_lo, c_hi, dtype=np.int64)[None, :]
        # Reduced mod n before scaling, so every angle is in [0, 2 pi): accurate twiddles.
        angle = ((k1 * c) % n) * ((2.0 if inverse else -2.0) * np.pi / n)
        found = (xp.cos(angle) + 1j * xp.sin(angle)).astype(like.dtype)
        if len(_twiddle_cache) >= TWIDDLE_CACHE:
            _twiddle_cache.clear()
        _twiddle_cache[key] = found
    return found


def four_step(a: DArray, n: int, inverse: bool, norm: Any, name: str) -> DArray:
    """``np.fft.fft`` (or ``ifft``) of ``n`` points of the 1-D DArray ``a`` sharded along axis 0.

    ``a`` is cut or zero-padded to ``n``; ``n`` must have a factorization
    (``factor``) or is done by Bluestein's convolution of a power-of-two length
    (``fft_bluestein``). Collective.
    """
    blocks = math.prod(_levels(a.spec.layout))
    if factor(n, blocks) is None:
        from dmesh.ops.kernels.fft_bluestein import bluestein

        return bluestein(a, n, inverse, norm, name, four_step, factor, blocks)
    n1, n2 = _split(n, a.spec.layout, name)
    a = a.reduce_partials()
    if n < a.shape[0]:
        a = a[:n]
    m = a.shape[0]
    mesh = a.mesh
    start = a.spec.layout
    rows = _with_shard(start, 0, (n1, n2))
    # Blocks of whole rows of the n points; the signal's m points fill the
    # first ones (the rest are the padding, made where they are needed).
    flat = tuple(min(n2 * b, m) for b in rows.bounds[0])  # type: ignore[union-attr]
    a = a.with_layout(Layout(start.mesh_shape, start.placements, (m,), (flat,)))
    dtype = np.fft.fft(np.zeros(1, a.dtype)).dtype  # NumPy's: complex64 for float32
    local = a.local.astype(dtype, copy=False)
    if n > m and mesh.is_member:
        r_lo, r_hi = rows.block(mesh.coordinate)[0]
        padded = array_module(local).zeros((r_hi - r_lo) * n2, dtype)
        padded[: local.shape[0]] = local
        local = padded
    block = local.reshape(-1, n2)
    x = DArray(block, DArraySpec(mesh, rows, np.dtype(block.dtype)))
    transform: Any = np.fft.ifft if inverse else np.fft.fft
    z: DArray = transform(x, axis=0, norm=norm)  # the sharding moves to the columns
    if z.spec.layout != _with_shard(start, 1, (n1, n2)):  # pragma: no cover
        raise AssertionError(f"unexpected layout after the first transform: {z.spec}")
    if mesh.is_member:
        c_lo, c_hi = z.spec.layout.block(mesh.coordinate)[1]
        twiddled = z.local * _twiddles(n, n1, c_lo, c_hi, inverse, z.local)
    else:
        twiddled = z.local
    z = DArray(twiddled, z.spec)
    y: DArray = transform(z, axis=1, norm=norm)  # the sharding moves back to the rows (k1)
    y = y.with_layout(_with_shard(start, 1, (n1, n2)))  # sharded on k2: blocks of the output
    out_layout = Layout(
        start.mesh_shape,
        start.placements,
        (n,),
        (tuple(n1 * b for b in y.spec.layout.bounds[1]),),  # type: ignore[union-attr]
    )
    local = y.local.T.reshape(-1) if mesh.is_member else y.local.reshape(-1)
    return DArray(local, DArraySpec(mesh, out_layout, np.dtype(local.dtype)))
