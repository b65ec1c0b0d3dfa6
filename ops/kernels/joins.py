"""Joining DArrays along a sharded axis without gathering: re-cut, then join block by block.

``np.concatenate``'s rule joins blocks that hold the whole joining axis, so an
operand sharded along it would first be replicated along its mesh dims (an
all-gather). :func:`join` instead gives the result balanced blocks along
the joining axis and moves to each rank the parts of each operand that fall
in its block (``DArray.with_layout``: point-to-point messages, an all-to-all
at most); each rank then concatenates its pieces in operand order. Every
rank derives the same plan from the layouts, so the messages match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError
from dmesh.core.layout import Layout
from dmesh.core.placement import Placement, Replicate
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = ["as_darray", "join", "sharded_along"]


def as_darray(x: Any, mesh: Any) -> DArray:
    """``x`` as a DArray on ``mesh``: a plain value is the same on every rank, so replicated."""
    if isinstance(x, DArray):
        return x
    from dmesh.convert import distribute

    return distribute(np.asarray(x), mesh, [Replicate()] * mesh.ndim)


def sharded_along(x: Any, axis: int) -> bool:
    """Whether some mesh dim shards ``x`` (a DArray) along ``axis``."""
    return isinstance(x, DArray) and any(p.is_shard(axis) for p in x.placements)


# (operand specs, axis, cut) -> (each operand's target layout, the result spec,
# the normalized axis): what a join of DArrays already laid out with the
# result's placements does, from the specs alone (every rank the same).
_plans: dict[tuple[Any, ...], tuple[tuple[Layout, ...], DArraySpec, int]] = {}


def join(arrays: Sequence[Any], axis: int, cut: Sequence[int] | None = None) -> DArray:
    """``np.concatenate(arrays, axis)`` that never gathers an operand sharded along ``axis``.

    Without such an operand this is ``np.concatenate`` (its rule). Otherwise
    the result takes the placements of the first operand sharded along
    ``axis`` (``Partial`` ones reduced) and balanced blocks along it, or the
    boundaries ``cut`` when given (``np.roll`` keeps the input's). Collective.
    """
    key = None
    if all(type(x) is DArray for x in arrays):
        key = (tuple(x._spec for x in arrays), axis, None if cut is None else tuple(cut))
        planned = _plans.get(key)
        if planned is not None:  # the same specs joined before: moves and result known
            moved = [x.with_layout(t).local for x, t in zip(arrays, planned[0])]
            joined_block = array_module(moved[0]).concatenate(moved, axis=planned[2])
            return DArray(joined_block.astype(planned[1].dtype, copy=False), planned[1])
    mesh = next(x for x in arrays if isinstance(x, DArray)).mesh
    items = [as_darray(x, mesh) for x in arrays]
    first = items[0]
    if any(x.ndim != first.ndim for x in items) or first.ndim == 0:
        raise ArgumentError(
            "all the input arrays must have the same number of dimensions (at least 1); "
            f"got shapes {[x.shape for x in items]}"
        )
    axis = _axis(axis, first.ndim)
    for x in items:
        if any(n != f for d, (n, f) in enumerate(zip(x.shape, first.shape)) if d != axis):
            raise ArgumentError(
                f"all the input array dimensions except for the concatenation axis must match "
                f"exactly; got shapes {[y.shape for y in items]} joined along axis {axis}"
            )
    if not any(sharded_along(x, axis) for x in items):
        joined: DArray = np.concatenate(items, axis)  # type: ignore[assignment]  # dispatched
        return joined
    reference = next(x for x in items if sharded_along(x, axis))
    placements: tuple[Placement, ...] = tuple(
        Replicate() if p.is_partial() else p for p in reference.placements
    )
    items = [x if x.placements == placements else x.redistribute(mesh, placements) for x in items]
    reference = next(x for x in items if sharded_along(x, axis))
    shape = list(first.shape)
    shape[axis] = sum(x.shape[axis] for x in items)
    out_cut = Layout.balanced(mesh.shape, placements, tuple(shape)).bounds[axis]
    assert out_cut is not None  # the axis is sharded in ``placements``
    if cut is not None and len(cut) == len(out_cut) and cut[-1] == shape[axis]:
        out_cut = tuple(int(b) for b in cut)
    bounds = list(reference.spec.layout.bounds)
    pieces: list[Any] = []
    targets: list[Layout] = []
    offset = 0
    for x in items:
        n = x.shape[axis]
        bounds[axis] = tuple(min(max(b - offset, 0), n) for b in out_cut)
        target = Layout(mesh.shape, placements, x.shape, tuple(bounds))
        pieces.append(x.with_layout(target).local)
        targets.append(target)
        offset += n
    bounds[axis] = out_cut
    layout = Layout(mesh.shape, placements, tuple(shape), tuple(bounds))
    dtype = np.result_type(*[x.dtype for x in items])
    spec = DArraySpec(mesh, layout, dtype)
    if mesh.coordinate is None:  # not a member: an empty block of the right shape
        return DArray(array_module(first.local).empty(spec.local_shape(), dtype), spec)
    if key is not None and all(x is y for x, y in zip(items, arrays)):  # (none redistributed)
        if len(_plans) >= 1024:
            _plans.clear()
        _plans[key] = (tuple(targets), spec, axis)
    local = array_module(pieces[0]).concatenate(pieces, axis=axis)
    return DArray(local.astype(dtype, copy=False), spec)


def _axis(axis: Any, ndim: int) -> int:
    value = int(axis)
    if not -ndim <= value < ndim:
        raise np.exceptions.AxisError(value, ndim)
    return value % ndim
