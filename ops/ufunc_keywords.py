"""A ufunc's ``out=`` and ``where=`` on DArrays, through the dispatch pipeline.

* ``out=o`` (``a += b``): the plain call, then its result moved to ``o``'s
  layout and written into ``o``'s block;
* ``where=mask[, out=o]``: the inputs, the mask and ``o`` aligned like the
  operands of one elementwise op (no partial rows: a mask selects values),
  then the ufunc computed block by block with ``where=``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh import _hooks
from dmesh._call_keys import call_key, out_key
from dmesh.collectives.device import array_module
from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    ShardingError,
    UnsupportedError,
)
from dmesh.core.scalars import KEY_SCALARS
from dmesh.darray import DArray
from dmesh.ops import aligned
from dmesh.ops.indexing.views import ViewOf, assign_result, writing
from dmesh.ops.pipeline import (
    SCALARS,
    Step,
    align,
    check_operands,
    replicate_arrays,
    steps,
    wrap,
)
from dmesh.ops.propagation import decide, rebased
from dmesh.ops.registry import Call, Rule, implementations
from dmesh.ops.rules.elementwise import broadcast_shape, sharded_rows

__all__ = ["in_place_view", "into", "masked"]

PlainCall = Callable[[np.ufunc, tuple[Any, ...], dict[str, Any]], DArray]


def into(call: PlainCall, ufunc: np.ufunc, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``ufunc(*inputs, out=o)``: ``call`` (the plain ufunc call), then written into ``o``.

    A two-output ufunc's call (``np.modf(a, out=(o1, o2))``) goes to its decomposition
    (``dmesh.ops.rules.two_outputs``), which writes each output.
    """
    out = kwargs.get("out")
    if len(kwargs) == 1 and type(out) is tuple and len(out) == 1:
        # The hot np.add(a, b, out=o) seen before: its operands and result laid out as
        # out, computed straight into out's block.
        target = out[0]
        if (
            type(target) is DArray
            and target._view is None
            and out_key(ufunc, target, inputs) in _direct
            and _hooks.before_block_access is None
            and _hooks.recorder is None
        ):
            if len(inputs) == 2:  # (the common form, without building a list)
                x, y = inputs
                ufunc(
                    x._local if type(x) is DArray else x,
                    y._local if type(y) is DArray else y,
                    out=target._local,
                )
            else:
                ufunc(*[x._local if type(x) is DArray else x for x in inputs], out=target._local)
            return target
    impl = implementations(ufunc).decomposition if ufunc.nout > 1 else None
    if impl is not None:
        return impl(*inputs, **kwargs)
    out = kwargs.pop("out")
    target = _one_out(ufunc.__name__, out)
    if not kwargs and all(x is target or isinstance(x, SCALARS) for x in inputs):
        done = _live_in_place(ufunc, target, inputs)
        if done is not None:
            return done
    if not kwargs and target._view is None and ufunc.signature is None:
        # A cached call whose result is laid out like out (a += b, np.add(a, b, out=o)):
        # computed straight into out's block, no temporary and no copy.
        key = call_key(ufunc, inputs, {})
        step = None if key is None else steps.get(key)
        if step is not None:  # (a plain ufunc step, its result laid out as out: or None)
            step = _laid_out_as(step, inputs, target._spec) if step.run is None else None
        if step is not None:
            block = target.local
            if (
                step.decision.any_move
                and step.piecewise
                and type(block) is np.ndarray
                and aligned.run(
                    ufunc, step.decision, list(inputs), target.mesh, step=step, into=block
                )
                is not None
            ):  # u[1:-1] += u[2:]: shifted operands computed in pieces, straight into out
                return target
            ufunc(*align(inputs, step.decision), out=block)
            direct = out_key(ufunc, target, inputs)
            if not step.decision.any_move and all(k is not None for k in direct):
                if len(_direct) >= 1024:
                    _direct.clear()
                _direct[direct] = None
            return target
    casting = kwargs.get("casting", "same_kind")
    if not any(isinstance(x, DArray) for x in inputs):
        # Only out is a DArray (np.multiply(2.5, x, out=d[0])): the value every rank
        # computes alike, broadcast into out.
        value = np.asarray(ufunc(*inputs, **kwargs))
        if not np.can_cast(value.dtype, target.dtype, casting):
            raise ArgumentTypeError(
                f"np.{ufunc.__name__}: cannot cast the output from {value.dtype!r} to "
                f"{target.dtype!r} with casting rule {casting!r}"
            )
        target[...] = value
        return target
    result = call(ufunc, inputs, kwargs)
    if result.shape != target.shape or result.mesh is not target.mesh:
        raise ShardingError(
            f"np.{ufunc.__name__}(..., out=): the result {result.spec} does not fit out "
            f"{target.spec}; out needs the same shape and mesh"
        )
    assign_result(target, result, casting, f"np.{ufunc.__name__}")
    return target


# (ufunc, out's spec, operand specs or scalar types) of the out= calls that move
# nothing and compute straight into out's block (a set: the key says it all).
_direct: dict[tuple[Any, ...], None] = {}


# (id(step), out's spec) -> (step, the step computing into out's layout, or None).
_into_steps: dict[tuple[int, Any], tuple[Step, Step | None]] = {}


def _laid_out_as(step: Step, inputs: tuple[Any, ...], out: Any) -> Step | None:
    """``step`` with its result laid out as ``out`` (a spec), where only block boundaries
    differ (``propagation.rebased``); else None. Remembered per step and spec."""
    layout = out.layout
    if step.decision.result == layout:
        return step
    entry = _into_steps.get((id(step), out))
    if entry is not None and entry[0] is step:
        return entry[1]
    specs = tuple(x._spec if isinstance(x, DArray) else None for x in inputs)
    decision = rebased(step.decision, specs, layout)
    into_step = None
    if decision is not None:
        into_step = step._replace(
            decision=decision, fast=None, views=None, piecewise=aligned.possible(decision, specs)
        )
    if len(_into_steps) >= 1024:
        _into_steps.clear()
    _into_steps[id(step), out] = (step, into_step)
    return into_step


def _live_in_place(ufunc: np.ufunc, target: DArray, inputs: tuple[Any, ...]) -> Any:
    """``ufunc(*inputs, out=target)`` for a live detached view ``target`` and scalar other
    operands, or None where that does not apply.

    ``row += 1`` on a live view ``a[i]`` (dmesh.ops.indexing.views): the holders' blocks
    are ``a``'s elements, so they compute in place; the other ranks keep their identity
    terms and compute into scratch only so that an error (a cast) is raised on every rank.
    """
    view = target._view
    if type(view) is not ViewOf or not view.live or ufunc.nout != 1 or ufunc.signature:
        return None
    block = target._local
    into_block = block if view.held else array_module(block).empty_like(block)
    ufunc(*[block if x is target else x for x in inputs], out=into_block)
    return target


def in_place_view(ufunc: np.ufunc, target: DArray, other: Any) -> Any:
    """``target op= other`` for a live detached view and a scalar ``other``, straight from
    DArray's in-place operators (``dmesh._hooks.in_place_view``); None otherwise."""
    if type(other) not in KEY_SCALARS or _hooks.recorder is not None:
        return None
    return _live_in_place(ufunc, target, (target, other))


def _one_out(name: str, out: Any) -> DArray:
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != 1 or not isinstance(outs[0], DArray):
        given = ", ".join(_describe(o) for o in outs)
        raise ArgumentTypeError(
            f"np.{name}(..., out=): out must be one DArray when an input is a DArray, got "
            f"{given}. A NumPy array cannot hold a distributed result in place (in-place "
            "operators included: `c += d` with c an ndarray and d a DArray): make the "
            "output a DArray (np.zeros_like(d), dmesh.zeros(...)), or gather the input "
            "with d.full_array()"
        )
    return outs[0]


def _describe(x: Any) -> str:
    """A short description of an out= argument (never its values: it may be large)."""
    if isinstance(x, DArray):
        return f"DArray {x.dtype} {x.shape}"
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"{type(x).__module__}.{type(x).__name__} {x.dtype} {x.shape}"
    return type(x).__name__


# ``ufunc(..., where=mask)``: the inputs, the mask and ``out`` are aligned like
# the operands of one elementwise op.
_MASKED = Rule("elementwise.where", sharded_rows, broadcast_shape)


def masked(ufunc: np.ufunc, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``ufunc(*inputs, where=mask[, out=o])``, computed block by block in aligned layouts.

    Where the mask is False the output keeps ``out``'s values (uninitialized
    without ``out``, as in NumPy).
    """
    name = ufunc.__name__
    where = kwargs.pop("where")
    out = kwargs.pop("out", None)
    if ufunc.nout != 1 or ufunc.signature is not None:
        raise UnsupportedError(f"np.{name}(..., where=) on DArrays: only elementwise ufuncs")
    target = None if out is None else _one_out(name, out)
    if target is not None and target._view is not None:  # a detached view: written through
        with writing(target):
            return masked(ufunc, inputs, {**kwargs, "where": where, "out": target})
    n = len(inputs)
    # Prepare: as the pipeline's, with the mask and out as operands too.
    operands = replicate_arrays([*inputs, where, *([target] if target is not None else [])])
    mesh, specs, shapes = check_operands(name, operands)
    try:
        shape = np.broadcast_shapes(*shapes[: n + 1])
    except ValueError as exc:
        raise ArgumentError(f"np.{name}(..., where=): {exc}") from None
    if target is not None and target.shape != shape:
        raise ArgumentError(
            f"np.{name}(..., out=, where=): out has shape {target.shape}, the result {shape}"
        )
    decision = decide(_MASKED, Call(shapes, tuple(s is not None for s in specs), ()), specs)
    blocks = align(operands, decision)
    if target is None:
        return wrap(ufunc(*blocks[:n], where=blocks[n], **kwargs), decision, mesh)
    buffer = blocks[-1]
    ufunc(*blocks[:n], out=buffer, where=blocks[n], **kwargs)
    if decision.moves[-1]:  # computed in a moved copy of out: move it back
        moved = wrap(buffer, decision, mesh)
        np.copyto(target.local, moved.with_layout(target.spec.layout).local)
    return target
