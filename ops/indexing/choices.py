"""Choosing among arrays, and selecting by condition: ``np.choose``, ``np.select``,
``np.piecewise``, ``np.compress`` and ``np.extract``.

``choose`` and ``select`` are chains of ``np.where`` (elementwise: operands
are aligned, nothing is gathered) in NumPy's result dtype. ``piecewise``
follows NumPy's own loop: ``x[cond]`` is a 1-D DArray, the function runs on
it, and ``y[cond] = ...`` routes the values back to the True positions.
``compress`` and ``extract`` have data-dependent lengths: the result is a
sharded DArray with uneven blocks, made from ``np.nonzero`` of the condition
and an integer-array take (each element requested from its owner).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.darray import DArray
from dmesh.ops.indexing.operands import as_operand, dtype_of, mesh_of, weak
from dmesh.ops.registry import decompose

__all__ = ["choose", "compress", "extract", "piecewise", "select"]

MAX_CHOICES = 64  # NumPy's limit on the arrays of np.choose


def _cast(x: Any, dtype: np.dtype, mesh: Any) -> Any:
    """``x`` in ``dtype`` as an operand of ``np.where`` (a DArray, or a 0-d array)."""
    if isinstance(x, DArray):
        return x if x.dtype == dtype else x.astype(dtype)
    return as_operand(np.asarray(x).astype(dtype), mesh)


@decompose(np.choose)
def choose(a: Any, choices: Any, out: Any = None, mode: str = "raise") -> Any:
    """``np.choose``: ``choices[a[i]][i]``, broadcast; modes raise (one ``np.any``,
    collective), wrap and clip."""
    if out is not None:
        raise UnsupportedError("np.choose on DArrays: out= is not supported; assign the result")
    if mode not in ("raise", "wrap", "clip"):
        raise ArgumentError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    options = [choices[k] for k in range(len(choices))]
    if len(options) > MAX_CHOICES:
        raise ArgumentError(f"Need at least 0 and at most {MAX_CHOICES} array objects.")
    if not np.can_cast(dtype_of(a), np.intp, "safe"):
        raise ArgumentTypeError(
            f"Cannot cast array data from {dtype_of(a)!r} to dtype('int64') according to the "
            "rule 'safe'"
        )
    dtype = np.result_type(*[weak(c) for c in options]) if options else np.dtype(np.intp)
    mesh = mesh_of([a, *options], "np.choose")
    index = as_operand(a, mesh)
    n = len(options)
    if mode == "raise":
        bad = (index < 0) | (index >= n)
        if bool(np.any(bad)):  # collective for a DArray: every rank gets the verdict
            raise ArgumentError("invalid entry in choice array")
    elif mode == "wrap":
        index = np.mod(index, n)
    else:
        index = np.clip(index, 0, n - 1)
    cast = [_cast(c, dtype, mesh) for c in options]
    result = cast[-1]
    for k in range(n - 2, -1, -1):
        result = np.where(index == k, cast[k], result)
    if n == 1:  # broadcast with the index, as NumPy does
        result = np.where(index == 0, cast[0], cast[0])
    return result


@decompose(np.select)
def select(condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    """``np.select``: the first true condition's choice, else ``default``, in NumPy's dtype."""
    conditions, options = list(condlist), list(choicelist)
    if len(conditions) != len(options):
        raise ArgumentError("list of cases must be same length as list of conditions")
    if not conditions:
        raise ArgumentError("select with an empty condition list is not possible")
    try:
        dtype = np.result_type(*[weak(c) for c in [*options, default]])
    except TypeError as exc:
        raise ArgumentTypeError(
            f"Choicelist and default value do not have a common dtype: {exc}"
        ) from None
    for i, cond in enumerate(conditions):
        if dtype_of(cond) != np.bool_:
            raise ArgumentTypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    mesh = mesh_of([*conditions, *options, default], "np.select")
    shapes = [np.shape(x) if not isinstance(x, DArray) else x.shape
              for x in [*conditions, *options, default]]  # fmt: skip
    try:
        np.broadcast_shapes(*shapes)
    except ValueError as exc:
        raise ArgumentError(f"np.select: shapes {shapes} do not broadcast together") from exc
    result = _cast(default, dtype, mesh)
    for cond, choice in zip(reversed(conditions), reversed(options)):
        result = np.where(as_operand(cond, mesh), _cast(choice, dtype, mesh), result)
    return result


@decompose(np.piecewise)
def piecewise(x: Any, condlist: Any, funclist: Any, *args: Any, **kw: Any) -> Any:
    """``np.piecewise`` of a DArray: NumPy's loop, each function called on ``x[cond]`` (a
    1-D DArray) and its values written back to the True positions (collective)."""
    if not isinstance(x, DArray):
        raise UnsupportedError(
            "np.piecewise with DArray conditions needs x as a DArray: dmesh.distribute it"
        )
    functions = list(funclist)
    # NumPy's rule: a scalar, or a sequence whose first item is no array, is one condition
    # (a DArray's items are DArrays: it is one condition when it has at most one dim).
    if isinstance(condlist, DArray):
        condlist = [condlist] if condlist.ndim <= 1 else [condlist[k] for k in range(len(condlist))]
    elif np.isscalar(condlist) or (
        x.ndim != 0 and not isinstance(condlist[0], (list, np.ndarray, DArray))
    ):  # fmt: skip
        condlist = [condlist]
    conditions = [
        c.astype(bool) if isinstance(c, DArray) else as_operand(np.asarray(c, dtype=bool), x.mesh)
        for c in condlist
    ]
    for c in conditions:
        if np.shape(c) != x.shape and not (isinstance(c, DArray) and c.shape == x.shape):
            raise UnsupportedError(
                f"np.piecewise on DArrays: each condition must have x's shape {x.shape}; got "
                f"{np.shape(c) if not isinstance(c, DArray) else c.shape}"
            )
    n, n2 = len(conditions), len(functions)
    if n == n2 - 1:  # the "otherwise" condition
        anything: Any = conditions[0]
        for c in conditions[1:]:
            anything = anything | c
        conditions.append(~anything)
        n += 1
    elif n != n2:
        raise ArgumentError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    y = np.zeros_like(x)
    for cond, func in zip(conditions, functions):
        if not callable(func):
            y[cond] = func
            continue
        values = x[cond]
        if values.size > 0:
            y[cond] = func(values, *args, **kw)
    return y


def _condition_indices(condition: Any, mesh: Any) -> Any:
    """The indices of the true entries of a 1-D ``condition`` (collective for a DArray)."""
    if isinstance(condition, DArray):
        return np.nonzero(condition)[0]
    return np.flatnonzero(np.asarray(condition))


@decompose(np.compress)
def compress(condition: Any, a: Any, axis: Any = None, out: Any = None) -> Any:
    """``np.compress``: the slices of ``a`` along ``axis`` (flat: None) where ``condition``
    holds; a sharded result with uneven blocks (collective)."""
    if out is not None:
        raise UnsupportedError("np.compress on DArrays: out= is not supported; assign the result")
    ndim = condition.ndim if isinstance(condition, DArray) else np.ndim(condition)
    if ndim != 1:
        raise ArgumentError("condition must be a 1-d array")
    mesh = mesh_of([condition, a], "np.compress")
    array = as_operand(a, mesh)
    if not isinstance(array, DArray):
        array = as_operand(np.atleast_1d(array), mesh)
    if axis is not None:
        axis = operator.index(axis)
        if not -array.ndim <= axis < array.ndim:
            raise np.exceptions.AxisError(axis, array.ndim)
    return np.take(array, _condition_indices(condition, mesh), axis=axis)


@decompose(np.extract)
def extract(condition: Any, arr: Any) -> Any:
    """``np.extract``: the elements of ``arr`` where ``condition`` is nonzero, in C order.

    With a condition DArray of ``arr``'s shape nothing moves when only dim 0
    is sharded (a mask selection); otherwise an integer-array take of the
    flat indices (collective).
    """
    mesh = mesh_of([condition, arr], "np.extract")
    array = as_operand(arr, mesh)
    if not isinstance(array, DArray):
        array = as_operand(np.atleast_1d(array), mesh)
    if isinstance(condition, DArray) and condition.shape == array.shape and array.ndim:
        mask = condition if condition.dtype == np.bool_ else condition.astype(bool)
        return array[mask]
    flat = condition if isinstance(condition, DArray) else np.asarray(condition)
    return np.take(np.ravel(array), np.flatnonzero(flat))
