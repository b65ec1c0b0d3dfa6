"""Dispatch: NumPy calls on DArrays, run block by block with the chosen layouts.

The doors in: ``__array_ufunc__`` (:func:`dispatch_ufunc`: a ufunc, its
methods, its ``out=``/``where=`` forms), ``__array_function__``
(:func:`dispatch_function`) and DArray's operators when an operand is a
temporary whose block may hold the result (:func:`dispatch_donated`). Each
finds the rule of the callable and hands the call to the one pipeline
(``dmesh.ops.pipeline``: prepare the operands, run on the blocks, wrap),
whose cache lets a repeated call skip parsing and deciding. Python scalars
and 0-d arrays are replicated values; any other plain array mixed with
DArrays is an error that says how to convert it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh import _hooks
from dmesh._call_keys import argument_key, binary_key, call_key, parsed_key
from dmesh.collectives import tracing
from dmesh.collectives.errors import UnsupportedError
from dmesh.core.placement import shorts
from dmesh.darray import DArray
from dmesh.ops.indexing.views import VIEW_FUNCTIONS, function_of_view
from dmesh.ops.integer_power import check_integer_power
from dmesh.ops.numpy_implementations import implementation_of, run_implementation
from dmesh.ops.pipeline import lookup, perform, prepare, remember, steps
from dmesh.ops.registry import NOTHING, Rule, implementations, run_forms
from dmesh.ops.rules.elementwise import broadcast_shape, sharded_rows
from dmesh.ops.rules.reductions import UFUNC_REDUCE
from dmesh.ops.static_calls import lookup as static_lookup
from dmesh.ops.static_calls import remember as static_remember
from dmesh.ops.ufunc_keywords import in_place_view, into, masked

__all__ = [
    "call_ufunc", "dispatch_donated", "dispatch_function", "dispatch_ufunc", "function_label",
    "install",
]  # fmt: skip


def dispatch_ufunc(
    ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``ufunc(*inputs, **kwargs)`` with DArray operands (the ``__array_ufunc__`` hook)."""
    if ufunc is np.power and (method != "__call__" or "where" in kwargs):
        check_integer_power(method, inputs, kwargs)  # other calls: in call_ufunc
    if method == "__call__":
        if not kwargs:
            return call_ufunc(ufunc, inputs)
        if "where" in kwargs:
            return masked(ufunc, inputs, dict(kwargs))
        if "out" in kwargs:
            return into(call_ufunc, ufunc, inputs, dict(kwargs))
        return call_ufunc(ufunc, inputs, kwargs)
    if method == "reduce" and kwargs.keys() & {"where", "out", "initial"}:
        family = UFUNC_REDUCE.get(ufunc)  # np.add.reduce(a, 0, out=o) is np.sum(a, 0, out=o)
        if family is not None and implementations(family).takes_keywords(kwargs):
            kwargs = dict(kwargs)
            if isinstance(kwargs.get("out"), tuple):
                kwargs["out"] = kwargs["out"][0]
            axis = inputs[1] if len(inputs) > 1 else kwargs.pop("axis", 0)
            return run_forms(
                implementations(family), family, (inputs[0],), {"axis": axis, **kwargs}
            )
    entry = implementations((ufunc, method))
    result = run_forms(entry, (ufunc, method), inputs, kwargs)
    if result is not NotImplemented:  # ufunc.accumulate, complex maximum.reduce
        return result
    rule = entry.rule
    if rule is None or rule.parse is None:
        raise UnsupportedError(
            f"np.{ufunc.__name__}.{method} on DArrays is not supported yet; gather with "
            "a.full_array() if the array is small"
        )
    name = f"{ufunc.__name__}.{method}"
    return _call_parsed(ufunc, (ufunc, method), rule, inputs, kwargs, name)


def call_ufunc(
    ufunc: np.ufunc, inputs: tuple[Any, ...], kwargs: dict[str, Any] | None = None
) -> DArray:
    """``ufunc(*inputs, **kwargs)`` without ``out=``/``where=``: one pass of the pipeline."""
    if ufunc is np.power:  # its integer error is data-dependent: decided for all ranks
        check_integer_power("__call__", inputs, kwargs or {})
    if not kwargs:
        # The hot path (a cached ``a + b``): the key and the lookup inline.
        if len(inputs) == 2:
            x, y = inputs
            key: tuple[Any, ...] = binary_key(ufunc, x, y)  # (the operators' key)
            step = steps.get(key)
            if step is not None:
                fast = step.fast  # a + b, a * 2.0 where nothing moves: one closure
                if fast is not None:
                    return fast(ufunc, x, y)  # type: ignore[no-any-return]
            mesh = x._spec.mesh if isinstance(x, DArray) else y._spec.mesh  # (a subclass too)
        elif len(inputs) == 1:  # np.sqrt(a): the one operand is the DArray
            (x,) = inputs
            key = (ufunc, x._spec if type(x) is DArray else None)  # (call_key inline)
            mesh = x._spec.mesh
            step = steps.get(key)
            if step is not None and step.fast is not None:
                return step.fast(ufunc, x)  # type: ignore[no-any-return]
        else:
            found = call_key(ufunc, inputs, {})
            mesh = _mesh_of(inputs)
            step = None if found is None else steps.get(found)
        if step is not None:
            return perform(ufunc, step, inputs, mesh)
    entry = implementations(ufunc)
    if entry is not NOTHING:
        result = run_forms(entry, ufunc, inputs, kwargs or {})
        if result is not NotImplemented:  # two outputs: np.divmod, np.frexp
            return result  # type: ignore[no-any-return]
    rule = entry.rule
    if rule is None:
        rule = _any_elementwise(ufunc)
    if rule is None:
        raise UnsupportedError(
            f"np.{ufunc.__name__} on DArrays is not supported yet: it has no sharding rule "
            f"(signature {ufunc.signature!r}, {ufunc.nout} outputs)"
        )
    if rule.parse is not None:  # a generalized ufunc with a rule of its own (matmul)
        return _call_parsed(ufunc, ufunc, rule, inputs, kwargs or {}, ufunc.__name__)
    static = tuple(sorted((k, repr(v)) for k, v in kwargs.items())) if kwargs else ()
    operands, mesh, step = prepare(rule, inputs, static, ufunc.__name__)
    result = perform(ufunc, step, operands, mesh, kwargs)
    remembered = None if kwargs else call_key(ufunc, inputs, {})
    if remembered is not None:
        remember(remembered, step)
    return result


_other_ufuncs: dict[np.ufunc, Rule] = {}


def _any_elementwise(ufunc: np.ufunc) -> Rule | None:
    """The rule of a ufunc dmesh does not register (``scipy.special.erf``, ``np.frompyfunc``'s):
    elementwise, one output, so each block is the ufunc of the aligned blocks. No partial
    rows, since nothing is known of its algebra: a partial operand is reduced first."""
    if ufunc.signature is not None or ufunc.nout != 1:
        return None
    if all(loop.endswith("O") for loop in ufunc.types):  # np.frompyfunc: object arrays
        raise UnsupportedError(
            f"{ufunc.__name__} on DArrays: it makes object arrays, which DArrays do not hold; "
            "use a NumPy or SciPy ufunc, or np.vectorize with otypes= on the local blocks"
        )
    rule = _other_ufuncs.get(ufunc)
    if rule is None:
        rule = Rule(f"elementwise.{ufunc.__name__}", sharded_rows, broadcast_shape)
        if len(_other_ufuncs) < 256:  # bounded: np.frompyfunc makes a ufunc per call
            _other_ufuncs[ufunc] = rule
    return rule


def dispatch_donated(ufunc: np.ufunc, inputs: tuple[Any, ...], donor: int) -> Any:
    """``ufunc(*inputs)`` that may write into ``inputs[donor]``'s block (a temporary).

    Called by DArray's operators (``dmesh._elision``) when that operand is
    referred to by nothing else; the block is reused when it stays in place
    and already has the result's shape and dtype, as NumPy's own elision.
    """
    if ufunc is np.power:
        check_integer_power("__call__", inputs, {})
    key = call_key(ufunc, inputs, {})
    step = None if key is None else lookup(key)
    if step is None:  # the first call decides (and is remembered), without donating
        return call_ufunc(ufunc, inputs)
    return perform(ufunc, step, inputs, _mesh_of(inputs), donor=donor)


def dispatch_function(func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func(*args, **kwargs)`` with DArray arguments (the ``__array_function__`` hook)."""
    if args and type(args[0]) is DArray and args[0]._view is not None and func in VIEW_FUNCTIONS:
        return function_of_view(func, args, kwargs, dispatch_function)  # (ops.indexing.views)
    if not kwargs and len(args) == 1 and type(args[0]) is DArray:
        # The hottest path (``np.sum(a)``): one operand, seen before.
        x = args[0]
        step = steps.get((func, x._spec))
        if step is not None:
            fast = step.fast
            return fast(func, x) if fast is not None else perform(func, step, args, x._spec.mesh)
    if not kwargs and len(args) == 3 and type(args[0]) is type(args[1]) is type(args[2]) is DArray:
        # np.where(c, a, b), np.clip(a, lo, hi) of DArrays, seen before: the key inline.
        step = steps.get((func, args[0]._spec, args[1]._spec, args[2]._spec))
        if step is not None:
            return perform(func, step, args, args[0]._spec.mesh)
    entry = implementations(func)
    if entry.decomposition is not None:
        # Written in NumPy calls on DArrays (np.var, a.reshape): no step of its own to
        # look up (a callable has one implementation), so no key to build.
        return run_forms(entry, func, args, kwargs)
    key = call_key(func, args, kwargs) if all(type(x) is DArray for x in args) else None
    by_value = None
    if key is not None:
        step = lookup(key)
        if step is not None:  # a previous call's parse and decision (``np.dot(a, b)``)
            if step.fast is not None and len(args) == 1:  # (np.sum(a, axis=0): the
                return step.fast(func, args[0])  # keywords are in the step, as parsed)
            return perform(func, step, args, args[0]._spec.mesh)
    elif args and "out" not in kwargs:  # (an out= DArray keys no call)
        by_value = argument_key(func, args, kwargs)
        found = None if by_value is None else static_lookup(by_value)
        if found is not None:  # np.sum(a, 0), np.einsum("i,i->", a, b) seen before
            step, positions = found
            if step.fast is not None and len(positions) == 1:
                return step.fast(func, args[positions[0]])
            operands = [args[i] for i in positions]
            mesh = next(x for x in operands if type(x) is DArray)._spec.mesh
            return perform(func, step, operands, mesh)
    # Keywords the rule does not take (a reduction's where=), a call it does not take
    # (np.where(c) alone): the forms, in the one order (ops.registry.Implementations).
    result = run_forms(entry, func, args, kwargs)
    if result is not NotImplemented:
        return result
    rule = entry.rule
    if rule is None and implementation_of(func) is not None:
        return run_implementation(func, args, kwargs)  # NumPy's code, DArrays flowing through
    if rule is None or rule.parse is None:
        darrays = [a for a in args if isinstance(a, DArray)]
        placements = ", ".join(shorts(a.placements) for a in darrays) or "in a list"
        raise UnsupportedError(
            f"np.{func.__name__} on DArrays (placements {placements}) is not supported yet; "
            "gather with a.full_array() if the array is small, or use a supported operation"
        )
    return _call_parsed(func, func, rule, args, kwargs, func.__name__, key, by_value)


def _call_parsed(
    func: Any,
    registered: Any,
    rule: Rule,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
    key: tuple[Any, ...] | None = None,
    by_value: tuple[Any, ...] | None = None,
) -> DArray:
    """A call whose rule parses its arguments: parse, then the pipeline; remembered if it can be.

    Remembered under ``key`` (or the key of its arguments) when the
    arguments are the operands, so that a later call with the same specs and
    keywords skips the parse as well; under ``by_value`` (its other positional
    arguments by value, ``dmesh.ops.static_calls``) when the parsed operands
    are among the arguments.
    """
    parsed, static = rule.parse(args, kwargs)  # type: ignore[misc]  # callers check parse
    # The parsed operands and static arguments key the step too (np.concatenate's
    # list, np.stack's): what prepare decides follows from their specs alone.
    by_parse = parsed_key(registered, parsed, static)
    step = None if by_parse is None else steps.get(by_parse)
    if step is not None:  # (another call with the same parse: np.sum(a) after a.sum())
        operands = parsed
        mesh = next(x for x in parsed if type(x) is DArray)._spec.mesh
    else:
        operands, mesh, step = prepare(rule, parsed, static, name)
        if by_parse is not None:
            remember(by_parse, step)
    if (
        by_parse is not None
        and by_value is not None
        and all(x is y for x, y in zip(operands, parsed))
    ):
        static_remember(by_value, step, parsed, args)
    result = perform(func, step, operands, mesh)
    same = len(operands) == len(args) and all(x is y for x, y in zip(operands, args))
    if same and args and all(type(x) is DArray for x in args):
        # Under this call's own key too, so that its next call skips the parse.
        key = key or call_key(registered, args, kwargs)
        if key is not None:
            remember(key, step)
    return result


def _mesh_of(inputs: tuple[Any, ...]) -> Any:
    for x in inputs:
        if type(x) is DArray:
            return x._spec.mesh
    raise AssertionError("a call dispatched without DArray operands")  # pragma: no cover


def install() -> None:
    """Connect DArray's NumPy protocols to this dispatcher (see ``dmesh._hooks``).

    While a debug tool watches (``dmesh.collectives.tracing``), the hooks are the
    ``_watched_*`` versions, which mark each call as an op for the records;
    otherwise they are the dispatchers themselves, with no check on the way.
    """
    tracing.on_hook_change(_connect)


def _connect(watched: bool) -> None:
    if watched:
        _hooks.dispatch_ufunc = _watched_ufunc
        _hooks.dispatch_function = _watched_function
        _hooks.dispatch_donated = _watched_donated
        _hooks.dispatch_operator = _watched_operator
        _hooks.operator_steps = None  # (every op through the watched hooks)
        _hooks.in_place_view = None
    else:
        _hooks.dispatch_ufunc = dispatch_ufunc
        _hooks.dispatch_function = dispatch_function
        _hooks.dispatch_donated = dispatch_donated
        _hooks.dispatch_operator = call_ufunc
        _hooks.operator_steps = steps
        _hooks.in_place_view = in_place_view


def function_label(func: Any) -> str:
    """``np.sum``, ``np.linalg.qr``, ``np.fft.fftn``: how a NumPy function is written."""
    module = getattr(func, "__module__", None) or "numpy"
    parts = module.split(".")
    sub = parts[1] if parts[0] == "numpy" and len(parts) > 1 else ""
    prefix = "np." if not sub or sub.startswith("_") else f"np.{sub}."
    return prefix + getattr(func, "__name__", repr(func))


def _watched_ufunc(
    ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    label = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    with tracing.op_scope(label, inputs) as scope:
        scope.result = dispatch_ufunc(ufunc, method, inputs, kwargs)
    return scope.result


def _watched_function(func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    with tracing.op_scope(function_label(func), args) as scope:
        scope.result = dispatch_function(func, types, args, kwargs)
    return scope.result


def _watched_donated(ufunc: np.ufunc, inputs: tuple[Any, ...], donor: int) -> Any:
    with tracing.op_scope(f"np.{ufunc.__name__}", inputs) as scope:
        scope.result = dispatch_donated(ufunc, inputs, donor)
    return scope.result


def _watched_operator(ufunc: np.ufunc, inputs: tuple[Any, ...]) -> Any:
    with tracing.op_scope(f"np.{ufunc.__name__}", inputs) as scope:
        scope.result = call_ufunc(ufunc, inputs)
    return scope.result
