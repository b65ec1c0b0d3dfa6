"""Boolean DArrays in index keys, ``np.argwhere`` and ``np.flatnonzero``.

A bool DArray item of a key counts, as in NumPy, as the integer arrays of its
``np.nonzero`` (global indices in C order, 1-D DArrays with uneven blocks;
one all-gather of a count): ``a[m]`` with a 1-D ``m`` on an N-D ``a``,
``a[:, m]``, and every assignment through a mask (``a[mask] = v``, ``a[:, m] =
v``) then take the integer-array path of :mod:`dmesh.ops.indexing.fancy`, which
routes each selected element (and its value) to its owner; nothing is
gathered. A value array of length ``mask.sum()`` is matched to the True
positions in C order, as NumPy does. The shape checks read only what every
rank knows, before any message.

``np.argwhere`` and ``np.flatnonzero`` have results whose length depends on
the data: each rank keeps the indices of its own block (the array laid out
with only dim 0 sharded, so block order is C order), and the result is
sharded along its first dim with uneven blocks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.device import array_module
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose

__all__ = ["argwhere", "expand_masks", "flatnonzero", "has_mask", "row_selection"]


def _is_mask(item: Any) -> bool:
    return isinstance(item, DArray) and item.dtype == np.bool_


def has_mask(key: Any) -> bool:
    """Whether ``key`` holds a boolean DArray."""
    items = key if isinstance(key, tuple) else (key,)
    return any(_is_mask(i) for i in items)


def expand_masks(a: DArray, key: Any) -> tuple[Any, ...]:
    """``key`` with each bool DArray replaced by its ``np.nonzero`` arrays (collective).

    The mask's shape must match the dims it indexes (NumPy's ``IndexError``
    otherwise), checked on every rank before the first message.
    """
    items = list(key) if isinstance(key, tuple) else [key]
    used = sum(
        i.ndim if _is_mask(i) or (isinstance(i, np.ndarray) and i.dtype == np.bool_) else 1
        for i in items
        if i is not None and i is not Ellipsis
    )
    d = 0
    for item in items:
        if item is None:
            continue
        if item is Ellipsis:
            d += max(a.ndim - used, 0)
            continue
        if _is_mask(item):
            if item.ndim == 0:
                if item.mesh is not a.mesh:
                    raise IndexError("a boolean DArray index must be on the indexed array's mesh")
                continue  # a new axis of length 1 or 0, as a Python bool (below)
            for k, n in enumerate(item.shape):
                if d + k >= a.ndim:
                    raise IndexError(
                        f"too many indices for array: array is {a.ndim}-dimensional, but "
                        f"{used} were indexed"
                    )
                if a.shape[d + k] != n:
                    raise IndexError(
                        f"boolean index did not match indexed array along axis {d + k}; size "
                        f"of axis is {a.shape[d + k]} but size of corresponding boolean axis "
                        f"is {n}"
                    )
            if item.mesh is not a.mesh:
                raise IndexError("a boolean DArray index must be on the indexed array's mesh")
        d += item.ndim if isinstance(item, (DArray, np.ndarray)) and item.dtype == np.bool_ else 1
    out: list[Any] = []
    for item in items:
        if _is_mask(item) and item.ndim == 0:
            out.append(bool(item))  # collective: every rank gets the value
        else:
            out.extend(np.nonzero(item) if _is_mask(item) else (item,))
    return tuple(out)


def row_layout(a: DArray) -> DArray:
    """``a`` with only dim 0 sharded (block order is then C order), partials reduced."""
    fits = all(not (p.is_partial() or (isinstance(p, Shard) and p.dim != 0)) for p in a.placements)
    if fits:
        return a
    placements = [Shard(0) if m == 0 and a.ndim else Replicate() for m in range(a.mesh.ndim)]
    return a.redistribute(a.mesh, placements)


def row_selection(a: DArray, local: Any) -> DArray:
    """A DArray whose blocks along dim 0 are each rank's rows ``local``, in block order.

    ``a`` has only dim 0 sharded (:func:`row_layout`); the result is sharded
    along its dim 0 over the same mesh dims, with boundaries from the counts
    (one all-gather of an int over those mesh dims).
    """
    mesh_dims = sharding_mesh_dims(a.placements, 0) if a.ndim else ()
    placements: tuple[Placement, ...] = tuple(
        Shard(0) if m in mesh_dims else Replicate() for m in range(a.mesh.ndim)
    )
    rest = tuple(local.shape[1:])
    if not mesh_dims:
        layout = Layout(a.mesh.shape, placements, (local.shape[0], *rest), (None,) * local.ndim)
        return DArray(local, DArraySpec(a.mesh, layout, local.dtype))
    comm = a.mesh[mesh_dims].comm()  # rank order there is block order
    counts = coll.all_gather(np.array([local.shape[0]], dtype=np.int64), 0, comm)
    bounds = tuple(int(b) for b in np.concatenate([[0], np.cumsum(counts)]))
    shape = (bounds[-1], *rest)
    layout = Layout(a.mesh.shape, placements, shape, (bounds, *(None,) * len(rest)))
    return DArray(local, DArraySpec(a.mesh, layout, local.dtype))


def _zero_d(a: DArray, ndim: int) -> DArray:
    """argwhere/flatnonzero of a 0-d DArray: one row if its value is nonzero (collective)."""
    rows = int(bool(a))
    shape = (rows, 0) if ndim == 2 else (rows,)
    local = np.zeros(shape, np.intp)
    layout = Layout(a.mesh.shape, (Replicate(),) * a.mesh.ndim, shape, (None,) * len(shape))
    return DArray(local, DArraySpec(a.mesh, layout, local.dtype))


def _outside(a: DArray, shape: tuple[int, ...]) -> DArray:
    """The result on a rank outside the mesh: an empty block of a replicated layout."""
    layout = Layout(a.mesh.shape, (Replicate(),) * a.mesh.ndim, shape, (None,) * len(shape))
    spec = DArraySpec(a.mesh, layout, np.dtype(np.intp))
    return DArray(np.empty((0,) * len(shape), np.intp), spec)


@decompose(np.argwhere)
def argwhere(a: Any) -> DArray:
    """``np.argwhere``: the (k, ndim) indices of the nonzero elements, sharded along rows.

    No element of ``a`` moves when only dim 0 is sharded; otherwise ``a`` is
    first laid out so. Collective (the row counts are shared).
    """
    if a.ndim == 0:
        return _zero_d(a, 2)
    a = row_layout(a)
    if a.mesh.coordinate is None:
        return _outside(a, (0, a.ndim))
    xp = array_module(a.local)
    local = xp.argwhere(a.local).astype(np.intp, copy=False)
    local += xp.asarray(a.spec.offsets(), dtype=np.intp)
    return row_selection(a, local)


@decompose(np.flatnonzero)
def flatnonzero(a: Any) -> DArray:
    """``np.flatnonzero``: the C-order flat indices of the nonzero elements (collective)."""
    if a.ndim == 0:
        return _zero_d(a, 1)
    a = row_layout(a)
    if a.mesh.coordinate is None:
        return _outside(a, (0,))
    local = array_module(a.local).flatnonzero(a.local).astype(np.intp, copy=False)
    local += a.spec.offsets()[0] * math.prod(a.shape[1:])
    return row_selection(a, local)
