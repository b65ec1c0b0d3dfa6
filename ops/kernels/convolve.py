"""``np.convolve`` and ``np.correlate`` of a sharded long signal with a short kernel.

Output ``k`` of the full convolution (and of the full correlation) uses the
inputs ``a[k - m + 1 .. k]`` for a kernel of ``m`` points. Each rank makes the
outputs ``[lo, hi)`` of its block ``[lo, hi)`` of ``a`` (the last block also
the ``m - 1`` outputs past the end) with NumPy on its block extended by the
``m - 1`` cells before it (:mod:`dmesh.ops.kernels.windows`: a halo, one
message per neighbour), so every output is NumPy's dot product over the same
inputs (equal to the last bit or two: NumPy's dot kernel may group the terms
of a window differently at another offset) and no rank holds more than its
block and ``m - 1`` cells. ``same`` and ``valid`` are slices of the full
result (no message). The result is sharded like ``a``, the blocks uneven.

Supported: ``a`` a 1-D DArray (any placements), ``v`` a NumPy array or a
replicated DArray no longer than ``a``; for ``np.convolve`` the two may be
given the other way round. Not supported (``UnsupportedError`` on every rank,
before any message): two sharded signals (convolve a long signal with a long
one by FFT: ``np.fft.ifft(np.fft.fft(a) * np.fft.fft(b))`` on padded arrays),
a kernel longer than a sharded signal, blocks too thin to pass on ``m - 1``
cells even when balanced.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.convert import distribute
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Replicate
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels.windows import window
from dmesh.ops.registry import decompose

__all__ = ["convolve", "correlate"]

_MODES = ("valid", "same", "full")


def _is_sharded(x: Any) -> bool:
    return isinstance(x, DArray) and any(p.is_shard() for p in x.placements)


def _filter(name: str, a: Any, v: Any, mode: Any) -> DArray:
    """The full, same or valid ``np.<name>`` of a 1-D DArray ``a`` by a small ``v``."""
    func = getattr(np, name)
    if mode not in _MODES:
        raise ArgumentError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    if name == "convolve" and not isinstance(a, DArray) and isinstance(v, DArray):
        a, v = v, a  # convolution commutes: the DArray is the signal
    if _is_sharded(v):
        if name == "convolve" and not _is_sharded(a):
            a, v = v, a  # convolution commutes: the sharded one is the signal
        else:
            raise UnsupportedError(
                f"np.{name} of two sharded DArrays is not supported: the kernel v must be a "
                "NumPy array or a replicated DArray. For two long signals use the FFT: "
                "np.fft.ifft(np.fft.fft(a_padded) * np.fft.fft(v_padded))"
            )
    if not isinstance(a, DArray):
        raise UnsupportedError(f"np.{name} on DArrays takes the signal a as a DArray")
    if isinstance(v, DArray):
        v = v.reduce_partials().local
    v = np.asarray(v)
    if a.ndim != 1 or v.ndim != 1:
        raise ArgumentError(f"np.{name}: object too deep for desired array (1-D arrays only)")
    n, m = a.shape[0], v.shape[0]
    if n == 0:
        raise ArgumentError("a cannot be empty")
    if m == 0:
        raise ArgumentError("v cannot be empty")
    dtype = np.dtype(func(np.ones(1, a.dtype), np.ones(1, v.dtype)).dtype)
    mesh = a.mesh
    if not _is_sharded(a):
        a = a.reduce_partials()
        local = func(a.local, v, mode) if mesh.is_member else np.empty(0, dtype)
        return distribute(local, mesh, [Replicate()] * mesh.ndim)
    if m > n:
        raise UnsupportedError(
            f"np.{name}: the kernel v ({m} points) is longer than the sharded signal a ({n}); "
            "give the longer one as a, or replicate both"
        )
    a, win = window(a, 0, m - 1, 0, f"np.{name}")
    layout = a.spec.layout
    total = n + m - 1
    cut = layout.bounds[0]
    if cut is None or not sharding_mesh_dims(layout.placements, 0):  # pragma: no cover
        raise AssertionError("a sharded signal has boundaries")
    blocks = len(cut) - 1
    number = layout.block_number(mesh.coordinate, 0) if mesh.is_member else 0
    end = total if number == blocks - 1 else win.hi
    if mesh.is_member and end > win.lo and len(win.cells):
        local = func(win.cells, v, "full")[win.lo - win.start : end - win.start]
    else:
        local = np.empty(0, dtype)
    bounds = (*cut[:-1], total)
    full_layout = Layout.with_bounds(layout.mesh_shape, layout.placements, (total,), [bounds])
    full = DArray(np.ascontiguousarray(local, dtype), DArraySpec(mesh, full_layout, dtype))
    if mode == "full":
        return full
    if mode == "same":
        return full[(m - 1) // 2 : (m - 1) // 2 + n]
    return full[m - 1 : n]


@decompose(np.convolve)
def convolve(a: Any, v: Any, mode: str = "full") -> DArray:
    """``np.convolve`` of a sharded 1-D DArray with a short kernel (collective: a halo).

    The result is sharded like the signal (uneven blocks); see the module docstring.
    """
    return _filter("convolve", a, v, mode)


@decompose(np.correlate)
def correlate(a: Any, v: Any, mode: str = "valid") -> DArray:
    """``np.correlate`` of a sharded 1-D DArray with a short replicated ``v`` (a halo)."""
    return _filter("correlate", a, v, mode)
