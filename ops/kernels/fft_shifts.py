"""``np.fft.fftshift``/``ifftshift`` and ``np.fft.hfft``/``ihfft`` on DArrays.

A shift is a roll by half of each shifted axis. Along an axis the blocks hold
whole, each block is rolled where it is (no message); along a sharded axis the
result is ``np.take`` of the rolled indices, sharded like the axis, whose
owners answer requests (two all-to-alls, no gather). ``hfft`` and ``ihfft``
are NumPy's definitions on the distributed ``irfft``/``rfft``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from dmesh.collectives.errors import UnsupportedError
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose

__all__ = ["fftshift", "hfft", "ifftshift", "ihfft"]


def _rolled_indices(a: DArray, axis: int, shift: int) -> DArray:
    """``(arange(n) - shift) % n`` sharded like ``a``'s ``axis`` (each rank makes its block)."""
    n = a.shape[axis]
    mesh_dims = sharding_mesh_dims(a.placements, axis)
    placements: tuple[Placement, ...] = tuple(
        Shard(0) if m in mesh_dims else Replicate() for m in range(a.mesh.ndim)
    )
    layout = Layout.balanced(a.mesh.shape, placements, (n,))
    lo, hi = layout.block(a.mesh.coordinate)[0] if a.mesh.is_member else (0, 0)
    block = (np.arange(lo, hi, dtype=np.intp) - shift) % n
    return DArray(block, DArraySpec(a.mesh, layout, np.dtype(np.intp)))


def _roll(a: DArray, shift: int, axis: int) -> DArray:
    """``np.roll(a, shift, axis)``: local where the axis is whole, else a distributed take."""
    n = a.shape[axis]
    if n == 0 or shift % n == 0:
        return a
    if sharding_mesh_dims(a.placements, axis):
        taken: Any = np.take(a, _rolled_indices(a, axis, shift % n), axis=axis)
        return taken  # type: ignore[no-any-return]
    a = a.reduce_partials()
    block = np.roll(a.local, shift, axis=axis)
    return DArray(block, DArraySpec(a.mesh, a.spec.layout, np.dtype(block.dtype)))


def _shift(x: Any, axes: Any, sign: int, name: str) -> DArray:
    if not isinstance(x, DArray):
        raise UnsupportedError(f"np.fft.{name} on DArrays takes a DArray x")
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    axes = normalize_axis_tuple(axes, x.ndim, allow_duplicate=True)
    for ax in axes:
        x = _roll(x, sign * (x.shape[ax] // 2), ax)
    return x  # type: ignore[no-any-return]


@decompose(np.fft.fftshift)
def fftshift(x: Any, axes: Any = None) -> DArray:
    """``np.fft.fftshift`` of a DArray (collective along sharded axes)."""
    return _shift(x, axes, 1, "fftshift")


@decompose(np.fft.ifftshift)
def ifftshift(x: Any, axes: Any = None) -> DArray:
    """``np.fft.ifftshift`` of a DArray (collective along sharded axes)."""
    return _shift(x, axes, -1, "ifftshift")


_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _swapped(norm: Any, name: str) -> Any:
    if norm not in _SWAP:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    return _SWAP[norm]


@decompose(np.fft.hfft)
def hfft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.hfft``: ``irfft`` of the conjugate with the other normalization (as NumPy)."""
    if out is not None:
        raise UnsupportedError("np.fft.hfft on DArrays: out= is not supported; use the result")
    if n is None:
        n = (a.shape[axis] - 1) * 2
    out_: Any = np.fft.irfft(np.conjugate(a), n, axis, norm=_swapped(norm, "hfft"))
    return out_  # type: ignore[no-any-return]


@decompose(np.fft.ihfft)
def ihfft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.ihfft``: the conjugate of ``rfft`` with the other normalization (as NumPy)."""
    if out is not None:
        raise UnsupportedError("np.fft.ihfft on DArrays: out= is not supported; use the result")
    if n is None:
        n = a.shape[axis]
    out_: Any = np.conjugate(np.fft.rfft(a, n, axis, norm=_swapped(norm, "ihfft")))
    return out_  # type: ignore[no-any-return]
