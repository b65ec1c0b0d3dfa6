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

from collectives.errors import ArgumentTypeError, ShardingError, UnsupportedError
from dmesh import _hooks
from dmesh.context import implicit_replication_active
from dmesh.convert import distribute
from dmesh.darray import DArray
from dmesh.placement import Replicate, shorts
from dmesh.spec import DArraySpec
from ops.propagation import Decision, decide
from ops.registry import Call, Rule, decomposition_for, rule_for

__all__ = ["dispatch_function", "dispatch_ufunc", "install"]

_SCALARS = (int, float, complex, bool, np.generic)


# The hot path: (ufunc, operand specs or scalar types) -> (decision, mesh) of
# a previous call, so that a repeated elementwise call decides nothing.
_seen: dict[tuple[Any, ...], Decision] = {}
_SEEN_LIMIT = 4096
_PYTHON_SCALARS = (int, float, complex, bool)


def dispatch_ufunc(
    ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``ufunc(*inputs, **kwargs)`` with DArray operands (the ``__array_ufunc__`` hook)."""
    if method == "__call__" and not kwargs:
        key = (ufunc, *(x.spec if type(x) is DArray else type(x) for x in inputs))
        decision = _seen.get(key)
        if decision is not None:
            return _run(ufunc, inputs, decision)
    if method != "__call__":
        rule = rule_for((ufunc, method))
        if rule is None or rule.parse is None:
            raise UnsupportedError(
                f"np.{ufunc.__name__}.{method} on DArrays is not supported yet; gather with "
                "a.full_array() if the array is small"
            )
        operands, static = rule.parse(inputs, kwargs)
        return _apply(rule, ufunc, operands, static, f"{ufunc.__name__}.{method}")[0]
    if "where" in kwargs:
        raise UnsupportedError(f"np.{ufunc.__name__}(..., where=) on DArrays is not supported yet")
    if "out" in kwargs:
        return _into(ufunc, inputs, dict(kwargs))
    rule = rule_for(ufunc)
    if rule is None:
        raise UnsupportedError(f"np.{ufunc.__name__} has no sharding rule")
    if rule.parse is not None:  # a generalized ufunc with a rule of its own (matmul)
        operands, static = rule.parse(inputs, kwargs)
        return _apply(rule, ufunc, operands, static, ufunc.__name__)[0]
    static = tuple(sorted((k, repr(v)) for k, v in kwargs.items()))
    result, decision = _apply(rule, ufunc, list(inputs), static, ufunc.__name__, kwargs)
    if not kwargs and all(type(x) is DArray or type(x) in _PYTHON_SCALARS for x in inputs):
        if len(_seen) >= _SEEN_LIMIT:  # bounded: it holds specs, and through them meshes
            _seen.clear()
        key = (ufunc, *(x.spec if type(x) is DArray else type(x) for x in inputs))
        _seen[key] = decision
    return result


def _run(ufunc: np.ufunc, inputs: tuple[Any, ...], decision: Decision) -> DArray:
    """A call whose decision is known: move what must move, compute, wrap."""
    blocks = [
        (x.with_layout(target).local if move else x.local) if target is not None else x
        for x, target, move in zip(inputs, decision.operands, decision.moves)
    ]
    result = ufunc(*blocks)
    mesh = next(x for x in inputs if type(x) is DArray).mesh
    return DArray(result, decision.result_spec(mesh, result.dtype))


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
    if not hasattr(result, "shape"):  # a NumPy scalar from a 0-d result
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


def dispatch_function(func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func(*args, **kwargs)`` with DArray arguments (the ``__array_function__`` hook)."""
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
    return _apply(rule, func, operands, static, func.__name__)[0]


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
    """Connect DArray's NumPy protocols to this dispatcher (see ``dmesh._hooks``)."""
    _hooks.dispatch_ufunc = dispatch_ufunc
    _hooks.dispatch_function = dispatch_function
