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
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from dmesh.core.placement import PARTIAL_OPS, Partial, Replicate, Shard
from dmesh.ops.registry import Call, Row, register

R = Replicate()


_PARAMETERS = {
    "transpose": ("a", "axes"),
    "swapaxes": ("a", "axis1", "axis2"),
    "moveaxis": ("a", "source", "destination"),
}


def _arguments(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The call's arguments by position, keywords placed by NumPy's parameter names."""
    names = _PARAMETERS[name]
    values = list(args) + [None] * (len(names) - len(args))
    for key, value in kwargs.items():
        if key not in names or names.index(key) < len(args):
            raise TypeError(f"np.{name}() got an unexpected or repeated keyword argument {key!r}")
        values[names.index(key)] = value
    if len(args) > len(names) or (name != "transpose" and any(v is None for v in values)):
        raise TypeError(f"np.{name}() takes the arguments {', '.join(names)}")
    return values


def _perm(name: str, ndim: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...]:
    """The permutation, with NumPy's errors for axes out of range (``AxisError``) or repeated."""
    values = _arguments(name, args, kwargs)
    if name == "transpose":
        axes = values[1]
        if axes is None:
            return tuple(reversed(range(ndim)))
        axes = tuple(axes) if np.iterable(axes) else (axes,)
        if len(axes) != ndim:
            raise ValueError("axes don't match array")
        return tuple(normalize_axis_tuple(axes, ndim, "axes"))
    if name == "swapaxes":
        a1, a2 = (normalize_axis_index(operator.index(x), ndim) for x in values[1:3])
        swapped = list(range(ndim))
        swapped[a1], swapped[a2] = swapped[a2], swapped[a1]
        return tuple(swapped)
    source = normalize_axis_tuple(values[1], ndim, "source")
    destination = normalize_axis_tuple(values[2], ndim, "destination")
    if len(source) != len(destination):
        raise ValueError(
            "`source` and `destination` arguments must have the same number of elements"
        )
    order = [d for d in range(ndim) if d not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return tuple(order)


def _parse(name: str) -> Any:
    def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        a = args[0] if args else kwargs["a"]
        rest = {k: v for k, v in kwargs.items() if k != "a"}
        return [a], (_perm(name, a.ndim, (a, *args[1:]), rest),)

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
