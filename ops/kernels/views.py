"""Views that change the shape: ``reshape``/``ravel``, ``squeeze``, ``expand_dims``.

Usually no data moves. A sharded dim stays sharded when its blocks stay contiguous in
the new shape: the dims before it are unchanged and it is merged with the
dims after it (``(n, m) -> (n * m,)``: a block of rows ``[s, t)`` becomes
elements ``[s * m, t * m)``), or only the dims after it change, or it is
split into ``(n, m)`` and its boundaries are multiples of ``m``. Other
reshapes of sharded dims would need a redistribution first; they raise and
say so. Replicated and partial values reshape block by block (reshaping is
linear).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from dmesh.collectives.blocks import resolve_shape
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.layout import Layout
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose


def _reshaped(a: DArray, shape: tuple[int, ...]) -> DArray:
    """``a`` in ``shape``: a view where the blocks allow, else redistributed first.

    A sharded dim whose blocks would not stay contiguous is first moved to
    ``Shard(0)`` (an all-to-all), and if even that does not fit the new
    shape, to ``Replicate()`` along that mesh dim (an all-gather).
    """
    for fallback in (None, "first", "replicate"):
        moved = _moved_for(a, shape, fallback)
        if moved is not None:
            return _view(moved, shape)
    raise AssertionError("unreachable: a replicated array always reshapes")  # pragma: no cover


def _moved_for(a: DArray, shape: tuple[int, ...], fallback: str | None) -> DArray | None:
    placements = list(a.placements)
    changed = False
    for m, p in enumerate(placements):
        if isinstance(p, Shard) and _placed(a, shape, p.dim) is None:
            if fallback is None:
                return None
            placements[m] = Shard(0) if fallback == "first" and a.ndim else Replicate()
            changed = True
    if not changed:
        return a
    moved = a.redistribute(a.mesh, placements)
    if fallback == "first" and any(
        isinstance(p, Shard) and _placed(moved, shape, p.dim) is None for p in moved.placements
    ):
        return None
    return moved


def _view(a: DArray, shape: tuple[int, ...]) -> DArray:
    layout = a.spec.layout
    old = a.shape
    placements: list[Placement] = list(layout.placements)
    bounds: list[Any] = [None] * len(shape)
    for m, p in enumerate(layout.placements):
        if not isinstance(p, Shard):
            continue
        d = p.dim
        placed = _placed(a, shape, d)
        if placed is None:  # pragma: no cover - _reshaped moved such dims away
            raise AssertionError(f"reshape {old} -> {shape}: dim {d} cannot stay sharded")
        e, scale = placed
        cut = layout.bounds[d]
        bounds[e] = tuple(scale(b) for b in cut) if cut is not None else None
        placements[m] = Shard(e)
    result = Layout(layout.mesh_shape, tuple(placements), shape, tuple(bounds))
    spec = DArraySpec(a.mesh, result, a.dtype)
    return DArray(a.local.reshape(spec.local_shape()), spec)


def _placed(a: DArray, new: tuple[int, ...], d: int) -> tuple[int, Any] | None:
    """The new dim holding ``a``'s dim ``d`` blocks, and how a boundary maps to it.

    Either ``d`` merged with whole trailing dims (:func:`_matching_dim`: a
    boundary is multiplied), or ``d`` split into ``new[d : d + j]`` with the
    later dims unchanged, when every boundary of ``d`` falls on a whole row of
    the split (``(n * m,) -> (n, m)`` with boundaries multiples of ``m``: a
    boundary is divided).
    """
    old = a.shape
    e = _matching_dim(old, new, d)
    if e is not None:
        factor = math.prod(old[d + 1 :]) // math.prod(new[e + 1 :]) if old[d] else 1
        return e, lambda b: b * factor
    cut = a.spec.layout.bounds[d]
    if new[:d] != old[:d] or cut is None:
        return None
    for j in range(2, len(new) - d + 1):
        if math.prod(new[d : d + j]) == old[d] and new[d + j :] == old[d + 1 :]:
            row = math.prod(new[d + 1 : d + j])
            if row and all(b % row == 0 for b in cut):
                return d, lambda b, row=row: b // row
            return None
    return None


def _matching_dim(old: tuple[int, ...], new: tuple[int, ...], d: int) -> int | None:
    """The new dim holding old dim ``d``'s blocks contiguously, if there is one.

    Needs the dims before ``d`` unchanged (``new[:e] == old[:d]``) and the new
    dim ``e`` to be ``d`` merged with whole trailing dims (``new[e]`` a
    multiple of ``old[d]`` equal to the product of ``old[d : d + j]``).
    """
    for e in range(len(new)):
        if new[:e] == old[:d]:
            size = old[d]
            for j in range(d + 1, len(old) + 1):
                if size == new[e]:
                    return e
                if j < len(old):
                    size *= old[j]
            return None
    return None


@decompose(np.reshape)
def reshape(a: Any, shape: Any = None, order: str = "C", **kwargs: Any) -> DArray:
    """``np.reshape`` of a DArray (C order), a view of each block."""
    shape = kwargs.pop("newshape", shape)
    if order != "C" or kwargs:
        raise UnsupportedError("np.reshape on DArrays supports C order only")
    return _reshaped(a, resolve_shape(shape, a.size))


@decompose(np.ravel)
def ravel(a: Any, order: str = "C") -> DArray:
    """``np.ravel`` of a DArray (C order)."""
    if order != "C":
        raise UnsupportedError("np.ravel on DArrays supports C order only")
    return _reshaped(a, (a.size,))


@decompose(np.squeeze)
def squeeze(a: Any, axis: Any = None) -> DArray:
    """``np.squeeze``: drop length-1 dims (never sharded, so nothing moves)."""
    axes = tuple(range(a.ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    axes = tuple(operator.index(x) % a.ndim for x in axes)
    if any(a.shape[x] != 1 for x in axes) and axis is not None:
        raise ArgumentError("cannot select an axis to squeeze out which has size not equal to one")
    return _reshaped(a, tuple(n for d, n in enumerate(a.shape) if not (d in axes and n == 1)))


@decompose(np.expand_dims)
def expand_dims(a: Any, axis: Any) -> DArray:
    """``np.expand_dims``: insert length-1 dims."""
    axes = axis if isinstance(axis, tuple) else (axis,)
    ndim = a.ndim + len(axes)
    positions = sorted(operator.index(x) % ndim for x in axes)
    shape = list(a.shape)
    for p in positions:
        shape.insert(p, 1)
    return _reshaped(a, tuple(shape))
