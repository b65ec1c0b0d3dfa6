"""Elementwise ufuncs: one rule for the whole family, with broadcasting.

Rows for one mesh dimension, over an output of ``D`` dims:

* everything replicated;
* ``S(d)`` on the output for each dim ``d``: an operand that has dim ``d`` of
  the same length is ``S`` of its own matching dim; one that broadcasts along
  it (length 1, or fewer dims) is replicated;
* partial values, where the math allows: a linear function of all its
  operands keeps ``Partial("sum")`` (``add``, ``subtract``: the sum of the
  terms' sums is the sum of the sums); ``multiply``/``divide`` are linear in
  one operand, so one partial operand times replicated ones stays partial;
  non-decreasing unary functions keep ``Partial("max")`` and ``Partial("min")``
  (``f(max(x)) = max(f(x))``); ``negative`` keeps ``sum`` and swaps ``max``
  and ``min`` (not expressed: it goes through replication).

Scalar operands (``a + 1``) are replicated; a partial row needs every
operand to be a DArray for ``add``/``subtract`` (adding 1 on every rank would
add it ``k`` times).
"""

from __future__ import annotations

import numpy as np

from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.ops.registry import Call, Row, register

R = Replicate()

LINEAR_IN_ALL = {np.add, np.subtract, np.negative, np.positive, np.conjugate}
LINEAR_IN_FIRST = {np.divide, np.true_divide}
LINEAR_IN_EACH = {np.multiply}
NON_DECREASING = {
    np.positive, np.exp, np.exp2, np.expm1, np.log, np.log2, np.log10, np.log1p, np.sqrt,
    np.cbrt, np.floor, np.ceil, np.trunc, np.rint, np.arctan, np.arcsinh, np.tanh, np.sinh,
    np.deg2rad, np.rad2deg, np.radians, np.degrees,
}  # fmt: skip


def _numeric(ufunc: np.ufunc) -> bool:
    """Whether a ufunc takes bool/int/float/complex data (not only datetimes, as isnat)."""
    return any(all(c in "?bBhHiIlLqQefdgFDG" for c in t.split("->")[0]) for t in ufunc.types)


# Every single-output elementwise ufunc NumPy exports, once each (np.abs is
# np.absolute); generalized ufuncs such as matmul have rules of their own.
UFUNCS = list(
    {
        getattr(np, name): None
        for name in dir(np)
        if isinstance(getattr(np, name), np.ufunc)
        and getattr(np, name).nout == 1
        and getattr(np, name).signature is None
        and _numeric(getattr(np, name))
    }
)


def broadcast_shape(call: Call) -> tuple[int, ...]:
    """The output shape: the operands' shapes broadcast (scalars do not change it)."""
    return tuple(np.broadcast_shapes(*call.shapes))


def sharded_rows(call: Call) -> list[Row]:
    """Everything replicated, and ``S(d)`` of the output for each dim ``d`` (no partials)."""
    out = broadcast_shape(call)
    result: list[Row] = [(R,) * (len(call.shapes) + 1)]
    for d in range(len(out)):
        row: list[Placement] = [Shard(d)]
        for shape in call.shapes:
            own = d - (len(out) - len(shape))
            row.append(Shard(own) if own >= 0 and shape[own] == out[d] else R)
        result.append(tuple(row))
    return result


def elementwise_rows(func: np.ufunc) -> object:
    """The rows function of an elementwise ufunc (sums and differences keep partials)."""

    def rows(call: Call) -> list[Row]:
        result = sharded_rows(call)
        n = len(call.shapes)
        p = Partial("sum")
        if func in LINEAR_IN_ALL and all(call.darray):
            result.append((p,) * (n + 1))
        linear_in = (
            range(n) if func in LINEAR_IN_EACH else range(1) if func in LINEAR_IN_FIRST else ()
        )
        for i in linear_in:
            if call.darray[i]:
                result.append((p, *(p if j == i else R for j in range(n))))
        if n == 1 and func in NON_DECREASING:
            result += [(Partial("max"), Partial("max")), (Partial("min"), Partial("min"))]
        return result

    return rows


for _ufunc in UFUNCS:
    register(_ufunc, name=f"elementwise.{_ufunc.__name__}", out_shape=broadcast_shape)(
        elementwise_rows(_ufunc)  # type: ignore[arg-type]
    )
