"""Dispatch: NumPy calls on DArrays, run block by block with the chosen layouts.

Unwrap the operands, ask propagation for the cheapest layouts (cached), move
the DArray operands there, call the NumPy function on the local blocks (CuPy
blocks dispatch themselves through the same protocols) and wrap the result
with the propagated spec. Python scalars and 0-d arrays are replicated
values; any other plain array mixed with DArrays is an error that says how to
convert it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dmesh import _hooks
from dmesh.collectives import tracing
from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    ShardingError,
    UnsupportedError,
)
from dmesh.context import implicit_replication_active
from dmesh.convert import distribute
from dmesh.core.placement import Replicate, shorts
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.propagation import Decision, decide
from dmesh.ops.registry import Call, Rule, decomposition_for, keyword_form_for, rule_for
from dmesh.ops.rules.elementwise import broadcast_shape, sharded_rows
from dmesh.ops.rules.reductions import UFUNC_REDUCE

__all__ = ["dispatch_donated", "dispatch_function", "dispatch_ufunc", "install"]

_SCALARS = (int, float, complex, bool, np.generic)


# The hot path: (ufunc, operand specs or scalar types) -> (decision, mesh) of
# a previous call, so that a repeated elementwise call decides nothing.
_seen: dict[tuple[Any, ...], Decision] = {}
_SEEN_LIMIT = 4096
_PYTHON_SCALARS = (int, float, complex, bool)
# The same for functions of DArrays without keywords: (func, *specs) -> the
# rule, the parsed call and the decision.
_seen_calls: dict[tuple[Any, ...], tuple[Rule, Call, Decision]] = {}


def dispatch_ufunc(
    ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``ufunc(*inputs, **kwargs)`` with DArray operands (the ``__array_ufunc__`` hook)."""
    if method == "__call__" and not kwargs:
        key = (ufunc, *[x._spec if type(x) is DArray else type(x) for x in inputs])
        decision = _seen.get(key)
        if decision is not None:
            return _run(ufunc, inputs, decision)
    if method == "reduce" and kwargs.keys() & {"where", "out", "initial"}:
        family = UFUNC_REDUCE.get(ufunc)
        form = None if family is None else keyword_form_for(family, kwargs)
        if form is not None:
            kwargs = dict(kwargs)
            if isinstance(kwargs.get("out"), tuple):
                kwargs["out"] = kwargs["out"][0]
            axis = inputs[1] if len(inputs) > 1 else kwargs.pop("axis", 0)
            return form(family, inputs[0], axis=axis, **kwargs)
    if method != "__call__":
        impl = decomposition_for((ufunc, method))
        if impl is not None:  # ufunc.accumulate
            return impl(*inputs, **kwargs)
        rule = rule_for((ufunc, method))
        if rule is None or rule.parse is None:
            raise UnsupportedError(
                f"np.{ufunc.__name__}.{method} on DArrays is not supported yet; gather with "
                "a.full_array() if the array is small"
            )
        operands, static = rule.parse(inputs, kwargs)
        return _apply(rule, ufunc, operands, static, f"{ufunc.__name__}.{method}")[0]
    if "where" in kwargs:
        return _masked(ufunc, inputs, dict(kwargs))
    if "out" in kwargs:
        return _into(ufunc, inputs, dict(kwargs))
    rule = rule_for(ufunc)
    if rule is None:
        raise UnsupportedError(f"np.{ufunc.__name__} has no sharding rule")
    if rule.parse is not None:  # a generalized ufunc with a rule of its own (matmul)
        operands, static = rule.parse(inputs, kwargs)
        result, decision = _apply(rule, ufunc, operands, static, ufunc.__name__)
        if rule.run is None and not kwargs and all(type(x) is DArray for x in inputs):
            _remember((ufunc, *(x.spec for x in inputs)), decision)
        return result
    static = tuple(sorted((k, repr(v)) for k, v in kwargs.items()))
    result, decision = _apply(rule, ufunc, list(inputs), static, ufunc.__name__, kwargs)
    if not kwargs and all(type(x) is DArray or type(x) in _PYTHON_SCALARS for x in inputs):
        _remember((ufunc, *(x.spec if type(x) is DArray else type(x) for x in inputs)), decision)
    return result


def _remember(key: tuple[Any, ...], decision: Decision) -> None:
    if len(_seen) >= _SEEN_LIMIT:  # bounded: it holds specs, and through them meshes
        _seen.clear()
    _seen[key] = decision


def dispatch_donated(ufunc: np.ufunc, inputs: tuple[Any, ...], donor: int) -> Any:
    """``ufunc(*inputs)`` that may write into ``inputs[donor]``'s block (a temporary).

    Called by DArray's operators (``dmesh._elision``) when that operand is
    referred to by nothing else; the block is reused when it stays in place
    and already has the result's shape and dtype, as NumPy's own elision.
    """
    key = (ufunc, *(x.spec if type(x) is DArray else type(x) for x in inputs))
    decision = _seen.get(key)
    if decision is None:
        return dispatch_ufunc(ufunc, "__call__", inputs, {})
    return _run(ufunc, inputs, decision, donor)


def _run(ufunc: np.ufunc, inputs: tuple[Any, ...], decision: Decision, donor: int = -1) -> DArray:
    """A call whose decision is known: move what must move, compute, wrap."""
    if decision.any_move:
        blocks = [
            (x.with_layout(target).local if move else x.local) if target is not None else x
            for x, target, move in zip(inputs, decision.operands, decision.moves)
        ]
    else:  # nothing moves (the common repeated call)
        blocks = [x._local if type(x) is DArray else x for x in inputs]
    if donor >= 0 and not decision.moves[donor] and _fits(ufunc, blocks, blocks[donor]):
        result = ufunc(*blocks, out=blocks[donor])
    else:
        result = ufunc(*blocks)
    for x in inputs:
        if type(x) is DArray:
            return DArray(result, decision.result_spec(x._spec.mesh, result.dtype))
    raise AssertionError("a ufunc dispatched without DArray operands")  # pragma: no cover


def _fits(ufunc: np.ufunc, blocks: list[Any], out: Any) -> bool:
    """Whether ``ufunc(*blocks)`` has ``out``'s shape and dtype (so ``out=`` changes nothing)."""
    if ufunc.nout != 1:
        return False
    try:
        shape = np.broadcast_shapes(*(np.shape(b) for b in blocks))
        dtypes = tuple(b.dtype if hasattr(b, "dtype") else type(b) for b in blocks)
        dtype = ufunc.resolve_dtypes((*dtypes, None))[-1]
    except (TypeError, ValueError):  # no loop for these types: the plain call says why
        return False
    return bool(shape == out.shape and dtype == out.dtype)


def _apply(
    rule: Rule,
    func: Any,
    operands: list[Any],
    static: tuple[Any, ...],
    name: str,
    kwargs: dict[str, Any] | None = None,
) -> tuple[DArray, Decision]:
    """Move the operands to the chosen layouts, compute the blocks, wrap the result."""
    operands = _replicate_arrays(operands)
    mesh, specs, shapes = _operands(name, operands)
    call = Call(shapes, tuple(s is not None for s in specs), static)
    decision = decide(rule, call, specs)
    blocks = [
        (x.with_layout(target).local if move else x.local) if target is not None else x
        for x, target, move in zip(operands, decision.operands, decision.moves)
    ]
    if rule.run is not None:
        result = rule.run(func, blocks, call)
    else:
        result = func(*blocks, **(kwargs or {}))
    if isinstance(result, np.generic) or not hasattr(result, "shape"):  # a 0-d result
        result = np.asarray(result)
    return DArray(result, decision.result_spec(mesh, result.dtype)), decision


def _into(ufunc: np.ufunc, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``out=``: compute, move the result to ``out``'s layout, write it there (``a += b``)."""
    out = kwargs.pop("out")
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != 1 or not isinstance(outs[0], DArray):
        raise ArgumentTypeError(
            f"np.{ufunc.__name__}(..., out=): out must be one DArray, got {out!r}"
        )
    target = outs[0]
    result = dispatch_ufunc(ufunc, "__call__", inputs, kwargs)
    if result.shape != target.shape or result.mesh is not target.mesh:
        raise ShardingError(
            f"np.{ufunc.__name__}(..., out=): the result {result.spec} does not fit out "
            f"{target.spec}; out needs the same shape and mesh"
        )
    moved = result.with_layout(target.spec.layout)
    np.copyto(target.local, moved.local, casting=kwargs.get("casting", "same_kind"))
    return target


# ``ufunc(..., where=mask)``: the inputs, the mask and ``out`` are aligned like
# the operands of one elementwise op (no partial rows: a mask selects values).
_MASKED = Rule("elementwise.where", sharded_rows, broadcast_shape)


def _masked(ufunc: np.ufunc, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``ufunc(*inputs, where=mask[, out=o])``, computed block by block in aligned layouts.

    Where the mask is False the output keeps ``out``'s values (uninitialized
    without ``out``, as in NumPy).
    """
    name = ufunc.__name__
    where = kwargs.pop("where")
    out = kwargs.pop("out", None)
    if ufunc.nout != 1 or ufunc.signature is not None:
        raise UnsupportedError(f"np.{name}(..., where=) on DArrays: only elementwise ufuncs")
    target = None
    if out is not None:
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != 1 or not isinstance(outs[0], DArray):
            raise ArgumentTypeError(f"np.{name}(..., out=): out must be one DArray, got {out!r}")
        target = outs[0]
    n = len(inputs)
    operands = _replicate_arrays([*inputs, where, *([target] if target is not None else [])])
    mesh, specs, shapes = _operands(name, operands)
    try:
        shape = np.broadcast_shapes(*shapes[: n + 1])
    except ValueError as exc:
        raise ArgumentError(f"np.{name}(..., where=): {exc}") from None
    if target is not None and target.shape != shape:
        raise ArgumentError(
            f"np.{name}(..., out=, where=): out has shape {target.shape}, the result {shape}"
        )
    call = Call(shapes, tuple(s is not None for s in specs), ())
    decision = decide(_MASKED, call, specs)
    blocks = [
        (x.with_layout(layout).local if move else x.local) if layout is not None else x
        for x, layout, move in zip(operands, decision.operands, decision.moves)
    ]
    if target is None:
        result = np.asarray(ufunc(*blocks[:n], where=blocks[n], **kwargs))
        return DArray(result, decision.result_spec(mesh, result.dtype))
    buffer = blocks[-1]
    ufunc(*blocks[:n], out=buffer, where=blocks[n], **kwargs)
    if decision.moves[-1]:  # computed in a moved copy of out: move it back
        moved = DArray(buffer, decision.result_spec(mesh, buffer.dtype))
        np.copyto(target.local, moved.with_layout(target.spec.layout).local)
    return target


def dispatch_function(func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func(*args, **kwargs)`` with DArray arguments (the ``__array_function__`` hook)."""
    if not kwargs and len(args) == 1 and type(args[0]) is DArray:
        # The hottest path (``np.sum(a)``): one operand, seen before.
        seen = _seen_calls.get((func, args[0].spec))
        if seen is not None:
            return _run_one(func, args[0], *seen)
    cacheable = not kwargs and all(type(x) is DArray for x in args)
    if cacheable:
        # A previous call's parse and decision (``np.dot(a, b)``), so that
        # nothing is parsed or decided again.
        seen = _seen_calls.get((func, *(x.spec for x in args)))
        if seen is not None:
            return _run_known(func, args, *seen)
    if kwargs:
        form = keyword_form_for(func, kwargs)
        if form is not None:  # keywords the rule does not take (a reduction's where=)
            return form(func, *args, **kwargs)
    impl = decomposition_for(func)
    if impl is not None:
        return impl(*args, **kwargs)
    rule = rule_for(func)
    if rule is None or rule.parse is None:
        darrays = [a for a in args if isinstance(a, DArray)]
        placements = ", ".join(shorts(a.placements) for a in darrays) or "in a list"
        raise UnsupportedError(
            f"np.{func.__name__} on DArrays (placements {placements}) is not supported yet; "
            "gather with a.full_array() if the array is small, or use a supported operation"
        )
    operands, static = rule.parse(args, kwargs)
    result, decision = _apply(rule, func, operands, static, func.__name__)
    # Remembered when the arguments are the operands (parse moved nothing).
    same = len(operands) == len(args) and all(x is y for x, y in zip(operands, args))
    if cacheable and args and same:
        if len(_seen_calls) >= _SEEN_LIMIT:
            _seen_calls.clear()
        call = Call(tuple(x.shape for x in args), (True,) * len(args), static)
        key = (func, *(x.spec for x in args))
        _seen_calls[key] = (rule, call, decision)
    return result


def _run_one(func: Any, x: DArray, rule: Rule, call: Call, decision: Decision) -> DArray:
    """``_run_known`` of one operand, without the loops."""
    target = decision.operands[0]
    block = x.with_layout(target).local if decision.moves[0] and target is not None else x.local
    result = rule.run(func, [block], call) if rule.run is not None else func(block)
    if type(result) is not np.ndarray and (
        isinstance(result, np.generic) or not hasattr(result, "shape")
    ):  # a 0-d result
        result = np.asarray(result)
    return DArray(result, decision.result_spec(x.mesh, result.dtype))


def _run_known(
    func: Any, args: tuple[DArray, ...], rule: Rule, call: Call, decision: Decision
) -> DArray:
    """A call on DArrays whose parse and decision are known."""
    blocks = [
        x.with_layout(target).local if move and target is not None else x.local
        for x, target, move in zip(args, decision.operands, decision.moves)
    ]
    result = rule.run(func, blocks, call) if rule.run is not None else func(*blocks)
    if isinstance(result, np.generic) or not hasattr(result, "shape"):  # a 0-d result
        result = np.asarray(result)
    return DArray(result, decision.result_spec(args[0].mesh, result.dtype))


def _replicate_arrays(inputs: Sequence[Any]) -> list[Any]:
    """Inside ``dmesh.implicit_replication()``: plain arrays become replicated DArrays."""
    mesh = next((x.mesh for x in inputs if isinstance(x, DArray)), None)
    if mesh is None or not implicit_replication_active():
        return list(inputs)
    replicated = [Replicate()] * mesh.ndim
    return [
        distribute(x, mesh, replicated) if isinstance(x, np.ndarray) and x.ndim else x
        for x in inputs
    ]


def _operands(
    name: str, inputs: Sequence[Any]
) -> tuple[Any, tuple[DArraySpec | None, ...], tuple[tuple[int, ...], ...]]:
    mesh = None
    specs: list[DArraySpec | None] = []
    shapes: list[tuple[int, ...]] = []
    for i, x in enumerate(inputs):
        if isinstance(x, DArray):
            if mesh is None:
                mesh = x.mesh
            elif x.mesh is not mesh:
                raise ShardingError(
                    f"np.{name}: operands {0} and {i} are on different meshes ({mesh!r} and "
                    f"{x.mesh!r}); redistribute one onto the other's mesh first"
                )
            specs.append(x.spec)
            shapes.append(x.shape)
        elif isinstance(x, _SCALARS) or (isinstance(x, np.ndarray) and x.ndim == 0):
            specs.append(None)
            shapes.append(())
        else:
            raise ArgumentTypeError(
                f"np.{name}: operand {i} is a {type(x).__name__} of shape "
                f"{getattr(x, 'shape', '?')}, mixed with DArrays; make it a DArray first, e.g. "
                "dmesh.distribute(x, mesh, placements) (every rank holds x) or "
                "dmesh.distribute(x, mesh, placements, src=0), or use it inside "
                "`with dmesh.implicit_replication():`"
            )
    return mesh, tuple(specs), tuple(shapes)


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
    else:
        _hooks.dispatch_ufunc = dispatch_ufunc
        _hooks.dispatch_function = dispatch_function
        _hooks.dispatch_donated = dispatch_donated


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
