"""Reductions: ``sum``, ``prod``, ``min``/``max``, ``any``/``all``, ``mean``, ``count_nonzero``.

One rule for the family. On one mesh dim, with reduced axes ``A``:

* everything replicated: reduce the block;
* input ``S(d)`` with ``d`` reduced: each rank reduces its block and the
  result is ``Partial(op)`` (sum -> sum, prod -> prod, max/any -> max,
  min/all -> min; ``mean`` gives each rank's sum divided by the global count,
  a partial sum of the mean; ``count_nonzero`` a partial sum);
* input ``S(d)`` with ``d`` kept: the result is sharded on ``d``'s new place;
* a partial input of the same op stays partial (sums of partial sums, max of
  partial maxima; ``mean`` is linear, so a partial sum stays one).

Empty blocks reduce to the op's identity (``initial=``), so min and max work
when some ranks hold nothing of a reduced axis; an empty global axis raises
like NumPy.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    AxisArgumentError,
    UnsupportedError,
)
from dmesh.core.placement import Partial, Replicate, Shard
from dmesh.ops.registry import Call, Row, decompose, partial_survives, register

R = Replicate()

# function -> (partial op, whether a partial input of that op stays partial)
FAMILY: dict[Callable[..., Any], tuple[str, bool]] = {
    np.sum: ("sum", True),
    np.nansum: ("sum", False),
    np.prod: ("prod", True),
    np.nanprod: ("prod", False),
    np.max: ("max", True),
    np.min: ("min", True),
    np.any: ("max", False),
    np.all: ("min", False),
    np.mean: ("sum", True),
    np.count_nonzero: ("sum", False),
}
UFUNC_REDUCE: dict[np.ufunc, Callable[..., Any]] = {
    np.add: np.sum,
    np.multiply: np.prod,
    np.maximum: np.max,
    np.minimum: np.min,
    np.logical_or: np.any,
    np.logical_and: np.all,
}
_SUPPORTED = {"a", "axis", "dtype", "keepdims"}


def _parse_for(func: Callable[..., Any]) -> Callable[[tuple[Any, ...], dict[str, Any]], Any]:
    signature = inspect.signature(func)

    def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        if len(args) == 1 and kwargs.keys() <= _SUPPORTED:  # the common call, without bind()
            a = args[0]
            axes = _axes(kwargs.get("axis"), getattr(a, "ndim", 0), func.__name__)
            dtype = kwargs.get("dtype")
            static = (func, axes, bool(kwargs.get("keepdims", False)))
            return [a], (*static, None if dtype is None else np.dtype(dtype).str)
        bound = signature.bind(*args, **kwargs)
        for key, value in bound.arguments.items():
            if key not in _SUPPORTED and value is not signature.parameters[key].default:
                raise UnsupportedError(
                    f"np.{func.__name__}(..., {key}=) on DArrays is not supported yet; "
                    f"supported: {', '.join(sorted(_SUPPORTED - {'a'}))}"
                )
        a = bound.arguments["a"]
        ndim = getattr(a, "ndim", 0)
        axes = _axes(bound.arguments.get("axis"), ndim, func.__name__)
        dtype = bound.arguments.get("dtype")
        keepdims = bool(bound.arguments.get("keepdims", False))
        return [a], (func, axes, keepdims, None if dtype is None else np.dtype(dtype).str)

    return parse


def _axes(axis: Any, ndim: int, name: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for item in items:
        try:
            value = operator.index(item)
        except TypeError as exc:
            raise ArgumentTypeError(f"np.{name}: axis must be ints, got {axis!r}") from exc
        if not -ndim <= value < ndim:
            raise AxisArgumentError(value, ndim, f"np.{name}")
        out.append(value % ndim)
    if len(set(out)) != len(out):
        raise ArgumentError(f"np.{name}: duplicate value in axis {axis!r}")
    return tuple(sorted(out))


def out_shape(call: Call) -> tuple[int, ...]:
    """Shape of a reduction's result (axis and keepdims from the call)."""
    _, axes, keepdims, _ = call.static
    shape = call.shapes[0]
    return tuple(1 if d in axes else n for d, n in enumerate(shape) if keepdims or d not in axes)


def dim_map(call: Call) -> tuple[tuple[int | None, ...], ...]:
    """Kept axes move left past the reduced ones (unless keepdims); reduced axes vanish."""
    _, axes, keepdims, _ = call.static
    ndim = len(call.shapes[0])
    return (
        tuple(
            None if d in axes else d if keepdims else d - sum(1 for a in axes if a < d)
            for d in range(ndim)
        ),
    )


def rows(call: Call) -> list[Row]:
    """Sharding rows of a reduction: a reduced sharded dim becomes Partial."""
    func, axes, keepdims, wanted = call.static
    op, keeps_partial = FAMILY[func]
    shape = call.shapes[0]
    result: list[Row] = [(R, R)]
    # A mean with an integer dtype= truncates: each block's share cannot be a term.
    truncates = func is np.mean and wanted is not None and np.dtype(wanted).kind in "biu"
    for d in range(len(shape)):
        if d in axes:
            if not truncates:
                result.append((Partial(op), Shard(d)))
        else:
            new = d if keepdims else d - sum(1 for a in axes if a < d)
            result.append((Shard(new), Shard(d)))
    if keeps_partial and not truncates and call.dtypes and _keeps(func, op, call.dtypes[0], wanted):
        result.append((Partial(op), Partial(op)))
    return result


def _keeps(func: Any, op: str, dtype: Any, wanted: str | None) -> bool:
    """Whether a partial input of ``op`` stays partial through ``func`` on ``dtype`` data.

    Not when the reduction widens a sum's or product's integer terms (``np.sum``
    of int8 adds in int64: terms that wrapped around in int8 would no longer).
    """
    return dtype is not None and partial_survives(op, dtype, _result_dtype(func, dtype, wanted))


def _result_dtype(func: Any, dtype: np.dtype, wanted: str | None) -> np.dtype:
    """The dtype of ``func``'s result on ``dtype`` data (with ``dtype=wanted`` if given)."""
    kwargs = {} if wanted is None else {"dtype": np.dtype(wanted)}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (complex to float warns; the call itself will too)
        return np.asarray(func(np.ones(1, dtype), **kwargs)).dtype


def run(func: Any, blocks: list[Any], call: Call) -> Any:
    """This rank's block: the reduction of its block, as a partial term where sharded."""
    family, axes, keepdims, dtype = call.static
    block = blocks[0]
    shape = call.shapes[0]
    kwargs: dict[str, Any] = {"axis": axes, "keepdims": keepdims}
    if dtype is not None:
        kwargs["dtype"] = np.dtype(dtype)
    if type(block) is np.ndarray and family in _UFUNC_OF:
        # The ufunc's reduce itself, without np.sum's Python wrapper (a hot path).
        return _UFUNC_OF[family].reduce(block, **kwargs)
    if family is np.mean:
        return _mean_term(block, kwargs, math.prod(shape[a] for a in axes))
    if family is np.count_nonzero:
        return np.count_nonzero(block, axis=axes, keepdims=keepdims)
    if family in (np.max, np.min):
        if any(shape[a] == 0 for a in axes):
            raise ArgumentError(
                f"np.{func.__name__}: zero-size array to reduction operation which has no identity"
            )
        kind = block.dtype
        info = (
            np.finfo(kind) if kind.kind in "fc" else np.iinfo(kind) if kind.kind in "iu" else None
        )
        if info is not None:  # empty blocks reduce to the identity
            identity: Any = (
                (-np.inf if family is np.max else np.inf)
                if kind.kind == "f"
                else (info.min if family is np.max else info.max)
            )
            kwargs["initial"] = identity
        elif kind.kind == "b":
            kwargs["initial"] = family is np.min
        if "initial" in kwargs and type(block) is not np.ndarray:
            # CuPy's max/min take no initial=: an empty block is the identity.
            identity = kwargs.pop("initial")
            if any(block.shape[a] == 0 for a in axes):
                kept = [1 if d in axes else n for d, n in enumerate(block.shape)]
                if not keepdims:
                    kept = [n for d, n in enumerate(kept) if d not in axes]
                return array_module(block).full(tuple(kept), identity, dtype=kind)
    return family(block, **kwargs)


def _mean_term(block: Any, kwargs: dict[str, Any], count: int) -> Any:
    """This block's share of a mean: its sum over the global count, accumulated as NumPy does.

    Integers and bools are added in float64 (in their own width they could
    wrap around), float16 in float32 and the result cast back; with an
    integer ``dtype=`` the quotient is cast to it (only a whole block is
    then reduced here: such a mean is not split into partial terms).
    """
    kind = block.dtype
    wanted = kwargs.get("dtype")
    if wanted is None and kind.kind in "biu":
        kwargs = {**kwargs, "dtype": np.float64}
    elif wanted is None and kind == np.float16:
        kwargs = {**kwargs, "dtype": np.float32}
    with np.errstate(all="ignore") if count == 0 else _NO_CONTEXT:
        quotient = np.sum(block, **kwargs) / count
    result = wanted if wanted is not None else np.float16 if kind == np.float16 else None
    if result is not None and quotient.dtype != result:
        return np.asarray(quotient).astype(result)
    return quotient


_NO_CONTEXT = contextlib.nullcontext()
_UFUNC_OF = {np.sum: np.add, np.prod: np.multiply}


def specialize(call: Call) -> Any:
    """``run`` for one call: sums and products of NumPy blocks call the ufunc's reduce directly.

    The keyword handling of :func:`run` then happens once per cached call,
    not per call (a cached ``a.sum()`` spends a third of its time there
    otherwise). Positional arguments: ``reduce(block, axis, dtype, out,
    keepdims)``; a reduction over every axis of an array passes ``axis=None``,
    which NumPy handles fastest and which means the same.
    """
    family, axes, keepdims, dtype = call.static
    ufunc = _UFUNC_OF.get(family)
    if family in _EXTREMUM_OF and dtype is None:
        return _specialize_extremum(call)
    if ufunc is None or dtype is not None:
        return run
    ndim = len(call.shapes[0])
    axis = None if ndim and len(axes) == ndim else axes
    reduce: Any = ufunc.reduce  # (positional keepdims: the stubs name it keyword-only)

    def run_reduce(func: Any, blocks: list[Any], call: Call) -> Any:
        block = blocks[0]
        if type(block) is np.ndarray:
            return reduce(block, axis, None, None, keepdims)
        return run(func, blocks, call)  # CuPy blocks: the general route

    return run_reduce


_EXTREMUM_OF = {np.max: np.maximum, np.min: np.minimum}


def _specialize_extremum(call: Call) -> Any:
    """``run`` for one max/min call: the ufunc's reduce with the identity worked out once.

    The identity (``initial=``, what an empty block reduces to) follows from
    the dtype, which the cached call fixes; :func:`run` looked it up with
    ``np.finfo`` on every call. Where there is none (object, datetime blocks)
    or a reduced axis is empty (NumPy's error), :func:`run` as before.
    """
    family, axes, keepdims, _ = call.static
    shape = call.shapes[0]
    kind = np.dtype(call.dtypes[0]) if call.dtypes and call.dtypes[0] is not None else None
    if kind is None or kind.kind not in "fiub" or any(shape[a] == 0 for a in axes):
        return run
    if kind.kind == "f":
        identity: Any = -np.inf if family is np.max else np.inf
    elif kind.kind == "b":
        identity = family is np.min
    else:
        info = np.iinfo(kind)
        identity = info.min if family is np.max else info.max
    ndim = len(shape)
    axis = None if ndim and len(axes) == ndim else axes
    reduce: Any = _EXTREMUM_OF[family].reduce

    def run_extremum(func: Any, blocks: list[Any], call: Call) -> Any:
        block = blocks[0]
        if type(block) is np.ndarray:
            return reduce(block, axis, None, None, keepdims, identity)
        return run(func, blocks, call)  # CuPy blocks: the general route

    return run_extremum


for _func in FAMILY:
    register(
        _func,
        name=f"reduction.{_func.__name__}",
        out_shape=out_shape,
        parse=_parse_for(_func),
        run=run,
        dim_map=dim_map,
        specialize=specialize,
    )(rows)


def _parse_ufunc_reduce(ufunc: np.ufunc) -> Callable[[tuple[Any, ...], dict[str, Any]], Any]:
    family = UFUNC_REDUCE[ufunc]

    def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        kwargs = dict(kwargs)
        axis = args[1] if len(args) > 1 else kwargs.pop("axis", 0)
        for key in kwargs:
            if key not in ("keepdims", "dtype"):
                raise UnsupportedError(
                    f"np.{ufunc.__name__}.reduce(..., {key}=) is not supported yet"
                )
        a = args[0]
        axes = _axes(axis, getattr(a, "ndim", 0), f"{ufunc.__name__}.reduce")
        dtype = kwargs.get("dtype")
        static = (
            family,
            axes,
            bool(kwargs.get("keepdims", False)),
            None if dtype is None else np.dtype(dtype).str,
        )
        return [a], static

    return parse


for _ufunc in UFUNC_REDUCE:
    register((_ufunc, "reduce"), name=f"reduction.{_ufunc.__name__}.reduce", out_shape=out_shape,
             parse=_parse_ufunc_reduce(_ufunc), run=run, dim_map=dim_map,
             specialize=specialize)(rows)  # fmt: skip


@decompose(np.amax)
def amax(a: Any, *args: Any, **kwargs: Any) -> Any:
    """``np.amax``: NumPy's alias of ``np.max`` (a function of its own, so dispatched apart)."""
    return np.max(a, *args, **kwargs)


@decompose(np.amin)
def amin(a: Any, *args: Any, **kwargs: Any) -> Any:
    """``np.amin``: NumPy's alias of ``np.min``."""
    return np.min(a, *args, **kwargs)
