"""Assignment through basic keys: ``a[key] = value`` (``DArray.__setitem__``).

A scalar or an array every rank holds is written locally into the part of
each block the selection covers; a DArray value is first laid out like the
selection (collective, see ``_assign_darray``); keys with integer arrays
or masks go to ``dmesh.ops.indexing.fancy``. A detached view (an int
index on a sharded dim, a selection of a partial array, mirrored blocks; see
:mod:`dmesh.ops.indexing.views`) writes into its root instead.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from dmesh import _hooks
from dmesh._call_keys import index_key
from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.core.layout import Layout
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.indexing import fancy as fancy_indexing
from dmesh.ops.indexing import keys as fancy_keys
from dmesh.ops.indexing import masks, views
from dmesh.ops.indexing.basic import NOT_HELD, expand_key, plan_index
from dmesh.ops.indexing.fancy import block_of, broadcast_layout
from dmesh.ops.indexing.operands import reduce_in_place
from dmesh.ops.indexing.plans import Selection, scalar_writes, selection
from dmesh.ops.pipeline import SCALARS

__all__ = ["setitem"]


def setitem(a: DArray, key: Any, value: Any) -> None:
    """``a[key] = value``: a scalar, an array every rank holds, or a DArray that broadcasts.

    Local writes only, except that a DArray value is first moved to the
    selection's layout (collective; see ``_assign_darray``). Keys with
    integer arrays or boolean DArrays go to ``dmesh.ops.indexing.fancy``
    (collective). A ``Partial`` array is first reduced in place (collective):
    it becomes replicated along its partial mesh dims.
    """

    hashable = index_key(key)
    if hashable is not None:
        if type(a) is DArray and a._view is None and _hooks.before_block_access is None:
            # The commonest writes, from what earlier ones found: a Python scalar
            # into a view of the rank's own block (p[-1, :] = 0.0), or a DArray
            # laid out as the selection (p[:, -1] = p[:, -2]).
            kind = type(value)
            if kind in _PLAIN_SCALARS:
                where = scalar_writes.get((a._spec, hashable))
                if where is not None:
                    a._local[where] = value
                    return
            elif kind is DArray:
                seen = value._view
                if seen is None:
                    local = _direct_writes.get((a._spec, hashable, value._spec))
                    if local is not None:
                        a._local[local] = value._local
                        return
                elif type(seen) is views.ViewOf and seen.live:
                    # p[0, :] = p[1, :]: both rows on one coordinate, copied there.
                    entry = _owner_copies.get((a._spec, hashable, value._spec))
                    if (
                        entry is not None
                        and seen.owners == entry[0]
                        and (seen.root is not a or seen.items != entry[1])
                    ):
                        if entry[2] is not None:
                            a._local[entry[2]] = value._local
                        return
        if _planned(a, key, hashable, value):
            return
    view = a._view
    if type(view) is views.Derived:
        view.refuse()
    if type(view) is views.Reshaped:  # a reshape that moved elements: written, then back
        with views.reshaped_write(a):
            setitem(a, key, value)
        return
    if view is not None:  # a detached view: the write goes to its root (dmesh.ops.indexing.views)
        _write_through(a, view, key, value)
        return
    # Writing into partial terms would leave terms that no longer sum to the
    # written value: the array is reduced in place first (collective).
    reduce_in_place(a)
    if masks.mask_assign(a, key, value):  # a mask of a's leading dims: written in place
        return
    if masks.has_mask(key):  # the mask's nonzero() arrays: values go to the True positions
        key = masks.expand_masks(a, key)
    if fancy_indexing.is_advanced(key):
        _check_fancy_view(a.spec, key)
        fancy_indexing.setitem(a, key, value)
        return
    layout, local_key, _, mirrored = plan_index(a.spec, key)
    if isinstance(value, DArray):
        _assign_darray(a, key, layout.shape, value)
        return
    if a.mesh.coordinate is None or any(k is NOT_HELD for k in local_key):
        if isinstance(value, SCALARS):  # converted as the holders' write does: raises alike
            a.local.reshape(-1)[:0] = value
        return
    xp = array_module(a.local)
    value = xp.asarray(value)
    if value.ndim == 0:
        a.local[local_key] = value
        return
    # A value every rank holds whole: write the part this rank's selection covers.
    full = xp.broadcast_to(value, layout.shape)
    if mirrored:
        full = xp.flip(full, mirrored)
    coord = a.mesh.coordinate
    a.local[local_key] = full[layout.slices(coord)] if coord is not None else full


# Python scalars, whose write into a block is NumPy's own (casting and all).
_PLAIN_SCALARS = frozenset((int, float, complex, bool))
# (spec, plain key, value spec) -> this rank's key into its block, where a
# DArray value not a detached view is laid out as the selection (its layout is
# the one _value_layout gives): its block is written as it is.
_direct_writes: dict[tuple[Any, ...], tuple[Any, ...]] = {}
# (spec, plain key, value spec) -> (owners, items, this rank's block key or None)
# of a selection whose value is a live detached view with those owners, cut as
# the selection but on the owners' mesh dims: its holders copy their elements.
_owner_copies: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}
# (spec, plain key, value spec) -> (the value's layout meeting the selection or
# None, whether it cuts as the selection does but on the int-indexed mesh dims).
_value_layouts: dict[tuple[Any, ...], tuple[Layout | None, bool]] = {}


def _planned(a: DArray, key: Any, hashable: Any, value: Any) -> bool:
    """``a[key] = value`` from the plan cache, when nothing needs the general path.

    That is: ``a`` has no partial terms (or is a live detached view, whose
    holders write their blocks, the root's elements, and whose other ranks
    keep their identity terms), no block is mirrored, and the value is a
    scalar, an array every rank holds, or a DArray on ``a``'s mesh (laid out
    like the selection, replicated along the mesh dims where one coordinate
    holds an int-indexed element). False leaves the write to the general
    path, with nothing done.
    """
    view = a._view
    if view is not None and type(view) is not views.ViewOf:
        return False
    plan = selection(a._spec, key, hashable)
    if plan.mirrored:
        return False
    if view is None:
        if plan.partial:  # partial terms: reduced first, by the general path
            return False
    elif not view.live:
        return False
    if isinstance(value, DArray):
        if value.mesh is not a.mesh:
            return False
        seen = value._view
        if (
            view is None
            and type(seen) is views.ViewOf
            and seen.root is a
            and seen.live
            and seen.items == plan.items
        ):  # a[k] += 1's last step: v = a[k] was written through already
            return True
        meeting = _value_layouts.get((a._spec, hashable, value._spec))
        if meeting is None:
            meeting = _value_layout(a._spec, hashable, plan, value)
        target, same_cut = meeting
        if target is None:
            return False
        if (
            same_cut
            and view is None
            and type(seen) is views.ViewOf
            and seen.live
            and seen.owners == plan.owners
        ):
            # p[0, :] = p[1, :] with both rows on one rank: the value's holders
            # are the selection's owners, and copy their own elements (the
            # general path would first reduce the value's terms on every rank).
            if len(_owner_copies) >= 4096:
                _owner_copies.clear()
            _owner_copies[a._spec, hashable, value._spec] = (plan.owners, plan.items, plan.local)
            if plan.local is not None:
                a.local[plan.local] = value._local
            return True
        layout = value._spec.layout
        if layout is target and view is None and seen is None and plan.local is not None:
            if len(_direct_writes) >= 4096:
                _direct_writes.clear()
            _direct_writes[a._spec, hashable, value._spec] = plan.local  # (see setitem)
        moved = value if layout is target or layout == target else value.with_layout(target)
        if plan.local is not None and (view is None or view.held):
            a.local[plan.local] = moved._local
        return True
    if not isinstance(value, SCALARS):
        xp = array_module(a._local)
        value = xp.asarray(value)
        if value.ndim:  # an array every rank holds whole: each writes the part it selects
            full = xp.broadcast_to(value, plan.layout.shape)  # (raises on every rank alike)
            coord = a.mesh.coordinate
            value = full if coord is None else full[plan.layout.slices(coord)]
    if plan.local is not None and (view is None or view.held):
        a.local[plan.local] = value
    elif isinstance(value, SCALARS):  # converted as the holders' write does: raises alike
        a.local.reshape(-1)[:0] = value
    return True


def _same_cut(layout: Layout, target: Layout, owners: dict[int, int]) -> bool:
    """Whether ``layout`` cuts its array as ``target`` does, but on the ``owners`` mesh dims."""
    return (
        layout.shape == target.shape
        and layout.bounds == target.bounds
        and all(
            p == q
            for m, (p, q) in enumerate(zip(layout.placements, target.placements))
            if m not in owners
        )
    )


def _value_layout(
    spec: DArraySpec, hashable: Any, plan: Selection, value: DArray
) -> tuple[Layout | None, bool]:
    """The layout a DArray value of ``a[key] = value`` takes so its blocks meet the selection's,
    and whether the value already cuts its array as that layout does but on the mesh dims
    where one coordinate holds the int-indexed elements (``plan.owners``); remembered.

    Dims the value broadcasts over are replicated, the others cut as the
    selection is; None where the value needs the general path (more dims
    than the selection, or shapes that do not broadcast: it raises there).
    """
    selected = plan.writable
    target: Layout | None = None
    lead = len(selected.shape) - value.ndim
    fits = lead >= 0 and all(
        v in (1, s) for v, s in zip(value.shape, selected.shape[lead:], strict=True)
    )
    if fits:
        target = broadcast_layout(selected, value.shape)
        if target == value._spec.layout:  # the value's own: later calls compare by identity
            target = value._spec.layout
    same_cut = (
        target is not None
        and bool(plan.owners)
        and _same_cut(value._spec.layout, target, plan.owners)
    )
    if len(_value_layouts) >= 4096:
        _value_layouts.clear()
    _value_layouts[spec, hashable, value._spec] = (target, same_cut)
    return target, same_cut


def _write_through(a: DArray, view: views.ViewOf, key: Any, value: Any) -> None:
    """``a[key] = value`` for a detached view ``a``: ``root[composed key] = value``."""
    basic_key = not masks.has_mask(key) and not fancy_indexing.is_advanced(key)
    items = views.compose(view.items, key, a.ndim) if basic_key else None
    if items is None:  # masks, index arrays, an empty new axis: through a private copy
        with views.writing(a):
            setitem(a, key, value)
        return
    plan_index(a.spec, key)  # raises as NumPy for a bad key, before the root sees it
    if (
        isinstance(value, DArray)
        and type(value._view) is views.ViewOf
        and value._view.root is view.root
    ):
        value = value.copy()  # it may read what the write changes (NumPy copies overlaps)
    setitem(view.root, views.root_key(items), value)
    views.refresh(a)


def _assign_darray(a: DArray, key: Any, shape: tuple[int, ...], value: DArray) -> None:
    """``a[key] = value`` for a DArray ``value`` broadcastable to the selection's ``shape``.

    As NumPy: leading length-1 dims beyond the selection's are dropped and the
    rest broadcast (a 0-d value is one element; a partial one is reduced).
    Each int of the key becomes a length-1 slice and the value gets a
    length-1 dim there (views), so that the value is laid out like the
    selection: its elements go only to the ranks whose blocks they fill, and
    it is replicated only along the dims it is broadcast over. Collective.
    """
    if value.mesh is not a.mesh:
        raise ArgumentTypeError("the assigned DArray must be on the array's mesh")
    extra = 0  # NumPy drops leading length-1 dims of a value with more dims than the selection
    while value.ndim - extra > len(shape) and value.shape[extra] == 1:
        extra += 1
    try:
        fits = np.broadcast_shapes(value.shape[extra:], shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ArgumentError(
            f"could not broadcast input array from shape {value.shape} into shape {shape}"
        )
    items = expand_key(key, a.ndim)
    aligned = [1] * (len(shape) - value.ndim + extra) + list(value.shape[extra:])
    new_key: list[Any] = []
    value_shape: list[int] = []
    d = 0
    for item in items:
        if item is None or isinstance(item, slice):
            new_key.append(item)
            value_shape.append(aligned.pop(0))
        else:  # an int: the same element as a length-1 slice, a length-1 dim of the value
            index = operator.index(item) % a.shape[d]
            new_key.append(slice(index, index + 1))
            value_shape.append(1)
        d += item is not None
    if tuple(value_shape) != value.shape:
        reshaped: Any = np.reshape(value, tuple(value_shape))  # only length-1 dims: a view
        value = reshaped
    layout, local_key, _, mirrored = plan_index(a.spec, tuple(new_key))
    if any(d in mirrored and value.shape[d] > 1 for d in range(value.ndim)):
        # reversed where the selection steps backwards (a permute of the value's blocks)
        flips = [d in mirrored and value.shape[d] > 1 for d in range(value.ndim)]
        value = value[tuple(slice(None, None, -1 if f else 1) for f in flips)]
    coord = a.mesh.coordinate
    if coord is None:
        return
    a.local[local_key] = block_of(value, layout, coord)


def _check_fancy_view(spec: DArraySpec, key: Any) -> None:
    """Raise if an assignment with integer arrays would step backwards along a sharded dim.

    Fancy assignment writes into the view ``a[basic part of key]``; mirrored
    blocks are a copy, so writing there would be lost.
    """
    items = key if isinstance(key, tuple) else (key,)
    if not any(isinstance(i, slice) and i.step is not None and i.step < 0 for i in items):
        return
    dims = plan_index(spec, fancy_keys.parse(spec, key).basic).mirrored
    if dims:
        raise UnsupportedError(
            "assigning through integer arrays with a negative step on a sharded dim is not "
            "supported (that part of the selection is a copy, not a view); use a positive "
            "step with the value reversed (np.flip), or the integer indices in reverse order"
        )
