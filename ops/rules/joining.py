"""``concatenate``, ``stack`` and ``broadcast_to``.

``concatenate``/``stack``: on one mesh dim, every operand and the result may
be sharded alike on any dim other than the joining one (each rank joins its
blocks), or replicated. The joining dim itself is never sharded in a row, so
operands sharded there are redistributed first, as the cost model prices it.

``broadcast_to``: an operand dim that keeps its length keeps its sharding;
new and stretched dims are replicated. Partial values stay partial (every
output element copies one input element).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from collectives.errors import ArgumentError, UnsupportedError
from dmesh.placement import PARTIAL_OPS, Partial, Replicate, Shard
from ops.registry import Call, Row, register

R = Replicate()


def _parse_join(name: str) -> Any:
    def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        kwargs = dict(kwargs)
        arrays = args[0] if args else kwargs.pop("arrays")
        axis = args[1] if len(args) > 1 else kwargs.pop("axis", 0)
        if kwargs or axis is None:
            raise UnsupportedError(f"np.{name} on DArrays supports (arrays, axis) only")
        arrays = list(arrays)
        if not arrays:
            raise ArgumentError(f"np.{name}: need at least one array")
        ndim = getattr(arrays[0], "ndim", 0) + (1 if name == "stack" else 0)
        return arrays, (name, operator.index(axis) % max(ndim, 1))

    return parse


def _join_shape(call: Call) -> tuple[int, ...]:
    name, axis = call.static
    first = call.shapes[0]
    for shape in call.shapes:
        if len(shape) != len(first) or any(
            n != f for d, (n, f) in enumerate(zip(shape, first)) if name == "stack" or d != axis
        ):
            raise ArgumentError(f"np.{name}: all arrays must match off the axis; got {call.shapes}")
    if name == "stack":
        return (*first[:axis], len(call.shapes), *first[axis:])
    return (*first[:axis], sum(s[axis] for s in call.shapes), *first[axis + 1 :])


def _join_dims(call: Call) -> tuple[tuple[int | None, ...], ...]:
    name, axis = call.static
    if name == "stack":
        return tuple(tuple(d if d < axis else d + 1 for d in range(len(s))) for s in call.shapes)
    return tuple(tuple(d if d != axis else None for d in range(len(s))) for s in call.shapes)


def _join_rows(call: Call) -> list[Row]:
    name, axis = call.static
    n = len(call.shapes)
    rows: list[Row] = [(R,) * (n + 1)]
    for d in range(len(call.shapes[0])):
        if name == "concatenate" and d == axis:
            continue
        out = d if name == "concatenate" or d < axis else d + 1
        rows.append((Shard(out), *(Shard(d),) * n))
    rows += [(Partial(op), *(Partial(op),) * n) for op in PARTIAL_OPS]
    return rows


def _join_run(func: Any, blocks: list[Any], call: Call) -> Any:
    _, axis = call.static
    return func(blocks, axis=axis)


for _name in ("concatenate", "stack"):
    register(getattr(np, _name), name=f"joining.{_name}", out_shape=_join_shape,
             parse=_parse_join(_name), run=_join_run, dim_map=_join_dims)(_join_rows)  # fmt: skip


def _parse_broadcast(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Any], tuple[Any, ...]]:
    array = args[0]
    given: Any = args[1] if len(args) > 1 else kwargs.get("shape", ())
    shape = (given,) if isinstance(given, (int, np.integer)) else tuple(given)
    np.broadcast_shapes(np.shape(array), shape)  # raises NumPy's error when they do not fit
    if tuple(np.broadcast_shapes(np.shape(array), shape)) != shape:
        raise ArgumentError(f"np.broadcast_to: cannot broadcast {np.shape(array)} to {shape}")
    return [array], (tuple(int(n) for n in shape),)


def _broadcast_rows(call: Call) -> list[Row]:
    (shape,) = call.static
    source = call.shapes[0]
    offset = len(shape) - len(source)
    rows: list[Row] = [(R, R)]
    for d, n in enumerate(source):
        if n == shape[d + offset]:
            rows.append((Shard(d + offset), Shard(d)))
    rows += [(Partial(op), Partial(op)) for op in PARTIAL_OPS]
    return rows


def _broadcast_run(func: Any, blocks: list[Any], call: Call) -> Any:
    (shape,) = call.static
    block = blocks[0]
    offset = len(shape) - block.ndim
    local = [
        block.shape[e - offset] if e >= offset and call.shapes[0][e - offset] == n else n
        for e, n in enumerate(shape)
    ]
    return np.broadcast_to(block, tuple(local))


def _broadcast_shape(call: Call) -> tuple[int, ...]:
    return tuple(call.static[0])


register(np.broadcast_to, name="joining.broadcast_to", out_shape=_broadcast_shape,
         parse=_parse_broadcast, run=_broadcast_run)(_broadcast_rows)  # fmt: skip
