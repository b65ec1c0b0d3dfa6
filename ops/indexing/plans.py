"""Cached plans of basic keys: what ``a[key]`` and ``a[key] = v`` compute from (spec, key).

Everything a basic selection needs before it reads a block (the result's
spec, this rank's key into its block, which coordinate holds an int-indexed
element, whether the result is a detached view) depends only on the array's
spec and the key, so it is computed once per (spec, key) and kept, as
dispatch keeps its steps. A key is cacheable when it is plain: Python or
NumPy integers (not bools), slices of them, ``None`` and ``...``, alone or in
a tuple; :func:`dmesh._call_keys.index_key` makes its hashable form (slices
are unhashable before Python 3.12), and anything else (arrays, masks, lists)
gets None and takes the general path.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from dmesh import _hooks
from dmesh._call_keys import index_key
from dmesh.collectives.device import array_module
from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Replicate
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.indexing import basic, views
from dmesh.ops.indexing.basic import NOT_HELD, absent_term, plan_index
from dmesh.ops.indexing.views import ViewOf, c_contiguous, normalize

__all__ = [
    "NOWHERE", "Selection", "block_views", "getitem", "held_views", "scalar_writes",
    "selection",
]  # fmt: skip

LIMIT = 4096  # plans kept; specs hold meshes, so the cache is bounded


class Selection(NamedTuple):
    """``a[key]`` for an ``a`` of some spec, planned without touching a block."""

    spec: DArraySpec  # of the result
    local: tuple[Any, ...] | None  # this rank's key into its block (ends in ...); None: not held
    owners: dict[int, int]  # mesh dim -> coordinate holding an int-indexed element
    mirrored: tuple[int, ...]  # result dims whose blocks must be mirrored (a copy)
    detached: bool  # the result is no block view of a (dmesh.ops.indexing.views)
    live: bool  # detached, yet the holder's block is a view of a's (no partial, no mirror)
    partial: bool  # a's blocks are partial terms
    items: tuple[int | range | None, ...]  # the key as views.normalize gives it
    layout: Layout  # of the selection
    writable: Layout  # the selection's layout with its partial dims replicated


_selections: dict[tuple[DArraySpec, Any], Selection] = {}
# The selections that are a view of the rank's block and need nothing more
# (held here, not detached, not mirrored): (spec, plain key) -> (block key,
# result spec), read first by :func:`getitem`.
block_views: dict[tuple[DArraySpec, Any], tuple[tuple[Any, ...], DArraySpec, bool]] = {}
# The detached selections (an int on a sharded dim, a partial array's) whose
# elements this rank holds: (spec, plain key) -> (block key, result spec, items,
# live, owners), the ViewOf they get (dmesh.ops.indexing.views).
held_views: dict[tuple[DArraySpec, Any], tuple[Any, ...]] = {}
# Where ``a[key] = x`` writes a scalar into this rank's block, for selections
# of arrays without partial terms and without mirrored blocks: the block key,
# or NOWHERE (an empty selection of a block with dims) on a rank that holds
# none of it, where the
# write still converts ``x`` as NumPy does, so a value the dtype cannot hold
# (1000 into int8, NaN into an int) raises on every rank, not on the holders
# alone.
NOWHERE = (slice(0, 0), Ellipsis)
scalar_writes: dict[tuple[DArraySpec, Any], tuple[Any, ...]] = {}


def selection(spec: DArraySpec, key: Any, hashable: Any) -> Selection:
    """The plan of ``a[key]`` for an ``a`` of ``spec`` (``hashable`` is ``index_key(key)``).

    Raises as NumPy does for a bad key (out of range, too many indices), on
    every rank alike: the check reads the spec only.
    """
    cache_key = (spec, hashable)
    found = _selections.get(cache_key)
    if found is not None:
        return found
    plan = plan_index(spec, key)
    result = DArraySpec(spec.mesh, plan.layout, spec.dtype)
    held = spec.mesh.coordinate is not None and all(k is not NOT_HELD for k in plan.local)
    local = (*plan.local, Ellipsis) if held else None
    partial = any(p.is_partial() for p in spec.placements)
    detached = bool(plan.owners) or bool(plan.mirrored) or partial
    layout = plan.layout
    writable = Layout(
        layout.mesh_shape,
        tuple(Replicate() if isinstance(p, Partial) else p for p in layout.placements),
        layout.shape,
        layout.bounds,
    )
    items = normalize(spec.shape, key)
    live = not partial and not plan.mirrored
    found = Selection(
        result, local, plan.owners, plan.mirrored, detached, live, partial, items, layout,
        writable,
    )  # fmt: skip
    if len(_selections) >= LIMIT:
        _selections.clear()
        block_views.clear()
        held_views.clear()
        scalar_writes.clear()
    _selections[cache_key] = found
    if local is not None and not detached and not plan.mirrored:
        block_views[cache_key] = (local, result, c_contiguous(spec.shape, key))
    if local is not None and detached and not plan.mirrored:
        held_views[cache_key] = (local, result, items, live, plan.owners)
    if not plan.mirrored and not partial and (local is not None or spec.ndim):
        scalar_writes[cache_key] = local if local is not None else NOWHERE
    return found


def getitem(a: DArray, key: Any) -> DArray:
    """``a[key]``: a plain basic key from the plan cache, any other key by ``basic.getitem``."""
    hashable = index_key(key)
    if hashable is None:
        return basic.getitem(a, key)
    spec = a._spec
    block_view = block_views.get((spec, hashable))
    if type(a) is DArray and a._view is None and _hooks.before_block_access is None:
        if block_view is not None:
            # The common case: a view of this rank's block, nothing else to record.
            result = DArray(a._local[block_view[0]], block_view[1])
            if block_view[2] and (a._contiguous or a._local.base is None):  # (views.whole)
                result._contiguous = True  # (a[1:] of a whole a: NumPy's reshape is a view)
            return result
        held = held_views.get((spec, hashable))
        if held is not None:  # a[1] of a row-sharded a, on the rank holding the row
            local, result_spec, items, live, owners = held
            result = DArray(a._local[local], result_spec)
            result._view = ViewOf(a, items, live, True, owners)
            return result
    plan = selection(spec, key, hashable)
    if plan.mirrored:  # blocks move: the general path
        return basic.getitem(a, key)
    block = a.local
    local = plan.local
    if local is not None:
        result = DArray(block[local], plan.spec)
    elif a.mesh.coordinate is None:
        result = DArray(array_module(block).empty(plan.spec.local_shape(), a.dtype), plan.spec)
    else:  # another rank holds the element: an identity term
        result = DArray(absent_term(plan.spec, plan.owners, array_module(block)), plan.spec)
    if a._view is not None:  # a view of a detached view: composed onto its root
        views.record(a, key, result, bool(plan.owners), False, local is not None)
    elif plan.detached:
        result._view = ViewOf(a, plan.items, plan.live, local is not None, plan.owners)
    elif local is not None and views.whole(a) and c_contiguous(spec.shape, key):
        result._contiguous = True  # (as the cached path above)
    return result
