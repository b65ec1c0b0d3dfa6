"""The ``fft`` extension of the Array API standard (2024.12) on DArrays.

Each transform calls the ``np.fft`` function of the same name on a DArray,
which NumPy dispatches to dmesh's distributed FFT; single precision stays
single (complex64 in, complex64 out; float32 in, complex64 out). ``fftfreq``
and ``rfftfreq`` build each rank's block of the frequencies on the
``device=`` Sharding (no communication).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from dmesh.array_api._la_checks import require_kind
from dmesh.array_api.creation import default_device
from dmesh.core.placement import Replicate, Shard
from dmesh.darray import DArray
from dmesh.darray_array_api import Sharding
from dmesh.fft_freq import fftfreq as _fftfreq
from dmesh.fft_freq import rfftfreq as _rfftfreq

__all__ = [
    "fft", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifftn", "ifftshift", "ihfft",
    "irfft", "irfftn", "rfft", "rfftfreq", "rfftn",
]  # fmt: skip

_fft: Any = np.fft  # NumPy dispatches its calls on DArrays to dmesh (stubs: ndarray)
Norm = Literal["backward", "ortho", "forward"]


def _options(name: str, norm: Any, n: Any = None, s: Any = None) -> None:
    """Raise on every rank for a bad ``norm``, ``n`` or ``s``."""
    if norm not in ("backward", "ortho", "forward"):
        raise ValueError(f"{name}: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")
    for length in [n] if s is None else list(s):
        if length is None:
            continue
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
            raise TypeError(f"{name}: lengths must be ints, got {length!r}")
        if length < 1:
            raise ValueError(f"{name}: lengths must be at least 1, got {length}")


def _single(name: str, result: DArray, x: DArray, kind: str) -> DArray:
    """``result`` in single precision when ``x`` is (its ``kind``: 'f' or 'c')."""
    if np.dtype(x.dtype) in (np.dtype(np.float32), np.dtype(np.complex64)):
        want = np.dtype(np.float32 if kind == "f" else np.complex64)
        if result.dtype != want:
            cast: DArray = result.astype(want)
            return cast
    return result


def _one(name: str, fn: Any, kind_in: str, kind_out: str) -> Any:
    """The standard's 1-D transform ``name`` calling ``fn`` (``np.fft.<name>``)."""

    def transform(
        x: DArray, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward"
    ) -> DArray:
        require_kind(name, kind_in, x)
        _options(name, norm, n=n)
        return _single(name, fn(x, n=n, axis=axis, norm=norm), x, kind_out)

    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"``np.fft.{name}(x, n=n, axis=axis, norm=norm)`` ({kind_in} input)."
    return transform


def _many(name: str, fn: Any, kind_in: str, kind_out: str) -> Any:
    """The standard's n-D transform ``name`` calling ``fn`` (``np.fft.<name>``)."""

    def transform(
        x: DArray, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
        norm: Norm = "backward",
    ) -> DArray:  # fmt: skip
        require_kind(name, kind_in, x)
        _options(name, norm, s=s)
        if s is not None and axes is not None and len(s) != len(axes):
            raise ValueError(f"{name}: s and axes must have the same length")
        return _single(name, fn(x, s=s, axes=axes, norm=norm), x, kind_out)

    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"``np.fft.{name}(x, s=s, axes=axes, norm=norm)`` ({kind_in} input)."
    return transform


_C, _R = "complex floating-point", "real floating-point"
fft = _one("fft", np.fft.fft, _C, "c")
ifft = _one("ifft", np.fft.ifft, _C, "c")
rfft = _one("rfft", np.fft.rfft, _R, "c")
irfft = _one("irfft", np.fft.irfft, _C, "f")
hfft = _one("hfft", np.fft.hfft, _C, "f")
ihfft = _one("ihfft", np.fft.ihfft, _R, "c")
fftn = _many("fftn", np.fft.fftn, _C, "c")
ifftn = _many("ifftn", np.fft.ifftn, _C, "c")
rfftn = _many("rfftn", np.fft.rfftn, _R, "c")
irfftn = _many("irfftn", np.fft.irfftn, _C, "f")


def fftshift(x: DArray, /, *, axes: int | Sequence[int] | None = None) -> DArray:
    """``np.fft.fftshift(x, axes=axes)``: the zero frequency moved to the middle."""
    require_kind("fftshift", "floating-point", x)
    result: DArray = _fft.fftshift(x, axes=axes)
    return result


def ifftshift(x: DArray, /, *, axes: int | Sequence[int] | None = None) -> DArray:
    """``np.fft.ifftshift(x, axes=axes)``: the inverse of ``fftshift``."""
    require_kind("ifftshift", "floating-point", x)
    result: DArray = _fft.ifftshift(x, axes=axes)
    return result


def _device(name: str, device: Any) -> Sharding:
    """``device``, or the namespace's default Sharding (``creation.default_device()``)."""
    if device is not None:
        if not isinstance(device, Sharding):
            raise TypeError(f"{name}: device must be a dmesh.array_api.Sharding, got {device!r}")
        return device
    return default_device()


def _freq(name: str, fn: Any, n: Any, d: Any, dtype: Any, device: Any) -> DArray:
    """``fn(n, d)`` on ``device``'s mesh and placements, cast to ``dtype``."""
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise ValueError(f"{name}: dtype must be a real floating-point dtype, got {dtype!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{name}: n must be a positive int, got {n!r}")
    where = _device(name, device)
    placements = [p if not isinstance(p, Shard) or p.dim == 0 else Replicate()
                  for p in where.placements]  # fmt: skip
    result: DArray = fn(int(n), d, mesh=where.mesh, placements=placements)
    if dtype is not None and result.dtype != np.dtype(dtype):
        result = result.astype(np.dtype(dtype))
    return result


def fftfreq(
    n: int, /, *, d: float = 1.0, dtype: Any = None, device: Sharding | None = None
) -> DArray:
    """``np.fft.fftfreq(n, d)`` as a DArray on ``device`` (default: a 1-D mesh, Shard(0))."""
    return _freq("fftfreq", _fftfreq, n, d, dtype, device)


def rfftfreq(
    n: int, /, *, d: float = 1.0, dtype: Any = None, device: Sharding | None = None
) -> DArray:
    """``np.fft.rfftfreq(n, d)`` as a DArray on ``device`` (default: a 1-D mesh, Shard(0))."""
    return _freq("rfftfreq", _rfftfreq, n, d, dtype, device)
