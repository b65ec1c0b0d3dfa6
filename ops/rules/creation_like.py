"""``np.zeros_like``, ``np.ones_like``, ``np.full_like``, ``np.empty_like``, ``np.copy``
and ``np.astype`` on DArrays: the result has the argument's mesh, placements and block
boundaries, and is made on each rank from its own block (no communication).

A partial argument's result is replicated along the partial mesh dims: the fill is
a value every rank holds (kept partial, ``ones_like`` of a partial sum would add up
to ``k``). NumPy's ``shape=`` makes a new shape, sharded as the argument where its
sharded dims align with dims of the same length counted from the end (as
broadcasting aligns them), else as the creation functions' default;
``order=``, ``subok=`` and ``device=`` keep NumPy's defaults only.

The result's spec follows from the argument's spec, the dtype and ``shape=``
alone: it is made once per (spec, dtype, shape) and kept, so a repeated call
makes only its block.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dmesh import _hooks
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


# The result of one (argument spec, dtype, shape=): its spec and this rank's block shape
# (None: the argument's block's, made ``like`` it), or no spec and the new shape (the
# creation functions' default layout).
_Plan = tuple[DArraySpec | None, tuple[int, ...] | None]
# (argument spec, dtype, shape= as given) -> its plan, for a scalar fill and a shape= that
# is None, an int or a tuple of ints (no other value equals those). Bounded: specs hold
# meshes.
_plans: dict[tuple[DArraySpec, np.dtype, Any], _Plan] = {}
_LIMIT = 1024
_SCALARS = frozenset((int, float, complex, bool, type(None)))  # (None: uninitialized)


def _filled(a: DArray, fill: Any, dtype: Any, shape: Any) -> DArray:
    """``a``'s layout filled with ``fill`` in ``dtype`` (``fill`` None: uninitialized)."""
    spec = a._spec
    dtype = spec.dtype if dtype is None else np.dtype(dtype)
    key = (spec, dtype, shape) if _keyed(fill, shape) else None
    plan = None if key is None else _plans.get(key)
    if plan is None:
        plan = _plan(spec, dtype, shape, np.ndim(fill) == 0)
        if key is not None:
            if len(_plans) >= _LIMIT:
                _plans.clear()
            _plans[key] = plan
    made, block_shape = plan
    if made is None:
        assert block_shape is not None  # (the new shape, with no spec)
        if fill is None:
            return dmesh_empty(block_shape, mesh=a.mesh, dtype=dtype)
        return dmesh_full(block_shape, fill, mesh=a.mesh, dtype=dtype)
    if block_shape is None:
        recorder = _hooks.recorder
        if recorder is not None and recorder.records(a) and np.ndim(fill) == 0:
            # dmesh.compile traces: a node making the block (no message, no value read)
            made_block = functools.partial(_filled_block, fill=fill, dtype=dtype)
            return recorder.block_map(made_block, a, made, f"full_like({fill!r}, {dtype})")  # type: ignore[no-any-return]
        return DArray(_filled_block(a.local, fill, dtype), made)
    local = array_module(a.local).empty(block_shape, dtype)  # shape=: a new block, cut
    if fill is not None:  # as the layout kept says
        local[...] = fill
    return DArray(local, made)


def _filled_block(block: Any, fill: Any, dtype: np.dtype) -> Any:
    """A block like ``block`` in ``dtype``, filled with ``fill`` (None: uninitialized)."""
    if type(block) is np.ndarray:
        # np.full_like's own two steps, without its dispatch (a quarter of its time)
        local = np.empty_like(block, dtype)
        if fill is not None:
            np.copyto(local, fill, casting="unsafe")
        return local
    xp = array_module(block)
    return xp.empty_like(block, dtype) if fill is None else xp.full_like(block, fill, dtype)


def _keyed(fill: Any, shape: Any) -> bool:
    """Whether a call with ``fill`` and ``shape=`` is planned once (see ``_plans``)."""
    if type(fill) not in _SCALARS and not isinstance(fill, np.generic):
        return False  # (an array fill's shape decides whether shape= keeps the layout)
    kind = type(shape)
    if kind is tuple:
        return all(type(n) is int for n in shape)
    return shape is None or kind is int


def _plan(spec: DArraySpec, dtype: np.dtype, shape: Any, scalar: bool) -> _Plan:
    """The result of ``spec``'s array filled in ``dtype`` and ``shape`` (see ``_Plan``);
    ``scalar``: whether the fill is one value (an array's keeps no layout into shape=)."""
    layout = spec.layout
    if shape is not None and tuple(np.atleast_1d(shape)) != spec.shape:
        new_shape = tuple(int(n) for n in np.atleast_1d(shape))
        kept = _trailing_layout(layout, new_shape) if scalar else None
        if kept is None:
            return None, new_shape
        layout = kept
    if any(p.is_partial() for p in layout.placements):  # the fill is a value every rank holds
        placements = tuple(Replicate() if p.is_partial() else p for p in layout.placements)
        layout = Layout(layout.mesh_shape, placements, layout.shape, layout.bounds)
    made = DArraySpec(spec.mesh, layout, dtype)
    return made, (None if layout.shape == spec.shape else made.local_shape())


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
    if type(x) is DArray:  # (dmesh.compile's stand-ins and lazy arrays: x.astype below)
        spec = x._spec
        cast = _casts.get((spec, dtype))
        if cast is None:
            cast = _cast_spec(spec, dtype)
        if isinstance(cast, DArraySpec):  # no partial terms: x.astype's block cast, its spec kept
            if not copy and dtype == spec.dtype:
                return x
            return DArray(x._local.astype(dtype), cast)
    if dtype != x.dtype and any(p.is_partial() for p in x.placements):
        x = x.reduce_partials()
    return x.astype(dtype, copy=bool(copy))  # type: ignore[no-any-return]


# (argument spec, dtype) -> the cast's spec, or False where ``x.astype`` decides: the
# argument is partial (its cast may need the terms reduced first) or NumPy refuses the
# cast (``x.astype`` raises its error). Bounded: specs hold meshes.
_casts: dict[tuple[DArraySpec, np.dtype], DArraySpec | bool] = {}


def _cast_spec(spec: DArraySpec, dtype: np.dtype) -> DArraySpec | bool:
    """``spec`` in ``dtype`` (False where ``x.astype`` decides), remembered."""
    partial = any(p.is_partial() for p in spec.placements)
    refused = not np.can_cast(spec.dtype, dtype, "unsafe")
    cast = False if partial or refused else spec.with_dtype(dtype)
    if len(_casts) >= _LIMIT:
        _casts.clear()
    _casts[spec, dtype] = cast
    return cast


@decompose(np.copy)
def copy(a: Any, order: Any = "K", subok: Any = False) -> DArray:
    """``np.copy`` of a DArray: a copy of each block, the same spec (no communication)."""
    if order not in ("K", "A", "C"):
        raise UnsupportedError(f"np.copy on DArrays takes order='K'/'A'/'C'; got {order!r}")
    return a.copy()  # type: ignore[no-any-return]
