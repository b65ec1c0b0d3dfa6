"""Boolean DArrays in index keys, ``np.argwhere`` and ``np.flatnonzero``.

A mask of an array's shape, or of its leading dims, selects and writes in
place when the array has only dim 0 sharded (block order is then C order):
``a[mask]`` (:func:`mask_select`) keeps each rank's selected elements, a 1-D
DArray with uneven blocks (one all-gather of a count), and ``a[mask] = v``
(:func:`mask_assign`) writes each rank's block, a scalar with no message and
an array after that all-gather, ``v`` laid out like ``a[mask]`` (Mandelbrot's
``z[m] = z[m] ** 2 + c[m]`` moves nothing). Any other bool DArray item counts,
as in NumPy, as the integer arrays of its ``np.nonzero`` (global indices in C
order, 1-D DArrays with uneven blocks; one all-gather of a count): ``a[:, m]``,
``a[m]`` on an array with another dim sharded then take the integer-array path
of :mod:`dmesh.ops.indexing.fancy`, which routes each selected element (and its
value) to its owner; nothing is gathered. A value array of length
``mask.sum()`` is matched to the True positions in C order, as NumPy does. The
shape checks read only what every rank knows, before any message.

``np.argwhere`` and ``np.flatnonzero`` have results whose length depends on
the data: each rank keeps the indices of its own block (the array laid out
with only dim 0 sharded, so block order is C order), and the result is
sharded along its first dim with uneven blocks.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

import dmesh.collectives as coll
from dmesh import _hooks
from dmesh.collectives import tracing
from dmesh.collectives.device import array_module, to_host
from dmesh.collectives.errors import ArgumentTypeError
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose

__all__ = [
    "argwhere", "expand_masks", "flatnonzero", "has_mask", "leading_mask", "mask_assign",
    "mask_select", "row_layout", "row_placements", "row_selection", "rows_only",
]  # fmt: skip


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


def rows_only(placements: Sequence[Placement]) -> bool:
    """Whether ``placements`` shard dim 0 alone and hold no partial terms (each block is
    then whole rows, contiguous in C order: a mask's block selects from it in place)."""
    return all(not (p.is_partial() or (isinstance(p, Shard) and p.dim != 0)) for p in placements)


def row_placements(placements: Sequence[Placement]) -> list[Placement]:
    """The placements of :func:`row_layout`: the mesh dims that shard any dim shard dim 0
    instead (an all-to-all, never a gather: replicating a sharded mesh dim would bring its
    blocks to every rank), the others replicate (partial terms reduced)."""
    return [Shard(0) if isinstance(p, Shard) else Replicate() for p in placements]


def row_layout(a: DArray) -> DArray:
    """``a`` with only dim 0 sharded (so each block is contiguous in C order), partials reduced."""
    if rows_only(a.placements):
        return a
    return a.redistribute(a.mesh, row_placements(a.placements))


class _Counts(NamedTuple):
    """How the row counts of selections from arrays of one spec are shared."""

    placements: tuple[Placement, ...]  # the selection's (dim 0 sharded where a's is)
    sharded: bool  # whether dim 0 is sharded at all
    comm: Any  # the communicator of the blocks along dim 0, None: one block (no message)
    sent: Any  # the int64 buffers of the all-gather, kept with the spec
    received: Any


# a's spec -> its _Counts (pure: from the spec alone)
_counts: dict[DArraySpec, _Counts] = {}


def _counts_of(a: DArray) -> _Counts:
    counts = _counts.get(a._spec)
    if counts is not None:
        return counts
    mesh_dims = sharding_mesh_dims(a.placements, 0) if a.ndim else ()
    placements = tuple(Shard(0) if m in mesh_dims else Replicate() for m in range(a.mesh.ndim))
    comm = None
    if mesh_dims and not all(a.mesh.shape[m] == 1 for m in mesh_dims):
        # Rank order there is block order (one mesh dim: its own communicator, no lookup).
        comm = a.mesh.comm(mesh_dims[0]) if len(mesh_dims) == 1 else a.mesh[mesh_dims].comm()
    size = 1 if comm is None else comm.Get_size()
    counts = _Counts(placements, bool(mesh_dims), comm, np.zeros(1, np.int64),
                     np.zeros(size, np.int64))  # fmt: skip
    if len(_counts) >= 1024:  # bounded: specs hold meshes
        _counts.clear()
    _counts[a._spec] = counts
    return counts


def _row_bounds(a: DArray, count: int) -> tuple[tuple[Placement, ...], tuple[int, ...] | None]:
    """The placements and dim-0 boundaries of rows selected from ``a``, ``count`` here.

    ``a`` has only dim 0 sharded (:func:`row_layout`); the selection is
    sharded along its dim 0 over the same mesh dims, boundaries from the
    counts (one all-gather of an int over those mesh dims; none when they
    hold one block). ``None`` boundaries: dim 0 is not sharded.
    """
    counts = _counts_of(a)
    if not counts.sharded:
        return counts.placements, None
    if counts.comm is None:  # one block along dim 0: no message
        return counts.placements, (0, count)
    if tracing.hooked:  # a debug tool watches: the all-gather through the collectives
        size = counts.comm.Get_size()
        sizes = [1] * size
        got = coll.all_gather(np.array([count], dtype=np.int64), 0, counts.comm, sizes=sizes)
        return counts.placements, (0, *np.cumsum(got).tolist())
    counts.sent[0] = count
    counts.comm.Allgather(counts.sent, counts.received)
    return counts.placements, (0, *itertools.accumulate(counts.received.tolist()))


def _selection_layout(
    a: DArray, placements: tuple[Placement, ...], bounds: tuple[int, ...] | None, count: int,
    rest: tuple[int, ...],
) -> Layout:  # fmt: skip
    total = count if bounds is None else bounds[-1]
    return Layout(a.mesh.shape, placements, (total, *rest), (bounds, *(None,) * len(rest)))


def row_selection(a: DArray, local: Any) -> DArray:
    """A DArray whose blocks along dim 0 are each rank's rows ``local``, in block order.

    ``a`` has only dim 0 sharded (:func:`row_layout`); see :func:`_row_bounds`
    for the result's layout (collective).
    """
    shape = local.shape
    placements, bounds = _row_bounds(a, shape[0])
    # A selection of the same rows as before (a loop's steady state) has its spec.
    key = (a._spec, bounds if bounds is not None else shape[0], shape[1:], local.dtype)
    spec = _selected.get(key)
    if spec is None:
        layout = _selection_layout(a, placements, bounds, shape[0], tuple(shape[1:]))
        spec = DArraySpec(a.mesh, layout, local.dtype)
        if len(_selected) >= 1024:  # bounded: specs hold meshes
            _selected.clear()
        _selected[key] = spec
    return DArray(local, spec)


# (a's spec, the selection's dim-0 boundaries or length, its other dims, dtype) -> spec
_selected: dict[tuple[Any, ...], DArraySpec] = {}


def leading_mask(a: DArray, mask: Any) -> bool:
    """Whether ``mask`` is a bool DArray of ``a``'s shape, or of its leading dims, on its mesh."""
    return (
        type(mask) is DArray
        and mask.dtype == np.bool_
        and bool(mask.ndim)
        and mask.shape == a.shape[: mask.ndim]
        and mask.mesh is a.mesh
    )


def _mask_like(a: DArray, mask: DArray) -> DArray:
    """``mask`` laid out as ``a``'s leading dims (no move when it already is)."""
    layout = a.spec.layout
    k = mask.ndim
    if k == a.ndim and mask._spec.layout == layout:  # (the usual mask: a's own layout)
        return mask
    return mask.with_layout(Layout(layout.mesh_shape, layout.placements, mask.shape,
                                   layout.bounds[:k]))  # fmt: skip


# (a's spec, mask's spec) of the selections a[mask] where neither moves (a has only
# dim 0 sharded, the mask a's layout) on a rank holding a block: the checks and
# layouts are then the same on every call.
_in_place: dict[tuple[DArraySpec, DArraySpec], None] = {}


def mask_select(a: DArray, mask: DArray) -> DArray:
    """``a[mask]`` for a boolean DArray of ``a``'s shape, or of its leading dims.

    The result has one dim for the mask's dims (their True positions in C
    order), then ``a``'s other dims whole; it is sharded on that first dim,
    usually unevenly. No element moves when only dim 0 is sharded;
    otherwise both are first redistributed so that it is. Collective (the
    selected counts are shared).
    """
    if (a._spec, mask._spec) in _in_place and type(a) is DArray and type(mask) is DArray:
        return row_selection(a, a._local[mask._local])  # (seen before: nothing moves)
    if not leading_mask(a, mask):
        raise ArgumentTypeError(
            f"a boolean mask must be a bool DArray of the array's shape {a.shape} or of its "
            f"leading dims, on its mesh; got {mask.dtype} of shape {mask.shape}"
        )
    spec, mask_spec = a._spec, mask._spec
    a = row_layout(a)
    mask = _mask_like(a, mask)
    k = mask.ndim
    if a._spec is spec and mask._spec is mask_spec and a.mesh.coordinate is not None:
        if len(_in_place) >= 1024:  # bounded: specs hold meshes
            _in_place.clear()
        _in_place[spec, mask_spec] = None
    if a.mesh.coordinate is None:
        empty = array_module(a.local).empty((0, *a.shape[k:]), a.dtype)
        shape = (0, *a.shape[k:])
        layout = Layout(a.mesh.shape, (Replicate(),) * a.mesh.ndim, shape, (None,) * len(shape))
        return DArray(empty, DArraySpec(a.mesh, layout, a.dtype))
    return row_selection(a, a.local[mask.local])


def mask_assign(a: DArray, mask: Any, value: Any) -> bool:
    """``a[mask] = value`` written in place on each rank's block, when it can be; False if not.

    For a bool DArray ``mask`` of ``a``'s shape or of its leading dims, with
    ``a`` laid out with only dim 0 sharded (its layout is kept: ``a`` is
    written, not replaced). The mask is laid out like ``a`` (no move when it
    is). A 0-d value is written where the mask is True, with no message.
    Otherwise the selection's counts are shared (one all-gather of an int,
    as :func:`mask_select`), and the value, broadcast as NumPy does to the
    selection's shape ``(count, *a.shape[k:])``, is laid out as the
    selection: a DArray like ``a[mask]`` (``z[m] = z[m] ** 2 + c[m]``)
    moves nothing; an ndarray every rank holds is cut there. False (nothing
    sent) where ``a`` has another layout or the value is neither: the caller
    takes the general path. Collective.
    """
    if (
        type(value) is DArray
        and type(mask) is DArray
        and value._view is None
        and _hooks.before_block_access is None
    ):
        whole = _assigned.get((a._spec, mask._spec, value._spec))
        if whole is not None and _assign_seen(a, mask, value, whole):
            return True
    if not leading_mask(a, mask) or row_layout(a) is not a:
        return False
    darray = isinstance(value, DArray)
    if darray and value.mesh is not a.mesh:
        return False
    if not darray and not isinstance(value, (bool, int, float, complex, np.generic, np.ndarray)):
        return False
    given, given_mask = value, mask
    mask = _mask_like(a, mask)
    if not darray and np.ndim(value) == 0:  # Game of Life's Z[birth | survive] = 1
        if a.mesh.coordinate is not None:
            a.local[mask.local] = value
        return True

    if a.mesh.coordinate is None:  # no block here, and no part in the mesh's messages
        return True
    count = int(np.count_nonzero(to_host(mask.local)))
    placements, bounds = _row_bounds(a, count)
    layout = _selection_layout(a, placements, bounds, count, tuple(a.shape[mask.ndim :]))
    _check_broadcast(value.shape if darray else np.shape(value), layout.shape)
    if darray and value.shape == layout.shape:  # like a[mask] (z[m] = z[m] ** 2 + c[m]): kept
        value = value.with_layout(layout)
    elif darray:  # the same values for every selected row: whole on every rank
        value = value.redistribute(a.mesh, [Replicate()] * a.mesh.ndim)
    if darray and value.shape == layout.shape:
        if (  # laid out as the selection already (no move): the next call goes straight
            type(given) is DArray
            and value._local is given._local
            and mask is given_mask
            and type(a) is DArray
        ):
            _remember_assign(a, mask, given)
        a.local[mask.local] = value.local
        return True
    xp = array_module(a.local)
    full = xp.broadcast_to(value.local if darray else xp.asarray(value), layout.shape)
    a.local[mask.local] = full[layout.slices(a.mesh.coordinate)]
    return True


# (a's spec, the mask's, the value's) of assignments ``a[mask] = value`` where nothing
# moved: the value was laid out as ``a[mask]`` (``z[m] = z[m] ** 2 + c[m]``) -> whether
# each rank holds every selected row (one block along dim 0, the value whole), so that
# NumPy's own count check on the block is every rank's.
_assigned: dict[tuple[DArraySpec, DArraySpec, DArraySpec], bool] = {}


def _remember_assign(a: DArray, mask: DArray, value: DArray) -> None:
    whole = (
        _counts_of(a).comm is None
        and value._local.shape == value.shape
        and not any(p.is_partial() for p in value.placements)
    )
    if len(_assigned) >= 1024:  # bounded: specs hold meshes
        _assigned.clear()
    _assigned[a._spec, mask._spec, value._spec] = whole


def _assign_seen(a: DArray, mask: DArray, value: DArray, whole: bool) -> bool:
    """``a[mask] = value`` for specs that wrote in place before; False (nothing written,
    the same on every rank) where the mask's counts now differ from the value's rows."""
    if whole:  # one block: NumPy raises its own error on every rank alike
        a._local[mask._local] = value._local
        return True
    _, bounds = _row_bounds(a, int(np.count_nonzero(to_host(mask._local))))
    if bounds != value._spec.layout.bounds[0]:
        return False  # (the general path counts again and raises NumPy's error)
    a._local[mask._local] = value._local
    return True


def _check_broadcast(shape: tuple[int, ...], selected: tuple[int, ...]) -> None:
    """NumPy's ``ValueError`` when a value of ``shape`` does not broadcast to the selection."""
    try:
        fits = np.broadcast_shapes(shape, selected) == selected
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"shape mismatch: value array of shape {shape} could not be broadcast to indexing "
            f"result of shape {selected}"
        )


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
