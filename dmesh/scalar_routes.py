"""How the value of a one-element array is made: one ``Allreduce``, or nothing.

A one-element array with no sharded mesh dim holds on each rank either the
value itself or one term of it (``Partial``). Its value never needs the
general redistribution machinery (a ``DArraySpec`` per call, the planner's
cache, the step executor): where the partial mesh dims have one coordinate
each there is one term and the block is the value (``LOCAL``); where
they share one op, the value is one ``Allreduce`` of the terms, NaNs made
``+nan`` so that every rank gets the same bits (the route is
``(communicator, ReducePlan)``). Anything else (a sharded dim, several ops,
an average, an integer ``land``) is ``GATHER``: the general path.

``DArray.full_array`` and ``DArray.item`` take :func:`route_of` (all the
partial mesh dims at once). ``DArray._moved`` takes :func:`direct_move`: an
operand's partials reduced for an op (``x @ y``, then scalar arithmetic) are
the planned redistribution's one step, made directly, so eager, watched and
compiled runs make the same collectives. Routes depend on the spec and
target alone: every rank takes the same one and makes the same calls in the
same order.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives import tracing
from dmesh.collectives.reduce_ops import canonical_nan, reduce_plan
from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Shard
from dmesh.core.plan import plan_redistribution
from dmesh.core.spec import DArraySpec

__all__ = ["GATHER", "LOCAL", "direct_move", "direct_route", "reduce_terms", "route_of", "routes"]

LOCAL, GATHER = object(), object()
# spec -> route, for one-element specs only; hot paths read it as routes.get(spec).
routes: dict[DArraySpec, Any] = {}
# One-element spec -> [target layout, (target spec, route) or None] (see :func:`direct_move`).
_moves: dict[DArraySpec, list[Any]] = {}
_LIMIT = 1024  # both caches are bounded: specs hold meshes


def route_of(spec: DArraySpec) -> Any:
    """The route of a one-element ``spec`` (remembered; see the module docstring)."""
    mesh = spec.mesh
    route: Any = GATHER
    if mesh.is_member and not any(type(p) is Shard for p in spec.placements):
        partial = tuple(m for m, p in enumerate(spec.placements) if p.is_partial())
        ops = {p.op for p in spec.placements if isinstance(p, Partial)}
        if math.prod(mesh.shape[m] for m in partial) == 1:
            # No partial dim, or partial dims of one coordinate each: one term,
            # so the block is the value (sum, prod, min, max and avg alike).
            route = LOCAL
        elif len(ops) == 1:
            comm = mesh.comm(partial[0]) if len(partial) == 1 else mesh[partial].comm()
            plan = reduce_plan(ops.pop(), spec.dtype)
            # Only a reduction whose received buffer is the value (not avg).
            route = (comm, plan) if plan.plain and plan.wire == spec.dtype else GATHER
    if len(routes) >= _LIMIT:
        routes.clear()
    routes[spec] = route
    return route


def reduce_terms(local: Any, route: Any) -> Any:
    """The value of a one-element block by its route (not ``GATHER``); collective.

    ``LOCAL`` gives ``local`` itself. A reduction is one ``Allreduce`` made
    directly on a NumPy block (a one-element block is contiguous whatever its
    strides); a device block, or a debug tool watching, gets the same
    reduction through :func:`dmesh.collectives.all_reduce`.
    """
    if route is LOCAL:
        return local
    comm, plan = route
    if type(local) is np.ndarray and not tracing.hooked:
        out = np.empty(local.shape, local.dtype)  # (empty_like: 0.4 us; this 0.15)
        comm.Allreduce([local, 1, plan.datatype], [out, 1, plan.datatype], plan.mpi_op)
        return canonical_nan(out) if plan.canonical else out
    return coll.all_reduce(local, plan.op, comm)


def direct_move(spec: DArraySpec, target: Layout) -> tuple[DArraySpec, Any] | None:
    """``(target spec, route)`` where moving a one-element array of ``spec`` to ``target``
    on its mesh is planned (:func:`~dmesh.core.plan.plan_redistribution`) as no step or as
    one ``all_reduce`` step with a plain reduction; else None (the general path).

    The route makes that plan's step directly: ``LOCAL`` (no step: the caller
    copies the block, as the executor does) or ``(the step's mesh dim communicator,
    ReducePlan)``, the Allreduce the executor would make through
    :func:`dmesh.collectives.all_reduce`. Remembered per spec with the last target
    seen: a repeated call hands the same layout object, so this is one dict lookup
    and one identity check.
    """
    entry = _moves.get(spec)
    if entry is None or entry[0] is not target:
        if entry is not None and entry[0] == target:
            entry[0] = target  # an equal layout: the caller's object, checked by identity next
        elif math.prod(spec.shape) != 1 or spec.mesh.closed:
            return None  # (not remembered: most arrays are larger, and cost a check)
        else:
            if len(_moves) >= _LIMIT:
                _moves.clear()
            entry = _moves[spec] = [target, direct_route(spec, target)]
    return entry[1]  # type: ignore[no-any-return]


def direct_route(spec: DArraySpec, target: Layout) -> tuple[DArraySpec, Any] | None:
    """``(target spec, route)`` of moving an array of ``spec`` (any size) to ``target`` on
    its mesh where the plan is no step (``LOCAL``) or one plain ``all_reduce``
    (``(communicator, ReducePlan)``); else None. Pure: from the specs alone."""
    mesh = spec.mesh
    if not mesh.is_member or target == spec.layout:
        return None  # (the general path: an empty block, or the block itself)
    steps = plan_redistribution(spec.layout, target, True)
    route: Any = LOCAL
    if steps:
        if len(steps) > 1 or steps[0][0] != "all_reduce":
            return None
        _, m, op = steps[0]
        plan = reduce_plan(op, spec.dtype)
        if not plan.plain or plan.wire != spec.dtype:
            return None  # (an average, or integers mapped to truth values)
        route = (mesh.comm(m), plan)
    return DArraySpec(mesh, target, spec.dtype), route
