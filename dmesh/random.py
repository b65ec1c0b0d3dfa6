"""Random DArrays that do not depend on how they are distributed.

For a given seed, element ``i`` (flat C-order global index) of the n-th random
array drawn is a pure function of ``(seed, n, i)`` (Philox4x32-10 with the
index as counter, see ``dmesh.core.philox``): the global array is bit-for-bit the
same whatever the mesh shape, the rank count and the placements, and equals
what one rank draws. Each rank computes only its block.

Every rank must make the same sequence of calls (they advance the draw count
``n`` alike). Without :func:`seed`, the seed is 0: runs are reproducible.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.core import philox as _philox
from dmesh.creation import _build, _dtype, _xp_of, as_shape
from dmesh.darray import DArray

__all__ = ["integers", "normal", "random", "seed", "standard_normal", "uniform"]

_state = {"seed": 0, "draws": 0}


def seed(value: int) -> None:
    """Set the seed (a non-negative int below 2**64) and restart the sequence of draws."""
    try:
        value = operator.index(value)
    except TypeError as exc:
        raise ArgumentTypeError(f"seed: expected an int, got {type(value).__name__}") from exc
    if not 0 <= value < 2**64:
        raise ArgumentError(f"seed: expected 0 <= seed < 2**64, got {value}")
    _state["seed"], _state["draws"] = value, 0


def _next_stream(kind: int) -> int:
    # Four streams per draw: one per sampler kind, so kinds never share counters.
    stream = _state["draws"] * 4 + kind
    _state["draws"] += 1
    return stream


def _global_index(slices: tuple[slice, ...], shape: tuple[int, ...], xp: Any) -> Any:
    """Flat C-order global index of each element of the block ``slices``."""
    index = xp.zeros((), dtype=np.int64)
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        axis = xp.arange(slices[d].start, slices[d].stop, dtype=np.int64) * stride
        index = index + axis.reshape((-1,) + (1,) * (len(shape) - 1 - d))
        stride *= shape[d]
    return index


def _draw(size: Any, mesh: Any, placements: Any, dtype: np.dtype, sample: Any, kind: int) -> DArray:
    shape = as_shape(() if size is None else size)
    stream = _next_stream(kind)
    key = _state["seed"]

    def fill(slices: tuple[slice, ...], n: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        index = xp.broadcast_to(_global_index(slices, shape, xp), n)
        return sample(key, index, stream, xp).astype(dtype)

    return _build(shape, mesh, placements, dtype, fill)


def random(
    size: Any = None, *, mesh: Any = None, placements: Any = None, dtype: Any = None
) -> DArray:
    """Uniform floats in [0, 1) (float64 unless ``dtype`` says otherwise)."""
    return uniform(0.0, 1.0, size, mesh=mesh, placements=placements, dtype=dtype)


def uniform(
    low: float = 0.0,
    high: float = 1.0,
    size: Any = None,
    *,
    mesh: Any = None,
    placements: Any = None,
    dtype: Any = None,
) -> DArray:
    """Uniform floats in [low, high)."""
    dt = _dtype(dtype)

    def sample(key: int, index: Any, stream: int, xp: Any) -> Any:
        return low + (high - low) * _philox.uniform(key, index, stream, xp=xp)

    return _draw(size, mesh, placements, dt, sample, _philox.STREAM_UNIFORM)


def standard_normal(
    size: Any = None, *, mesh: Any = None, placements: Any = None, dtype: Any = None
) -> DArray:
    """Standard normal floats (Box-Muller on each element's own counter)."""
    return normal(0.0, 1.0, size, mesh=mesh, placements=placements, dtype=dtype)


def normal(
    loc: float = 0.0,
    scale: float = 1.0,
    size: Any = None,
    *,
    mesh: Any = None,
    placements: Any = None,
    dtype: Any = None,
) -> DArray:
    """Normal floats with mean ``loc`` and standard deviation ``scale``."""
    if scale < 0:
        raise ArgumentError(f"normal: scale must be non-negative, got {scale}")
    dt = _dtype(dtype)

    def sample(key: int, index: Any, stream: int, xp: Any) -> Any:
        return loc + scale * _philox.standard_normal(key, index, stream, xp=xp)

    return _draw(size, mesh, placements, dt, sample, _philox.STREAM_NORMAL)


def integers(
    low: int,
    high: int | None = None,
    size: Any = None,
    *,
    mesh: Any = None,
    placements: Any = None,
    dtype: Any = np.int64,
) -> DArray:
    """Integers in [low, high) (``[0, low)`` when ``high`` is None), like ``Generator.integers``."""
    if high is None:
        low, high = 0, low
    dt = _dtype(dtype)

    def sample(key: int, index: Any, stream: int, xp: Any) -> Any:
        return _philox.integers(key, index, int(low), int(high), stream, xp=xp)

    if not int(low) < int(high):
        raise ArgumentError(f"integers: need low < high, got low={low}, high={high}")
    return _draw(size, mesh, placements, dt, sample, _philox.STREAM_INTEGERS)
