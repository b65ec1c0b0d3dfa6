"""View ops that permute dimensions: ``transpose`` (``.T``), ``swapaxes``, ``moveaxis``.

The output's dim ``k`` is the input's dim ``perm[k]``: a shard of input dim
``d`` becomes a shard of output dim ``perm.index(d)`` with the same blocks, and
replicated or partial values stay what they are (permuting is linear and
moves no value). No data moves; each block is transposed locally (a view).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.placement import PARTIAL_OPS, Partial, Replicate, Shard
from dmesh.ops.registry import Call, Row, register

R = Replicate()


def _perm(name: str, ndim: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...]:
    if name == "transpose":
        axes = args[1] if len(args) > 1 else kwargs.get("axes")
        if axes is None:
            return tuple(reversed(range(ndim)))
        perm = tuple(operator.index(a) % max(ndim, 1) for a in axes)
        if sorted(perm) != list(range(ndim)):
            raise ArgumentError(f"np.transpose: axes {tuple(axes)} do not permute {ndim} dims")
        return perm
    if name == "swapaxes":
        a1, a2 = (operator.index(x) % ndim for x in args[1:3])
        swapped = list(range(ndim))
        swapped[a1], swapped[a2] = swapped[a2], swapped[a1]
        return tuple(swapped)
    source, destination = args[1], args[2]
    order = [d for d in range(ndim) if d != operator.index(source) % ndim]
    order.insert(operator.index(destination) % ndim, operator.index(source) % ndim)
    return tuple(order)


def _parse(name: str) -> Any:
    def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        if name != "transpose" and kwargs:
            raise UnsupportedError(f"np.{name} on DArrays takes positional arguments only")
        a = args[0]
        return [a], (_perm(name, a.ndim, args, kwargs),)

    return parse


def _rows(call: Call) -> list[Row]:
    (perm,) = call.static
    rows: list[Row] = [(R, R)]
    rows += [(Shard(perm.index(d)), Shard(d)) for d in range(len(perm))]
    rows += [(Partial(op), Partial(op)) for op in PARTIAL_OPS]
    return rows


def _shape(call: Call) -> tuple[int, ...]:
    (perm,) = call.static
    return tuple(call.shapes[0][d] for d in perm)


def _dims(call: Call) -> tuple[tuple[int | None, ...], ...]:
    (perm,) = call.static
    return (tuple(perm.index(d) for d in range(len(perm))),)


def _run(func: Any, blocks: list[Any], call: Call) -> Any:
    (perm,) = call.static
    return np.transpose(blocks[0], perm)


for _name in ("transpose", "swapaxes", "moveaxis"):
    register(getattr(np, _name), name=f"shape.{_name}", out_shape=_shape, parse=_parse(_name),
             run=_run, dim_map=_dims)(_rows)  # fmt: skip
