"""Two-output ufuncs on DArrays: ``np.divmod``, ``np.frexp``, ``np.modf``, and
``np.real_if_close``.

The operands are aligned as for one elementwise op (every row replicated or
sharded alike; no partial rows: ``modf`` of a partial max is not the max of
the ``modf``'s, nor ``divmod`` of a partial sum the sum of the ``divmod``'s),
then the ufunc runs once on the blocks and each of its outputs is wrapped in
the decided layout: the quotient and the remainder come from one call, as
NumPy computes them. ``out=(o1, o2)`` writes each result into its DArray
(None leaves a result new). Registered as the ufunc's decomposition: dispatch
hands a two-output ufunc's call here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentTypeError, ShardingError, UnsupportedError
from dmesh.darray import DArray
from dmesh.ops.indexing.views import assign_result
from dmesh.ops.pipeline import align, prepare, wrap
from dmesh.ops.registry import Rule, decompose
from dmesh.ops.rules.elementwise import broadcast_shape, sharded_rows

__all__ = ["TWO_OUTPUTS", "real_if_close", "two_outputs"]

TWO_OUTPUTS = (np.divmod, np.frexp, np.modf)
_RULE = Rule("elementwise.two_outputs", sharded_rows, broadcast_shape)


def two_outputs(ufunc: np.ufunc, *inputs: Any, **kwargs: Any) -> tuple[DArray, ...]:
    """``ufunc(*inputs[, out=(o1, o2)])`` for a two-output ufunc: one pass over the blocks."""
    name = ufunc.__name__
    out = kwargs.pop("out", None)
    if kwargs:
        raise UnsupportedError(
            f"np.{name} on DArrays takes out= only; got {sorted(kwargs)} "
            "(compute without them, then convert the results)"
        )
    targets = _targets(name, out, ufunc.nout)
    if len(inputs) != ufunc.nin:
        raise ArgumentTypeError(f"np.{name} takes {ufunc.nin} operands, got {len(inputs)}")
    operands, mesh, step = prepare(_RULE, inputs, (), name)
    blocks = align(operands, step.decision)
    results = [wrap(r, step.decision, mesh) for r in ufunc(*blocks)]
    for i, target in enumerate(targets):
        if target is None:
            continue
        result = results[i]
        if result.shape != target.shape or result.mesh is not target.mesh:
            raise ShardingError(
                f"np.{name}(..., out=): result {i} {result.spec} does not fit out[{i}] "
                f"{target.spec}; out needs the same shape and mesh"
            )
        assign_result(target, result, "same_kind", f"np.{name}")
        results[i] = target
    return tuple(results)


def _targets(name: str, out: Any, nout: int) -> tuple[DArray | None, ...]:
    if out is None:
        return (None,) * nout
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != nout or not all(o is None or isinstance(o, DArray) for o in outs):
        raise ArgumentTypeError(
            f"np.{name}(..., out=): out must be a tuple of {nout} DArrays or None, got {out!r}"
        )
    return tuple(outs)


def _decomposition(ufunc: np.ufunc) -> Any:
    def call(*inputs: Any, **kwargs: Any) -> tuple[DArray, ...]:
        return two_outputs(ufunc, *inputs, **kwargs)

    call.__name__ = ufunc.__name__
    call.__doc__ = f"``np.{ufunc.__name__}`` of DArrays: both outputs from one call per block."
    return call


for _ufunc in TWO_OUTPUTS:
    decompose(_ufunc)(_decomposition(_ufunc))


@decompose(np.real_if_close)
def real_if_close(a: Any, tol: Any = 100) -> Any:
    """``np.real_if_close(a, tol)``: the real part when every imaginary part is below ``tol``.

    The test is one ``np.all`` every rank agrees on (collective); ``tol`` above
    1 counts machine epsilons of ``a``'s dtype, as in NumPy. A real ``a`` is
    returned as it is.
    """
    if a.dtype.kind != "c":
        return a
    if tol > 1:
        tol = np.finfo(a.dtype).eps * tol
    if bool(np.all(np.absolute(np.imag(a)) < tol)):
        return np.real(a)
    return a
