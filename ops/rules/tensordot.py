"""``np.tensordot`` and ``np.vdot`` on DArrays: contractions whose subscripts follow from the call.

Both take the rows of the einsum generator (``contractions.einsum_rows``):
everything replicated, sharded on a free index, or sharded on a contracted
index (which both operands have) with a ``Partial("sum")`` result. Each
rank then calls the NumPy function itself on its blocks: ``tensordot`` with
the normalized axes (BLAS, after its reshapes), ``vdot`` on the 1-D blocks of
the flattened operands (NumPy flattens both and conjugates the first).

``vdot``'s result is a 0-d DArray of NumPy's dtype, as other full
contractions (``np.dot(v, w)``) and reductions; ``float()``, ``.item()`` or
``full_array()`` make it a value, the same on every rank.
"""

from __future__ import annotations

import math
import operator
import string
from typing import Any

import numpy as np

from dmesh.collectives.blocks import normalize_axis
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.darray import DArray
from dmesh.ops.registry import Call, register
from dmesh.ops.rules.contractions import (
    call_dims,
    call_rows,
    call_shape,
    checked,
    flatten,
    ndim_of,
    shape_of,
)

__all__ = ["tensordot_subscripts"]


def _axis_list(axes: Any) -> list[int]:
    """One side of a pair of ``axes``: an int or a sequence of ints, as a list."""
    try:
        return [operator.index(axes)]
    except TypeError:
        pass
    try:
        return [operator.index(x) for x in axes]
    except TypeError as exc:
        raise ArgumentTypeError(
            f"np.tensordot: axes must be ints or sequences of ints, got {axes!r}"
        ) from exc


def tensordot_subscripts(
    shapes: tuple[tuple[int, ...], tuple[int, ...]], axes: Any
) -> tuple[tuple[str, str], str, tuple[int, ...], tuple[int, ...]]:
    """Einsum subscripts of ``np.tensordot(a, b, axes)`` and its axes, normalized and checked.

    As NumPy: an int ``n`` contracts the last ``n`` dims of ``a`` with the
    first ``n`` of ``b`` (0, or a negative ``n``, contracts none: the outer
    product); a pair contracts ``a``'s axes ``axes[0]`` with ``b``'s ``axes[1]``,
    each an int or a sequence, negative axes counted from the end. The output
    holds ``a``'s free dims, then ``b``'s, in order.
    """
    a_shape, b_shape = shapes
    a_nd, b_nd = len(a_shape), len(b_shape)
    if isinstance(axes, (str, bytes)) or not hasattr(axes, "__iter__"):
        try:
            n = operator.index(axes)
        except TypeError as exc:
            raise ArgumentTypeError(
                f"np.tensordot: axes must be an int or a pair of axis sequences, got {axes!r}"
            ) from exc
        if n > min(a_nd, b_nd):
            raise ArgumentError(
                f"np.tensordot: axes={n} contracts {n} dims, but the operands have "
                f"{a_nd} and {b_nd}"
            )
        a_axes, b_axes = list(range(a_nd - n, a_nd)) if n > 0 else [], list(range(max(n, 0)))
    else:
        pair = list(axes)
        if len(pair) != 2:
            raise ArgumentError(
                f"np.tensordot: axes must be an int or a pair (axes of a, axes of b), got {axes!r}"
            )
        a_axes, b_axes = _axis_list(pair[0]), _axis_list(pair[1])
    a_axes = [normalize_axis(x, a_nd, "np.tensordot axes of a") for x in a_axes]
    b_axes = [normalize_axis(x, b_nd, "np.tensordot axes of b") for x in b_axes]
    if len(set(a_axes)) < len(a_axes) or len(set(b_axes)) < len(b_axes):
        raise ArgumentError(f"np.tensordot: duplicate axes are not allowed, got {axes!r}")
    lengths = ([a_shape[x] for x in a_axes], [b_shape[x] for x in b_axes])
    if lengths[0] != lengths[1]:
        raise ArgumentError(
            f"np.tensordot: shape-mismatch for sum: a's axes {a_axes} have lengths {lengths[0]}, "
            f"b's axes {b_axes} have lengths {lengths[1]}"
        )
    if a_nd + b_nd - len(b_axes) > len(string.ascii_letters):
        raise UnsupportedError(f"np.tensordot on DArrays of {a_nd} and {b_nd} dims: too many dims")
    letters = iter(string.ascii_letters)
    a_term = "".join(next(letters) for _ in range(a_nd))
    b_term = "".join(
        a_term[a_axes[b_axes.index(d)]] if d in b_axes else next(letters) for d in range(b_nd)
    )
    a_free = "".join(c for d, c in enumerate(a_term) if d not in a_axes)
    b_free = "".join(c for d, c in enumerate(b_term) if d not in b_axes)
    return (a_term, b_term), a_free + b_free, tuple(a_axes), tuple(b_axes)


def _parse_tensordot(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Any], tuple[Any, ...]]:
    if not 2 <= len(args) <= 3 or set(kwargs) - {"axes"} or (len(args) == 3 and kwargs):
        raise UnsupportedError("np.tensordot on DArrays takes two operands and axes")
    axes = args[2] if len(args) == 3 else kwargs.get("axes", 2)
    inputs, output, a_axes, b_axes = tensordot_subscripts(
        (shape_of(args[0]), shape_of(args[1])), axes
    )
    operands = checked(list(args[:2]), inputs, output)
    return operands, (inputs, output, a_axes, b_axes)


def _run_tensordot(func: Any, blocks: list[Any], call: Call) -> Any:
    return np.tensordot(blocks[0], blocks[1], axes=(call.static[2], call.static[3]))


def _parse_vdot(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
    """``np.vdot(a, b)``: both flattened; a Python scalar is refused (use ``np.conj(s) * x``)."""
    if len(args) != 2 or kwargs:
        raise UnsupportedError("np.vdot on DArrays takes two operands and no keywords")
    if any(not isinstance(x, DArray) and ndim_of(x) == 0 for x in args):
        raise UnsupportedError(
            "np.vdot of a scalar and a DArray is not supported; use np.conj(s) * x"
        )
    sizes = [x.size if isinstance(x, DArray) else math.prod(np.shape(x)) for x in args]
    if sizes[0] != sizes[1]:
        raise ArgumentError(
            f"np.vdot: the operands have {sizes[0]} and {sizes[1]} elements; it needs equal sizes"
        )
    operands = checked([flatten(x) for x in args], ("i", "i"), "")
    return operands, (("i", "i"), "")


# run=None for vdot: np.vdot of the 1-D blocks is the block of the result.
register(np.tensordot, name="contraction.tensordot", out_shape=call_shape,
         parse=_parse_tensordot, run=_run_tensordot, dim_map=call_dims)(call_rows)  # fmt: skip
register(np.vdot, name="contraction.vdot", out_shape=call_shape, parse=_parse_vdot,
         dim_map=call_dims)(call_rows)  # fmt: skip
