"""Making DArrays: from a full array, from local blocks, and factories.

Factories compute each rank's block from its global index range, so no rank
ever builds the whole array (unless a placement replicates it everywhere).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh._device import device_module
from dmesh.collectives.dtypes import check_dtype
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Placement, Replicate, Shard, normalize_placements
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.mesh import DeviceMesh, init_mesh
from dmesh.redistribution import partial_term

__all__ = [
    "arange",
    "as_shape",
    "default_mesh",
    "empty",
    "empty_like",
    "eye",
    "full",
    "full_like",
    "linspace",
    "ones",
    "ones_like",
    "zeros",
    "zeros_like",
]  # fmt: skip

_default: list[DeviceMesh] = []


def default_mesh() -> DeviceMesh:
    """A 1-D mesh over ``COMM_WORLD``, created on first use (collective then) and reused."""
    if not _default or _default[0].closed:
        _default[:] = [init_mesh()]
    return _default[0]


def _resolve(mesh: Any, placements: Any, ndim: int) -> tuple[DeviceMesh, tuple[Placement, ...]]:
    mesh = default_mesh() if mesh is None else mesh
    if not isinstance(mesh, DeviceMesh):
        raise ArgumentTypeError(
            f"mesh: expected a DeviceMesh (from dmesh.init_mesh) or None, got {type(mesh).__name__}"
        )
    if placements is None:
        placements = [Shard(0) if ndim else Replicate()] + [Replicate()] * (mesh.ndim - 1)
    return mesh, normalize_placements(placements, mesh.ndim, ndim)


def _replicated_partials(placements: tuple[Placement, ...]) -> tuple[Placement, ...]:
    return tuple(Replicate() if isinstance(p, Partial) else p for p in placements)


def _make_partial(block: Any, mesh: DeviceMesh, placements: tuple[Placement, ...]) -> Any:
    """Turn a replicated block into this rank's term on every ``Partial`` mesh dim."""
    coord = mesh.coordinate
    if coord is None:
        return block
    for m, p in enumerate(placements):
        if isinstance(p, Partial):
            block = partial_term(block, p.op, coord[m] == 0)
    return block


def _build(
    shape: tuple[int, ...],
    mesh: Any,
    placements: Any,
    dtype: np.dtype,
    fill: Callable[[tuple[slice, ...], tuple[int, ...]], Any],
) -> DArray:
    """A DArray whose block is ``fill(global slices, block shape)``."""
    mesh, placements = _resolve(mesh, placements, len(shape))
    layout = Layout.balanced(mesh.shape, placements, shape)
    spec = DArraySpec(mesh, layout, dtype)
    if mesh.coordinate is None:
        return DArray(_xp(mesh).empty(spec.local_shape(), dtype), spec)
    slices = layout.slices(mesh.coordinate)
    block = fill(slices, layout.local_shape(mesh.coordinate))
    return DArray(_make_partial(block, mesh, placements), spec)


def _xp(mesh: DeviceMesh) -> Any:
    return device_module(mesh.device)


def as_shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints) as a tuple of non-negative ints; ``what``
    names the argument in the error (raised alike on every rank: it reads no data)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(operator.index(n) for n in shape)
    except TypeError as exc:
        raise ArgumentTypeError(
            f"{what}: expected an int or a tuple of ints, got {shape!r}"
        ) from exc
    if any(n < 0 for n in dims):
        raise ArgumentError(f"{what}: negative dimensions are not allowed, got {dims}")
    return dims


def _dtype(dtype: Any, default: Any = np.float64) -> np.dtype:
    return check_dtype(np.dtype(default if dtype is None else dtype), "dtype")


# -- factories ----------------------------------------------------------------------
def empty(shape: Any, *, mesh: Any = None, placements: Any = None, dtype: Any = None) -> DArray:
    """Uninitialized DArray (default: float64, ``Shard(0)`` over a 1-D mesh of all ranks)."""
    dt = _dtype(dtype)
    return _build(as_shape(shape), mesh, placements, dt, lambda s, n: _xp_of(mesh).empty(n, dt))


def zeros(shape: Any, *, mesh: Any = None, placements: Any = None, dtype: Any = None) -> DArray:
    """DArray of zeros; only each rank's block is allocated."""
    dt = _dtype(dtype)
    return _build(as_shape(shape), mesh, placements, dt, lambda s, n: _xp_of(mesh).zeros(n, dt))


def ones(shape: Any, *, mesh: Any = None, placements: Any = None, dtype: Any = None) -> DArray:
    """DArray of ones."""
    dt = _dtype(dtype)
    return _build(as_shape(shape), mesh, placements, dt, lambda s, n: _xp_of(mesh).ones(n, dt))


def full(
    shape: Any, fill_value: Any, *, mesh: Any = None, placements: Any = None, dtype: Any = None
) -> DArray:
    """DArray filled with ``fill_value`` (dtype inferred from it, like ``np.full``)."""
    dt = _dtype(dtype, np.asarray(fill_value).dtype)
    return _build(
        as_shape(shape), mesh, placements, dt, lambda s, n: _xp_of(mesh).full(n, fill_value, dt)
    )


def arange(
    start: Any,
    stop: Any = None,
    step: Any = 1,
    *,
    mesh: Any = None,
    placements: Any = None,
    dtype: Any = None,
) -> DArray:
    """1-D DArray of ``np.arange(start, stop, step)``; each rank computes only its block."""
    if stop is None:
        start, stop = 0, start
    reference = np.arange(start, start + 2 * step, step) if step else None
    if reference is None:
        raise ArgumentError("arange: step must not be zero")
    dt = _dtype(dtype, np.result_type(np.asarray(start), np.asarray(stop), np.asarray(step)))
    length = max(0, math.ceil((stop - start) / step))
    # NumPy fills value i as start + i * delta, delta = (start + step) - start.
    delta = reference[1] - reference[0]

    def fill(slices: tuple[slice, ...], n: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        index = xp.arange(slices[0].start, slices[0].stop)
        return (start + index * delta).astype(dt)

    return _build((length,), mesh, placements, dt, fill)


def linspace(
    start: float,
    stop: float,
    num: int = 50,
    endpoint: bool = True,
    *,
    mesh: Any = None,
    placements: Any = None,
    dtype: Any = None,
) -> DArray:
    """1-D DArray of ``np.linspace(start, stop, num, endpoint)``."""
    num = operator.index(num)
    if num < 0:
        raise ArgumentError(f"linspace: num must be non-negative, got {num}")
    div = (num - 1) if endpoint else num
    dt = _dtype(dtype, np.result_type(float(start), float(stop)))
    delta = stop - start
    step = delta / div if div > 0 else np.nan

    def fill(slices: tuple[slice, ...], n: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        i = xp.arange(slices[0].start, slices[0].stop, dtype=np.float64)
        # As NumPy: y = i * step + start (i / div * delta when the step is 0,
        # i * delta when there is no step), and the last value is exactly stop
        # when the end point is included.
        if div <= 0:
            y = i * delta
        elif step == 0:
            y = i / div * delta
        else:
            y = i * step
        y = y + start
        if endpoint and num > 1 and slices[0].stop == num and y.size:
            y[-1] = stop
        return y.astype(dt)

    return _build((num,), mesh, placements, dt, fill)


def eye(
    N: int,
    M: int | None = None,
    k: int = 0,
    *,
    mesh: Any = None,
    placements: Any = None,
    dtype: Any = None,
) -> DArray:
    """2-D DArray with ones on diagonal ``k``, like ``np.eye``."""
    cols = N if M is None else M
    dt = _dtype(dtype)

    def fill(slices: tuple[slice, ...], n: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        rows = xp.arange(slices[0].start, slices[0].stop)[:, None]
        columns = xp.arange(slices[1].start, slices[1].stop)[None, :]
        return (columns - rows == k).astype(dt)

    return _build((N, cols), mesh, placements, dt, fill)


def _like(a: DArray, dtype: Any, mesh: Any, placements: Any) -> dict[str, Any]:
    if not isinstance(a, DArray):
        raise ArgumentTypeError(f"expected a DArray, got {type(a).__name__}")
    return {
        "mesh": a.mesh if mesh is None else mesh,
        "placements": a.placements if placements is None else placements,
        "dtype": a.dtype if dtype is None else dtype,
    }


def empty_like(a: DArray, dtype: Any = None, *, mesh: Any = None, placements: Any = None) -> DArray:
    """Uninitialized DArray with ``a``'s shape, mesh, placements and dtype."""
    return empty(a.shape, **_like(a, dtype, mesh, placements))


def zeros_like(a: DArray, dtype: Any = None, *, mesh: Any = None, placements: Any = None) -> DArray:
    """Zeros with ``a``'s shape, mesh, placements and dtype."""
    return zeros(a.shape, **_like(a, dtype, mesh, placements))


def ones_like(a: DArray, dtype: Any = None, *, mesh: Any = None, placements: Any = None) -> DArray:
    """Ones with ``a``'s shape, mesh, placements and dtype."""
    return ones(a.shape, **_like(a, dtype, mesh, placements))


def full_like(
    a: DArray, fill_value: Any, dtype: Any = None, *, mesh: Any = None, placements: Any = None
) -> DArray:
    """``fill_value`` with ``a``'s shape, mesh, placements and dtype."""
    return full(a.shape, fill_value, **_like(a, dtype, mesh, placements))


def _xp_of(mesh: Any) -> Any:
    return _xp(default_mesh() if mesh is None else mesh)
