"""Kinds of recorded ops, as the replay (``dmesh.ops.compiler.replay``) makes them.

An op whose moving operands eager computes in place (crops of the rank's own
block, shifted slices) is made by eager's own call; an elementwise ufunc may
write its result into an operand's block no later op reads (``out=``, as eager's
temporary elision does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh.core.layout import Layout
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.compiler.nodes import Node
from dmesh.ops.pipeline import perform

__all__ = ["elementwise", "performer", "reuses", "shifted"]


def elementwise(node: Node) -> bool:
    """Whether ``node`` is a plain elementwise ufunc call on blocks (a result of its own
    memory, operands read once each element, ``out=`` exact even onto an operand)."""
    step = node.step
    return (
        step is not None
        and step.run is None
        and type(node.func) is np.ufunc
        and node.func.signature is None
        and node.func.nout == 1
        and node.spec.ndim > 0
        and not node.writes
        and not shifted(node)
    )


def shifted(node: Node) -> bool:
    """Whether ``node`` is a ufunc call whose moving operands eager computes in place:
    crops of the rank's block (``Step.views``) or shifted slices (``Step.piecewise``)."""
    step = node.step
    return (
        step is not None
        and step.run is None
        and type(node.func) is np.ufunc
        and any(t is not None for t in node.moves)
        and (step.views is not None or step.piecewise)
    )


def performer(node: Node, specs: list[DArraySpec | None], donor: int = -1) -> Callable[..., Any]:
    """``node``'s call on blocks, made as eager makes it (``dmesh.ops.pipeline.perform``,
    the same messages and bits), its operands as DArrays of their recorded specs; the
    block of operand ``donor`` (an index, or -1) may take the result, as eagerly."""
    func, step, mesh = node.func, node.step, node.spec.mesh
    assert step is not None  # (shifted: a recorded pipeline step)

    def run(*blocks: Any) -> Any:
        operands = [b if spec is None else DArray(b, spec) for b, spec in zip(blocks, specs)]
        return perform(func, step, operands, mesh, donor=donor)._local

    return run


def reuses(
    nodes: list[Node],
    specs: list[DArraySpec],
    outputs: list[int],
    order: list[int],
    operands: list[list[tuple[int, Layout | None]]],
    live: set[int],
) -> dict[int, int]:
    """Node -> the index of the operand whose block its result may be written into: a
    block an elementwise ufunc made in this plan (its own memory), that stays in place
    for this node, read only by elementwise ufuncs (so no view of it exists) and by
    none after this node, not an output, with the result's local shape and dtype. The
    blocks of results no later op reads are then reused, as NumPy's and eager's
    temporary elision reuse them."""
    plain = {k for k in live if elementwise(nodes[k])}
    pieces = {k for k in live if shifted(nodes[k])}  # (eager's call: reads, keeps no view)
    made_by = {nodes[k].out for k in plain | pieces}
    last: dict[int, int] = {}
    users_ok: dict[int, bool] = {}
    for position, k in enumerate(order):
        if k not in live:
            continue
        for slot, target in operands[k]:
            last[slot] = position
            ok = (k in plain and target is None) or k in pieces
            users_ok[slot] = users_ok.get(slot, True) and ok
    returned = set(outputs)
    donors: dict[int, int] = {}
    for position, k in enumerate(order):
        if k not in plain and k not in pieces:
            continue
        spec = nodes[k].spec
        for index, (slot, target) in enumerate(operands[k]):
            if (
                target is None
                and slot in made_by
                and last[slot] == position
                and users_ok[slot]
                and slot not in returned
                and specs[slot].dtype == spec.dtype
                and specs[slot].local_shape() == spec.local_shape()
            ):
                donors[k] = index
                break
    return donors
