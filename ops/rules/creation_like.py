"""``np.zeros_like``, ``np.ones_like``, ``np.full_like``, ``np.empty_like``, ``np.copy``
and ``np.astype`` on DArrays: the result has the argument's mesh, placements and block
boundaries, and is made on each rank from its own block (no communication).

A partial argument's result is replicated along the partial mesh dims: the fill is
a value every rank holds (kept partial, ``ones_like`` of a partial sum would add up
to ``k``). NumPy's ``shape=`` makes a new shape, sharded as the argument where its
sharded dims align with dims of the same length counted from the end (as
broadcasting aligns them), else as the creation functions' default;
``order=``, ``subok=`` and ``device=`` keep NumPy's defaults only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import UnsupportedError
from dmesh.core.layout import Layout
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.creation import empty as dmesh_empty
from dmesh.creation import full as dmesh_full
from dmesh.darray import DArray
from dmesh.ops.registry import decompose


def _check(name: str, order: Any, subok: Any, device: Any) -> None:
    if order not in ("K", "A", "C") or subok is not True or device not in (None, "cpu"):
        raise UnsupportedError(
            f"np.{name} on DArrays takes order='K'/'A'/'C', subok=True and device=None; "
            f"got order={order!r}, subok={subok!r}, device={device!r}"
        )


def _filled(a: DArray, fill: Any, dtype: Any, shape: Any) -> DArray:
    """``a``'s layout filled with ``fill`` in ``dtype`` (``fill`` None: uninitialized)."""
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    layout = a.spec.layout
    if shape is not None and tuple(np.atleast_1d(shape)) != a.shape:
        new_shape = tuple(int(n) for n in np.atleast_1d(shape))
        kept = _trailing_layout(layout, new_shape) if np.ndim(fill) == 0 else None
        if kept is None:
            if fill is None:
                return dmesh_empty(new_shape, mesh=a.mesh, dtype=dtype)
            return dmesh_full(new_shape, fill, mesh=a.mesh, dtype=dtype)
        layout = kept
    if any(p.is_partial() for p in layout.placements):  # the fill is a value every rank holds
        placements = tuple(Replicate() if p.is_partial() else p for p in layout.placements)
        layout = Layout(layout.mesh_shape, placements, layout.shape, layout.bounds)
    block = a.local
    xp = array_module(block)
    if layout.shape != a.shape:  # shape=: a new block, cut as the layout kept says
        spec = DArraySpec(a.mesh, layout, np.dtype(dtype))
        made = xp.empty(spec.local_shape(), dtype)
        if fill is not None:
            made[...] = fill
        return DArray(made, spec)
    local = xp.empty_like(block, dtype) if fill is None else xp.full_like(block, fill, dtype)
    return DArray(local, DArraySpec(a.mesh, layout, np.dtype(dtype)))


def _trailing_layout(layout: Layout, shape: tuple[int, ...]) -> Layout | None:
    """``a``'s sharding carried into ``shape`` by aligning trailing dims, as broadcasting
    does (``np.zeros_like(u, shape=(steps, n))`` of a sharded ``u`` of ``n`` points is
    sharded on its last dim, in ``u``'s blocks: ``U[t] = u`` moves nothing), or None when
    a sharded dim has no dim of its length there (the creation default then)."""
    offset = len(shape) - len(layout.shape)
    placements: list[Placement] = []
    bounds: list[Any] = [None] * len(shape)
    for p in layout.placements:
        if isinstance(p, Shard):
            e = p.dim + offset
            if not 0 <= e < len(shape) or shape[e] != layout.shape[p.dim]:
                return None
            placements.append(Shard(e))
            bounds[e] = layout.bounds[p.dim]
        else:  # (a partial argument's fill is a value every rank holds)
            placements.append(Replicate())
    if not any(isinstance(p, Shard) for p in placements):
        return None
    return Layout(layout.mesh_shape, tuple(placements), shape, tuple(bounds))


@decompose(np.zeros_like)
def zeros_like(a: Any, dtype: Any = None, order: Any = "K", subok: Any = True, shape: Any = None,
               *, device: Any = None) -> DArray:  # fmt: skip
    """``np.zeros_like`` of a DArray: its layout, zeros (no communication)."""
    _check("zeros_like", order, subok, device)
    return _filled(a, 0, dtype, shape)


@decompose(np.ones_like)
def ones_like(a: Any, dtype: Any = None, order: Any = "K", subok: Any = True, shape: Any = None,
              *, device: Any = None) -> DArray:  # fmt: skip
    """``np.ones_like`` of a DArray: its layout, ones (no communication)."""
    _check("ones_like", order, subok, device)
    return _filled(a, 1, dtype, shape)


@decompose(np.full_like)
def full_like(a: Any, fill_value: Any, dtype: Any = None, order: Any = "K", subok: Any = True,
              shape: Any = None, *, device: Any = None) -> DArray:  # fmt: skip
    """``np.full_like`` of a DArray: its layout, ``fill_value`` (no communication)."""
    _check("full_like", order, subok, device)
    return _filled(a, fill_value, dtype, shape)


@decompose(np.empty_like)
def empty_like(prototype: Any, dtype: Any = None, order: Any = "K", subok: Any = True,
               shape: Any = None, *, device: Any = None) -> DArray:  # fmt: skip
    """``np.empty_like`` of a DArray: its layout, values unspecified (no communication)."""
    _check("empty_like", order, subok, device)
    return _filled(prototype, None, dtype, shape)


@decompose(np.astype)
def astype(x: Any, dtype: Any, /, *, copy: Any = True, device: Any = None) -> DArray:
    """``np.astype(x, dtype, copy=)`` (NumPy 2.1): ``x.astype`` block by block (no communication).

    ``copy=False`` returns ``x`` itself when the dtype is already ``dtype``. A
    partial ``x`` is reduced before a cast to another dtype: the cast of a sum
    is not the sum of the cast terms (0.5 + 0.5 to int is 1, not 0), nor a
    bool of a max the max of the bools.
    """
    if device not in (None, "cpu"):
        raise UnsupportedError(f"np.astype on DArrays takes device=None; got {device!r}")
    dtype = np.dtype(dtype)
    if dtype != x.dtype and any(p.is_partial() for p in x.placements):
        x = x.reduce_partials()
    return x.astype(dtype, copy=bool(copy))  # type: ignore[no-any-return]


@decompose(np.copy)
def copy(a: Any, order: Any = "K", subok: Any = False) -> DArray:
    """``np.copy`` of a DArray: a copy of each block, the same spec (no communication)."""
    if order not in ("K", "A", "C"):
        raise UnsupportedError(f"np.copy on DArrays takes order='K'/'A'/'C'; got {order!r}")
    return a.copy()  # type: ignore[no-any-return]
