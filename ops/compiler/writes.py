"""Writes in a trace: ``a[key] = value`` recorded as a node that writes a block in place.

A write node's function writes the value (a constant scalar, or the block of a
traced array laid out as the selection) into the part of the target's block
the key selects on this rank, and returns that block: the node's result is
its target's slot again, so the ops after it read the written block, and the
views taken before it (block views, as NumPy's) see the write as NumPy's do.
The replay (:mod:`~dmesh.ops.compiler.replay`) keeps writes in place in the
order: nothing is moved across one, and no copy or message made before one
is used after it.

Recorded: plain basic keys (ints, slices, ``None``, ``...``) into an array
with no partial terms and no mirrored blocks; a scalar value for any such
key (each rank writes its part, none sends: ``u[0, :] = 0.0`` included),
a traced array of the selection's shape for a key that selects a block view
(moved to the selection's layout first where it is not, as eagerly), and
into a detached selection (an int on a sharded dim) a value read from one
with the same owners, cut alike (``h[0] = h[1]`` with both rows on one
rank: its owners copy). Any other write is a graph break: other arrays
into detached selections, broadcasting values, masks and index arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh._call_keys import index_key
from dmesh.core.layout import Layout
from dmesh.core.spec import DArraySpec
from dmesh.ops.compiler.nodes import stable
from dmesh.ops.indexing.masks import rows_only
from dmesh.ops.indexing.plans import NOWHERE, selection
from dmesh.ops.pipeline import SCALARS

__all__ = ["mask_writer", "plan_mask_write", "plan_write", "writer"]


def writer(local: tuple[Any, ...] | None) -> Callable[[Any, Any], Any]:
    """A write node's function: ``value`` into ``block[local]`` (nothing where ``local`` is
    None: the rank holds none of the selection), then the block."""

    def write(block: Any, value: Any) -> Any:
        if local is not None:
            block[local] = value
        return block

    return write


def plan_write(
    spec: DArraySpec,
    key: Any,
    value: Any,
    traced: bool,
    held: dict[int, int] | None,
    graph_break: Callable[[str], Any],
) -> tuple[Callable[[Any, Any], Any], Layout | None]:
    """How ``a[key] = value`` is recorded for an ``a`` of ``spec``: the write node's function
    and the layout the value must have first (None for a scalar); ``traced`` says whether
    ``value`` is a stand-in of the trace, ``held`` the owners of a value read from a
    detached selection (None for any other). Anything else calls ``graph_break``."""
    hashable = index_key(key)
    if hashable is None:
        graph_break(f"assignment with the key {stable(key)} (masks, index arrays)")
    plan = selection(spec, key, hashable)  # (raises as NumPy does for a bad key)
    if plan.mirrored or plan.partial:
        graph_break("assignment into partial terms or mirrored blocks")
    if isinstance(value, SCALARS) or (isinstance(value, np.ndarray) and value.ndim == 0):
        _converted(spec.dtype, value)
        return writer(plan.local if plan.local is not None or not spec.ndim else NOWHERE), None
    if not traced:
        graph_break(f"assignment of a {type(value).__name__} (not a traced array)")
    if value.shape != plan.spec.shape:
        graph_break(f"assignment broadcasting {value.shape} to {plan.spec.shape}")
    if plan.detached:
        # h[0] = h[1]: a value read from a selection with the same owners, cut alike, is
        # copied by its owners from their own block (eager's owner copy; the others
        # hold identity terms of it and none of the target).
        if held != plan.owners or value.spec.layout != plan.layout or not plan.live:
            graph_break("assignment of an array into a detached selection (its owners copy)")
        return writer(plan.local), None
    return writer(plan.local), plan.layout


def mask_writer() -> Callable[[Any, Any, Any], Any]:
    """A mask write node's function: ``value`` where ``mask`` (this rank's block of it) is
    True in ``block``, then the block."""

    def write(block: Any, mask: Any, value: Any) -> Any:
        block[mask] = value
        return block

    return write


def plan_mask_write(
    spec: DArraySpec, mask: DArraySpec, value: Any, graph_break: Callable[[str], Any]
) -> Layout:
    """How ``a[mask] = value`` is recorded for an ``a`` of ``spec`` and a traced boolean
    ``mask`` of its shape: a scalar written where the mask's block is True, each rank in
    its own block, as eagerly (``dmesh.ops.indexing.masks.mask_assign``: no message); the
    layout the mask must have first (``a``'s, moved to it where it is not, as eagerly).
    Other mask writes (an array of values, whose counts are exchanged; a mask of leading
    dims; ``a`` sharded on other dims, whose eager path gathers the True positions) call
    ``graph_break``."""
    if mask.dtype != np.bool_ or mask.shape != spec.shape:
        graph_break(f"assignment with a {mask.dtype} mask of shape {mask.shape} (not a's)")
    if not (isinstance(value, SCALARS) or (isinstance(value, np.ndarray) and value.ndim == 0)):
        graph_break("assignment of an array through a mask (the counts are exchanged)")
    if not rows_only(spec.layout.placements):
        graph_break("assignment through a mask into an array not sharded on dim 0 alone")
    _converted(spec.dtype, value)
    return spec.layout


def _converted(dtype: np.dtype, value: Any) -> None:
    """Convert ``value`` to ``dtype`` as eager's write does, so a bad one raises while
    tracing, as it would eagerly (NumPy's own error)."""
    np.zeros(1, dtype)[0] = value
