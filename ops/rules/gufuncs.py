"""The product gufuncs ``np.vecdot``, ``np.matvec``, ``np.vecmat`` and ``np.linalg.matmul``.

Each is a contraction whose einsum subscripts follow from its signature
(``(n),(n)->()``, ``(m,n),(n)->(m)``, ``(n),(n,m)->(m)``) with the loop dims
right-aligned, so they take the rows of the einsum generator
(:func:`dmesh.ops.rules.contractions.einsum_rows`): replicated, sharded on a
kept index, or sharded on the contracted index with a ``Partial("sum")``
result. Each rank calls the gufunc itself on its blocks: ``vecdot`` and
``vecmat`` conjugate their vector, which is linear, so the terms of a
contraction-sharded call still add up to NumPy's sum.

Loop dims of length 1 against longer ones are broadcast first
(``np.broadcast_to``), as NumPy broadcasts them. ``np.vecdot(..., axis=k)``
and ``np.linalg.vecdot``'s ``axis=`` move that axis last first (a transpose);
other keywords (``axes=``, ``keepdims=``, ``dtype=``...) are refused.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from dmesh.collectives.blocks import normalize_axis
from dmesh.collectives.errors import ArgumentTypeError, UnsupportedError
from dmesh.ops.registry import register
from dmesh.ops.rules.contractions import (
    broadcast_loops,
    call_dims,
    call_rows,
    call_shape,
    checked,
    gufunc_subscripts,
    ndim_of,
    parse_binary,
)

__all__ = ["GUFUNCS"]

# name -> (core subscripts of each operand, output core); "z" is the contracted index.
GUFUNCS: dict[str, tuple[tuple[str, str], str]] = {
    "vecdot": (("z", "z"), ""),
    "matvec": (("iz", "z"), "i"),
    "vecmat": (("z", "zk"), "k"),
}


def _moved_last(x: Any, axis: Any, name: str) -> Any:
    """``x`` with its ``axis`` moved last (the vector axis of ``vecdot``)."""
    try:
        axis = operator.index(axis)
    except TypeError as exc:
        raise ArgumentTypeError(f"np.{name}: axis must be an integer, got {axis!r}") from exc
    nd = ndim_of(x)
    axis = normalize_axis(axis, nd, f"np.{name}")
    return x if axis == nd - 1 else np.moveaxis(x, axis, -1)


def _parse(name: str) -> Any:
    cores, out_core = GUFUNCS[name]

    def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        extra = set(kwargs) - ({"axis"} if name == "vecdot" else set())
        if len(args) != 2 or extra:
            raise UnsupportedError(
                f"np.{name} on DArrays takes two operands"
                + (" and axis=" if name == "vecdot" else "")
                + f", no other keywords (got {sorted(extra)}); "
                "move axes with np.moveaxis first"
            )
        operands = list(args)
        if "axis" in kwargs:
            operands = [_moved_last(x, kwargs["axis"], name) for x in operands]
        ndims = tuple(ndim_of(x) for x in operands)
        if min(ndims) == 0:
            raise ValueError(
                f"{name}: Input operand {ndims.index(0)} does not have enough dimensions"
            )
        inputs, output = gufunc_subscripts(cores, out_core, ndims)
        operands = broadcast_loops(operands, inputs, "izk")
        return checked(operands, inputs, output), (inputs, output)

    return parse


for _name in GUFUNCS:
    # run=None: the gufunc itself on the blocks gives this rank's block (or term).
    register(getattr(np, _name), name=f"gufunc.{_name}", out_shape=call_shape,
             parse=_parse(_name), dim_map=call_dims)(call_rows)  # fmt: skip


def _parse_linalg_vecdot(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Any], tuple[Any, ...]]:
    """``np.linalg.vecdot(x1, x2, /, *, axis=-1)``: ``np.vecdot``'s subscripts."""
    if set(kwargs) - {"axis"}:
        raise UnsupportedError("np.linalg.vecdot on DArrays takes two operands and axis=")
    parsed: tuple[list[Any], tuple[Any, ...]] = _parse("vecdot")(args, kwargs)
    return parsed


def _run_linalg_vecdot(func: Any, blocks: list[Any], call: Any) -> Any:
    return np.vecdot(*blocks)  # the blocks' vector axis is already last


register(np.linalg.vecdot, name="gufunc.linalg_vecdot", out_shape=call_shape,
         parse=_parse_linalg_vecdot, run=_run_linalg_vecdot,
         dim_map=call_dims)(call_rows)  # fmt: skip


def _run_linalg_matmul(func: Any, blocks: list[Any], call: Any) -> Any:
    return np.matmul(*blocks)


register(np.linalg.matmul, name="gufunc.linalg_matmul", out_shape=call_shape,
         parse=parse_binary("matmul"), run=_run_linalg_matmul,
         dim_map=call_dims)(call_rows)  # fmt: skip
