"""Grid factories: ``tri``, ``indices``, ``meshgrid`` and ``fromfunction`` as DArrays.

Like the factories of :mod:`dmesh.creation`, each rank computes its own block
from the global index range it holds, so nothing is communicated and no rank
builds the whole array (unless a placement replicates it). The values are
NumPy's bit for bit: each element is computed by the same formula NumPy uses,
from its global indices.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.core.placement import Replicate, Shard
from dmesh.creation import _build, _dtype, _xp_of, as_shape
from dmesh.darray import DArray

__all__ = ["fromfunction", "indices", "meshgrid", "tri"]


def _default(mesh: Any, placements: Any, dim: int) -> Any:
    """``placements``, or ``Shard(dim)`` on the first mesh dim (``dim`` may be None)."""
    if placements is not None:
        return placements
    from dmesh.creation import default_mesh  # the default mesh only when none is given

    ndim = (default_mesh() if mesh is None else mesh).ndim
    return [Shard(dim)] + [Replicate()] * (ndim - 1)


def tri(
    N: int,
    M: int | None = None,
    k: int = 0,
    dtype: Any = float,
    *,
    mesh: Any = None,
    placements: Any = None,
) -> DArray:
    """``np.tri(N, M, k, dtype)``: ones at and below diagonal ``k`` (default: ``Shard(0)``)."""
    rows_n = operator.index(N)
    cols_n = rows_n if M is None else operator.index(M)
    dt = _dtype(dtype)
    # Column j minus row i runs over [-(N - 1), M - 1]: clipping k to [-N, M] keeps
    # the answer and keeps the arithmetic inside int64.
    offset = max(-rows_n, min(operator.index(k), cols_n))

    def fill(slices: tuple[slice, ...], n: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        rows = xp.arange(slices[0].start, slices[0].stop, dtype=np.int64)[:, None]
        columns = xp.arange(slices[1].start, slices[1].stop, dtype=np.int64)[None, :]
        return (columns - rows <= offset).astype(dt)

    return _build(as_shape((rows_n, cols_n)), mesh, placements, dt, fill)


def indices(
    dimensions: Any,
    dtype: Any = int,
    sparse: bool = False,
    *,
    mesh: Any = None,
    placements: Any = None,
) -> DArray | tuple[DArray, ...]:
    """``np.indices(dimensions, dtype, sparse)``: the index grids.

    Dense: one DArray of shape ``(len(dimensions), *dimensions)``, by default
    ``Shard(1)`` (the first grid dim; its axis 0 has only ``len(dimensions)``
    entries). Sparse: a tuple whose ``i``-th DArray has ``dimensions[i]`` on
    axis ``i`` and 1 elsewhere, by default ``Shard(i)``; ``placements``, when
    given, applies to each.
    """
    dims = as_shape(tuple(dimensions))
    dt = _dtype(dtype)
    n = len(dims)
    if sparse:
        out = []
        for i, length in enumerate(dims):
            shape = tuple(length if d == i else 1 for d in range(n))
            out.append(
                _build(shape, mesh, _default(mesh, placements, i), dt, _axis_fill(mesh, i, dt))
            )
        return tuple(out)

    def fill(slices: tuple[slice, ...], local: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        block = xp.empty(local, dt)
        for row, i in enumerate(range(slices[0].start, slices[0].stop)):
            block[row] = _axis_fill(mesh, i, dt)(slices[1:], local[1:])
        return block

    chosen = placements if placements is not None or n == 0 else _default(mesh, None, 1)
    return _build((n, *dims), mesh, chosen, dt, fill)


def _axis_fill(mesh: Any, axis: int, dt: np.dtype) -> Callable[..., Any]:
    """The block of an index grid along ``axis``, broadcast over the block's other axes."""

    def fill(slices: tuple[slice, ...], local: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        index = xp.arange(slices[axis].start, slices[axis].stop).astype(dt)
        shape = tuple(-1 if d == axis else 1 for d in range(len(local)))
        return xp.broadcast_to(index.reshape(shape), local).copy()

    return fill


def meshgrid(
    *xi: Any,
    copy: bool = True,
    sparse: bool = False,
    indexing: str = "xy",
    mesh: Any = None,
    placements: Any = None,
) -> tuple[DArray, ...]:
    """``np.meshgrid(*xi, sparse=, indexing=)`` of arrays every rank holds.

    Each output is made on each rank from its slice of the (flattened) input:
    nothing is communicated. Dense outputs default to ``Shard(0)``; a sparse
    output to ``Shard`` of its long axis. ``copy=False`` is accepted, but the
    blocks are always new arrays (a DArray block cannot be a broadcast view).
    """
    if indexing not in ("xy", "ij"):
        raise ArgumentError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    if any(isinstance(x, DArray) for x in xi):
        raise ArgumentTypeError(
            "dmesh.meshgrid takes arrays every rank holds; for DArrays use "
            "np.meshgrid(...) on them, or gather small ones with x.full_array()"
        )
    ndim = len(xi)
    arrays = [np.asarray(x).reshape(-1) for x in xi]
    axes = list(range(ndim))
    if indexing == "xy" and ndim > 1:  # NumPy swaps the first two axes
        axes[0], axes[1] = 1, 0
    lengths = [0] * ndim
    for x, axis in zip(arrays, axes):
        lengths[axis] = x.size
    out = []
    for x, axis in zip(arrays, axes):
        shape = tuple(lengths[d] if d == axis or not sparse else 1 for d in range(ndim))
        chosen = placements
        if chosen is None:
            chosen = _default(mesh, None, axis if sparse else 0)
        out.append(_build(shape, mesh, chosen, _dtype(x.dtype), _take_fill(mesh, x, axis)))
    return tuple(out)


def _take_fill(mesh: Any, x: np.ndarray, axis: int) -> Callable[..., Any]:
    """The block of ``x`` laid along ``axis`` and broadcast over the other axes."""

    def fill(slices: tuple[slice, ...], local: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        part = xp.asarray(x[slices[axis]])
        shape = tuple(-1 if d == axis else 1 for d in range(len(local)))
        return xp.broadcast_to(part.reshape(shape), local).copy()

    return fill


def fromfunction(
    function: Callable[..., Any],
    shape: Any,
    *,
    dtype: Any = float,
    mesh: Any = None,
    placements: Any = None,
    **kwargs: Any,
) -> DArray:
    """``np.fromfunction(function, shape, dtype=)``: ``function`` called on each block's indices.

    ``function`` must be elementwise (the value at an index depends on that
    index alone, as ``lambda i, j: i + 2 * j``): it is called on every rank
    with the global index grids of its block (of ``dtype``) and ``kwargs``.
    The result's dtype is the dtype ``function`` gives on empty grids, the
    same on every rank; a result that does not have the block's shape (a
    scalar) is broadcast to it.
    """
    dims = as_shape(shape)
    dt = _dtype(dtype)
    empty_grids = [np.zeros((0,) * len(dims), dt) for _ in dims]
    result_dtype = _dtype(np.asarray(function(*empty_grids, **kwargs)).dtype)

    def fill(slices: tuple[slice, ...], local: tuple[int, ...]) -> Any:
        xp = _xp_of(mesh)
        grids = [_axis_fill(mesh, i, dt)(slices, local) for i in range(len(dims))]
        block = xp.asarray(function(*grids, **kwargs))
        if block.shape != local:
            block = xp.broadcast_to(block, local)
        return block.astype(result_dtype)

    return _build(dims, mesh, placements, result_dtype, fill)
