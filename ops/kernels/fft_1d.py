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
prime, or too few points per rank) raises ``UnsupportedError`` on every rank
before any message.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import UnsupportedError
from dmesh.core.layout import Layout, balanced_bounds, sharding_mesh_dims
from dmesh.core.placement import Placement, Shard, shorts
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = ["factor", "four_step"]


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


def four_step(a: DArray, inverse: bool, norm: Any, name: str) -> DArray:
    """``np.fft.fft`` (or ``ifft``) of the 1-D DArray ``a`` sharded along axis 0 (collective)."""
    a = a.reduce_partials()
    n = a.shape[0]
    levels = _levels(a.spec.layout)
    blocks = math.prod(levels)
    split = factor(n, blocks)
    if split is None:
        raise UnsupportedError(
            f"np.fft.{name}: the 1-D DArray of n = {n} points is sharded into {blocks} blocks "
            f"({shorts(a.placements)}); the distributed 1-D FFT views it as an n1 x n2 matrix "
            f"with n1, n2 >= {blocks}, and {n} has no such factorization. Pad or cut the signal "
            "to a length with one (e.g. a power of two, np.fft.fft(a, n=...) cuts it), or "
            "replicate it (a.redistribute(mesh, [Replicate()] * mesh.ndim))"
        )
    n1, n2 = split
    mesh = a.mesh
    start = a.spec.layout
    rows = _with_shard(start, 0, (n1, n2))
    flat = Layout(
        start.mesh_shape,
        start.placements,
        (n,),
        (tuple(n2 * b for b in rows.bounds[0]),),  # type: ignore[union-attr]
    )
    a = a.with_layout(flat)  # blocks of whole rows (moves only misplaced elements)
    dtype = np.fft.fft(np.zeros(1, a.dtype)).dtype  # NumPy's: complex64 for float32
    block = a.local.astype(dtype, copy=False).reshape(-1, n2)
    x = DArray(block, DArraySpec(mesh, rows, np.dtype(block.dtype)))
    transform: Any = np.fft.ifft if inverse else np.fft.fft
    z: DArray = transform(x, axis=0, norm=norm)  # the sharding moves to the columns
    if z.spec.layout != _with_shard(start, 1, (n1, n2)):  # pragma: no cover
        raise AssertionError(f"unexpected layout after the first transform: {z.spec}")
    if mesh.is_member:
        c_lo, c_hi = z.spec.layout.block(mesh.coordinate)[1]
        xp = array_module(z.local)
        k1 = xp.arange(n1, dtype=np.int64)[:, None]
        c = xp.arange(c_lo, c_hi, dtype=np.int64)[None, :]
        # Reduced mod n before scaling, so every angle is in [0, 2 pi): accurate twiddles.
        angle = ((k1 * c) % n) * ((2.0 if inverse else -2.0) * np.pi / n)
        twiddled = z.local * (xp.cos(angle) + 1j * xp.sin(angle)).astype(z.local.dtype)
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
