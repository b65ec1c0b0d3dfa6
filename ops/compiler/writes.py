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
(moved to the selection's layout first where it is not, as eagerly). Any
other write is a graph break: a detached selection with an array value
(``h[0] = h[1]`` on a sharded dim, whose owners copy), broadcasting values,
masks and index arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from dmesh.ops.compiler.trace import Node, StandIn, _stable
from dmesh.ops.indexing.plans import NOWHERE, plain_key, selection
from dmesh.ops.pipeline import SCALARS

if TYPE_CHECKING:
    from dmesh.core.layout import Layout
    from dmesh.ops.compiler.trace import Tracer

__all__ = ["record_setitem", "writer"]


def writer(local: tuple[Any, ...] | None) -> Callable[[Any, Any], Any]:
    """A write node's function: ``value`` into ``block[local]`` (nothing where ``local`` is
    None: the rank holds none of the selection), then the block."""

    def write(block: Any, value: Any) -> Any:
        if local is not None:
            block[local] = value
        return block

    return write


def record_setitem(tracer: Tracer, a: StandIn, key: Any, value: Any) -> None:
    """Record ``a[key] = value`` for ``a`` a stand-in of ``tracer``'s trace, or break."""
    trace = tracer.trace
    hashable = plain_key(key)
    if hashable is None:
        trace.graph_break(f"assignment with the key {_stable(key)} (masks, index arrays)")
    spec = a.spec
    plan = selection(spec, key, hashable)  # (raises as NumPy does for a bad key)
    if plan.mirrored or plan.partial:
        trace.graph_break("assignment into partial terms or mirrored blocks")
    scalar = isinstance(value, SCALARS) or (isinstance(value, np.ndarray) and value.ndim == 0)
    if scalar:
        # Converted as eager's write converts it (a bad value raises here, as eagerly).
        np.zeros(1, spec.dtype)[0] = value
        local = plan.local if plan.local is not None or not spec.ndim else NOWHERE
        _record(tracer, a, writer(local), None, value, key)
        return
    if not tracer.records(value):
        trace.graph_break(f"assignment of a {type(value).__name__} (not a traced array)")
    if plan.detached:
        trace.graph_break("assignment of an array into a detached selection (its owners copy)")
    if value.shape != plan.spec.shape:
        trace.graph_break(f"assignment broadcasting {value.shape} to {plan.spec.shape}")
    _record(tracer, a, writer(plan.local), plan.layout, value, key)


def _record(
    tracer: Tracer, a: StandIn, func: Any, layout: Layout | None, value: Any, key: Any
) -> None:
    """The write node: ``func(block of a, value)``, the value a constant or a stand-in
    moved to ``layout`` first (a recorded redistribution) where it is not laid out so."""
    trace = tracer.trace
    if isinstance(value, StandIn):
        if layout is not None and value.spec.layout != layout:
            value = tracer.move(value, layout)
        slot, part = value._slot, f"s{value._slot}"
    else:
        slot, part = trace.constant(value), f"{type(value).__name__}:{value!r}"
    description = f"s{a._slot}[{_stable(key)}] = {part} (in place)"
    node = Node(func, "setitem", None, (a._slot, slot), (None, None), a._slot, a.spec,
                description, writes=True)  # fmt: skip
    trace.nodes.append(node)
