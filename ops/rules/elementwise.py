"""Elementwise ufuncs: one rule for the whole family, with broadcasting.

Rows for one mesh dimension, over an output of ``D`` dims:

* everything replicated;
* ``S(d)`` on the output for each dim ``d``: an operand that has dim ``d`` of
  the same length is ``S`` of its own matching dim; one that broadcasts along
  it (length 1, or fewer dims) is replicated;
* partial values, where the math allows for every input, NaN, infinities
  and the identity an empty block holds included: a linear function of all
  its operands keeps ``Partial("sum")`` (``add``, ``subtract``: the sum of
  the terms' sums is the sum of the sums; not across a change of integer
  width, where the terms would no longer wrap around alike, see
  :func:`~dmesh.ops.registry.partial_survives`); ``multiply`` keeps it for
  one partial integer operand times replicated ones of its dtype or Python
  ints (for floats a zero term times ``inf`` is NaN where the whole value
  times ``inf`` is not, so floats are reduced first; ``divide`` likewise);
  a unary function keeps ``Partial("max")``/``Partial("min")`` if it is
  non-decreasing over every input, ``-inf``, ``inf`` and NaN included
  (``f(max(x)) = max(f(x))``), and ``Partial("min")`` alone if it is
  non-decreasing where defined and NaN below (``sqrt``, ``log``: a partial
  max holds terms below the maximum, the identity ``-inf`` of an empty block
  among them, whose NaN would win). ``negative`` keeps ``sum`` and swaps
  ``max`` and ``min`` (not expressed: it goes through replication).

Scalar operands (``a + 1``) are replicated; a partial row needs every
operand to be a DArray for ``add``/``subtract`` (adding 1 on every rank would
add it ``k`` times).
"""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np

from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.ops.registry import Call, Row, partial_survives, register

R = Replicate()

LINEAR_IN_ALL = {np.add, np.subtract, np.negative, np.positive, np.conjugate}
LINEAR_IN_EACH_INTEGER = {np.multiply}
# Non-decreasing on the extended reals, NaN to NaN: keep a partial max or min.
NON_DECREASING = {
    np.positive, np.exp, np.exp2, np.expm1, np.cbrt, np.floor, np.ceil, np.trunc, np.rint,
    np.arctan, np.arcsinh, np.tanh, np.sinh, np.deg2rad, np.rad2deg, np.radians, np.degrees,
}  # fmt: skip
# Non-decreasing on their domain [c, inf], NaN below it: keep a partial min only.
NON_DECREASING_ON_DOMAIN = {np.log, np.log2, np.log10, np.log1p, np.sqrt}


def _numeric(ufunc: np.ufunc) -> bool:
    """Whether a ufunc takes bool/int/float/complex data (not only datetimes, as isnat)."""
    return any(all(c in "?bBhHiIlLqQefdgFDG" for c in t.split("->")[0]) for t in ufunc.types)


def _single_output_elementwise(value: object) -> TypeGuard[np.ufunc]:
    """Whether ``value`` is a ufunc with one output and no core dimensions."""
    return isinstance(value, np.ufunc) and value.nout == 1 and value.signature is None


def _exported_ufuncs() -> list[np.ufunc]:
    """Every single-output elementwise ufunc NumPy exports, once each (np.abs is
    np.absolute), in ``dir(np)`` order; generalized ufuncs such as matmul have rules of
    their own."""
    # dir(np) also names the submodules NumPy loads lazily (f2py, testing, ma, polynomial,
    # ...): getattr would import them, some 65 ms of `import dmesh`. None is a ufunc, and
    # every ufunc is already in the module's __dict__, so look names up there.
    loaded = vars(np)
    found: dict[np.ufunc, None] = {}
    for name in dir(np):
        value = loaded.get(name)
        if _single_output_elementwise(value) and _numeric(value):
            found[value] = None
    return list(found)


UFUNCS = _exported_ufuncs()


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
    """The rows function of an elementwise ufunc (see the module docstring for partial rows)."""

    def rows(call: Call) -> list[Row]:
        result = sharded_rows(call)
        n = len(call.shapes)
        if func is None or not call.dtypes or func not in PARTIAL_FUNCS:
            return result
        p = Partial("sum")
        out = _result_dtype(func, call.dtypes)
        if (
            func in LINEAR_IN_ALL
            and all(call.darray)
            and all(partial_survives("sum", d, out) for d in call.dtypes)
        ):
            result.append((p,) * (n + 1))
        if func in LINEAR_IN_EACH_INTEGER and out is not None and out.kind in "iu":
            for i in range(n):
                if call.darray[i] and all(d == out or d is int for d in call.dtypes):
                    result.append((p, *(p if j == i else R for j in range(n))))
        if n == 1 and func in NON_DECREASING:
            result += [(Partial("max"), Partial("max")), (Partial("min"), Partial("min"))]
        if n == 1 and func in NON_DECREASING_ON_DOMAIN:
            result.append((Partial("min"), Partial("min")))
        return result

    return rows


PARTIAL_FUNCS = LINEAR_IN_ALL | LINEAR_IN_EACH_INTEGER | NON_DECREASING | NON_DECREASING_ON_DOMAIN


def _result_dtype(func: np.ufunc, dtypes: tuple[Any, ...]) -> np.dtype | None:
    """The dtype of ``func`` on ``dtypes`` (Python types as weak scalars); None if no loop."""
    try:
        return func.resolve_dtypes((*dtypes, None))[-1]
    except (TypeError, ValueError):
        return None


for _ufunc in UFUNCS:
    register(_ufunc, name=f"elementwise.{_ufunc.__name__}", out_shape=broadcast_shape)(
        elementwise_rows(_ufunc)  # type: ignore[arg-type]
    )
