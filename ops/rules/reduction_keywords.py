"""``where=``, ``initial=`` and ``out=`` of reductions, written with ops that have rules.

* ``where=mask``: the unselected elements are replaced by the op's identity
  (``np.where(mask, a, 0)`` for a sum) and the array is reduced as usual, so
  the mask is aligned with ``a`` like any elementwise operand. ``mean`` divides
  the masked sum by the masked count. ``max``/``min`` have no identity: as in
  NumPy, a mask needs ``initial=``, which fills the unselected elements.
* ``initial=v``: combined with the reduced value (``+ v``, ``* v``,
  ``maximum(., v)``); over an empty axis the result is ``v``.
* ``out=o``: the result is moved to ``o``'s layout and written into ``o``.

Calls without these keywords never come here: they keep the reduction rule
and the dispatch caches.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh import _hooks
from dmesh._call_keys import argument_key
from dmesh.collectives import tracing
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.collectives.reduce_ops import canonical_nan
from dmesh.collectives.reductions import SPLIT_BYTES
from dmesh.darray import DArray
from dmesh.ops.indexing.views import assign_result, write_out
from dmesh.ops.pipeline import perform
from dmesh.ops.registry import keyword_form, special_form
from dmesh.ops.static_calls import lookup as static_lookup
from dmesh.scalar_routes import LOCAL, direct_route

_FUNCS = (np.sum, np.prod, np.max, np.min, np.any, np.all, np.mean)
# Each function's parameters in order (their positional order differs: np.sum
# takes dtype before out, np.max has no dtype).
_PARAMETERS = {func: tuple(inspect.signature(func).parameters) for func in _FUNCS}
_POSITIONAL = {
    func: sum(
        p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        for p in inspect.signature(func).parameters.values()
    )
    for func in _FUNCS
}
_IDENTITY: dict[Callable[..., Any], Any] = {np.sum: 0, np.prod: 1, np.any: False, np.all: True}
_COMBINE: dict[Callable[..., Any], np.ufunc] = {
    np.sum: np.add,
    np.prod: np.multiply,
    np.max: np.maximum,
    np.min: np.minimum,
}
_HANDLED = {"a", "axis", "dtype", "keepdims", "where", "out", "initial"}


@keyword_form(*_FUNCS, keywords={"where", "out", "initial"})
def reduce_with_keywords(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(a, ..., where=, initial=, out=)`` on DArrays (collective)."""
    if "out" in kwargs and "where" not in kwargs and "initial" not in kwargs:
        done = _into(func, args, kwargs)
        if done is not NotImplemented:
            return done
    arguments = _bind(func, args, kwargs)
    unknown = sorted(set(arguments) - _HANDLED)
    if unknown:
        raise UnsupportedError(
            f"np.{func.__name__}(..., {unknown[0]}=) on DArrays is not supported yet; "
            f"supported: axis, dtype, keepdims, where, out"
            + (", initial" if func in _COMBINE else "")
        )
    a = arguments["a"]
    where = arguments.get("where", True)
    out = arguments.get("out")
    initial = arguments.get("initial", np._NoValue)
    plain: dict[str, Any] = {
        k: arguments[k] for k in ("axis", "dtype", "keepdims") if k in arguments
    }
    has_initial = initial is not np._NoValue
    selects_all = where is True or (isinstance(where, np.bool_) and bool(where))
    if func in (np.max, np.min) and not selects_all and not has_initial:
        name = "maximum" if func is np.max else "minimum"
        raise ArgumentError(
            f"reduction operation {name!r} does not have an identity, so to use a where mask "
            "one has to specify 'initial' (as in NumPy)"
        )

    def compute() -> Any:
        if func is np.mean:
            return a.mean(**plain) if selects_all else _masked_mean(a, where, **plain)
        source = a
        if not selects_all:
            fill = initial if func in (np.max, np.min) else _IDENTITY[func]
            # A NumPy scalar of a's dtype: a 0-d ndarray would not mix with CuPy blocks.
            source = np.where(where, a, np.dtype(a.dtype).type(fill))
        return _reduce(func, source, initial if has_initial else np._NoValue, plain)

    return compute() if out is None else write_out(func.__name__, out, compute)


# (func, a's spec and the other arguments by value, out's spec) -> [the reduction's
# result spec, that spec's route to out's layout], for
# ``func(a, axis, out=o)`` without where= or initial= (see _into).
_routes: dict[tuple[Any, ...], list[Any]] = {}
_INTO = {"a", "axis", "dtype", "keepdims", "out"}


def _into(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func(a, ..., out=o)`` reduced straight into ``o``'s block where the plan from the
    result to ``o``'s layout is one plain ``all_reduce`` (a sum over a sharded axis into a
    replicated ``o``): the local reduction, then one ``Allreduce`` into ``o``'s block, with
    no result array, move or copy between. Else the result is written as ``write_out``
    does; NotImplemented where this does not apply (a view ``o``, a debug tool watching,
    ``dmesh.compile`` recording, an argument that keys no call). Every condition of the
    direct route reads what every rank of the reduction holds alike (specs, dtypes, the
    replicated block's shape and strides), so all take the same path."""
    out = kwargs["out"]
    a = args[0] if args else kwargs.get("a")
    if (
        type(out) is not DArray
        or type(a) is not DArray
        or out._view is not None
        or tracing.hooked
        or _hooks.recorder is not None
    ):
        return NotImplemented
    rest = {k: v for k, v in kwargs.items() if k != "out"}
    called = argument_key(func, args, rest)
    if called is None:
        return NotImplemented
    key = (called, out._spec)
    entry = _routes.get(key)
    if entry is None:
        if not _bind(func, args, kwargs).keys() <= _INTO:  # (and Python's errors, as NumPy)
            return NotImplemented
        if len(_routes) >= 1024:  # bounded: keys hold specs, and through them meshes
            _routes.clear()
        entry = _routes[key] = [None, None]
    found = static_lookup(called)
    if found is not None:  # the reduction without out= seen before: its step
        step, positions = found
        if step.fast is not None and len(positions) == 1:
            result = step.fast(func, args[positions[0]])
        else:
            result = perform(func, step, [args[i] for i in positions], a._spec.mesh)
    else:
        result = func(*args, **rest)
    spec = result._spec if type(result) is DArray else None
    if spec is None or entry[0] is not spec:  # (a spec seen here before was checked then)
        if spec is None or result.shape != out.shape or result.mesh is not out.mesh:
            return write_out(func.__name__, out, lambda: result)  # (raises write_out's error)
        entry[0], entry[1] = spec, _route_into(spec, out._spec)
    route = entry[1]
    block, local = out._local, result._local
    if route is LOCAL:  # (one rank: the partial sum is the sum)
        np.copyto(block, local, casting="unsafe")
        return out
    if (
        route is not None
        and type(block) is np.ndarray
        and type(local) is np.ndarray
        and block.flags.c_contiguous
        and local.flags.c_contiguous
    ):
        # (dmesh.collectives.all_reduce's small-message path, into out's block)
        comm, plan = route
        count = local.size
        comm.Allreduce([local, count, plan.datatype], [block, count, plan.datatype], plan.mpi_op)
        if plan.canonical and comm.Get_size() > 1:
            canonical_nan(block)
        return out
    assign_result(out, result, "unsafe", f"np.{func.__name__}")
    return out


def _route_into(spec: Any, target: Any) -> Any:
    """How a result of ``spec`` reaches ``out`` of spec ``target`` directly: ``LOCAL`` (a
    copy), ``(communicator, ReducePlan)`` (one ``Allreduce`` into out's block: the same
    dtype and block shape, native byte order, and a message that
    ``dmesh.collectives.all_reduce`` would not split), or None (``assign_result``).
    From the specs alone: every rank of the reduction decides alike."""
    found = direct_route(spec, target.layout)
    if found is None:
        return None
    route = found[1]
    if route is LOCAL:
        return LOCAL
    nbytes = math.prod(spec.local_shape()) * spec.dtype.itemsize
    if (
        spec.dtype != target.dtype
        or not spec.dtype.isnative
        or spec.local_shape() != target.local_shape()
        or (nbytes >= SPLIT_BYTES and route[1].canonical)
    ):
        return None
    return route


def _bind(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The arguments of ``func(*args, **kwargs)`` by parameter name (the ones given only),
    with Python's errors for too many or unknown arguments: ``inspect``'s bind without
    its cost (several microseconds, on every reduction with ``out=``)."""
    names = _PARAMETERS[func]
    if len(args) > _POSITIONAL[func]:
        raise TypeError(
            f"{func.__name__}() takes from 1 to {_POSITIONAL[func]} positional arguments but "
            f"{len(args)} were given"
        )
    arguments = dict(zip(names, args))
    for name, value in kwargs.items():
        if name in arguments:
            raise TypeError(f"{func.__name__}() got multiple values for argument {name!r}")
        if name not in names:
            raise TypeError(f"{func.__name__}() got an unexpected keyword argument {name!r}")
        arguments[name] = value
    if "a" not in arguments:
        raise TypeError(f"{func.__name__}() missing 1 required positional argument: 'a'")
    return arguments


def _reduce(func: Callable[..., Any], a: Any, initial: Any, plain: dict[str, Any]) -> Any:
    if initial is np._NoValue:
        return func(a, **plain)
    axis = plain.get("axis")
    axes = range(a.ndim) if axis is None else axis if isinstance(axis, tuple) else (axis,)
    if func in (np.max, np.min) and any(a.shape[d] == 0 for d in axes):
        # Nothing to reduce: every result element is ``initial``.
        zeros = np.sum(a, **{**plain, "dtype": a.dtype})
        return np.add(np.multiply(zeros, 0), initial, dtype=zeros.dtype)
    reduced = func(a, **plain)
    return _COMBINE[func](reduced, initial, dtype=reduced.dtype)


def _masked_mean(
    a: Any, where: Any, axis: Any = None, dtype: Any = None, keepdims: Any = False
) -> Any:
    """``np.mean(a, where=where)``: the masked sum over the masked count."""
    kind = np.dtype(a.dtype)
    accumulate = dtype
    if accumulate is None:
        # NumPy's choices: integers average in float64, float16 in float32.
        accumulate = (
            np.float64 if kind.kind in "biu" else np.float32 if kind == np.float16 else kind
        )
    total = np.sum(
        np.where(where, a, np.dtype(a.dtype).type(0)),
        axis=axis,
        dtype=accumulate,
        keepdims=keepdims,
    )
    selected = np.logical_and(np.logical_or(a == a, True), where)  # the mask at a's shape
    count = np.sum(selected, axis=axis, keepdims=keepdims)
    result = np.true_divide(total, count)
    wanted = np.dtype(dtype) if dtype is not None else kind if kind.kind in "fc" else None
    return result.astype(wanted) if wanted is not None and result.dtype != wanted else result


def _complex_extreme(find_max: bool) -> Callable[..., Any]:
    """``np.max``/``np.min`` (and ``maximum.reduce``/``minimum.reduce``) of complex data:
    NumPy orders complex numbers lexicographically, which no MPI reduction does, so the
    rule's ``Partial`` rows cannot hold them; the candidates kernel finds them instead."""

    def extreme(a: Any, axis: Any = None, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(a, DArray) or a.dtype.kind != "c":
            return NotImplemented
        from dmesh.ops.kernels.argextreme import extreme_values

        keepdims = bool(kwargs.pop("keepdims", False))
        if args or any(v is not None and v is not np._NoValue for v in kwargs.values()):
            raise UnsupportedError(
                f"np.{'max' if find_max else 'min'} of complex DArrays takes axis and keepdims "
                f"only; got {sorted(kwargs) or 'more positional arguments'}"
            )
        if isinstance(axis, tuple):
            if len(axis) != 1:
                raise UnsupportedError(
                    f"np.{'max' if find_max else 'min'} of complex DArrays over several axes "
                    f"{axis}: reduce one axis at a time"
                )
            axis = axis[0]
        return extreme_values(a, axis, keepdims, find_max)

    return extreme


special_form(np.max, (np.maximum, "reduce"))(_complex_extreme(True))
special_form(np.min, (np.minimum, "reduce"))(_complex_extreme(False))
