"""The one data-dependent error of an elementwise ufunc, agreed by every rank.

NumPy raises ``ValueError: Integers to negative integer powers are not
allowed.`` from inside ``np.power``'s integer loop, for the elements it
computes. Run block by block, only the ranks whose blocks pair a negative
exponent with a base would raise, while the others went on to their next
collective and waited there forever. :func:`check_integer_power` decides the
question for the whole array before any block is computed: the error is raised
on every rank when the global result has elements (an empty result computes
nothing, so NumPy does not raise) and some exponent that takes part is
negative. One small reduction, paid only by integer-to-integer powers with
signed exponents in a DArray; Python and 0-d exponents are known to every rank
and cost nothing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["check_integer_power"]

MESSAGE = "Integers to negative integer powers are not allowed."


def _integer_kind(value: Any) -> str | None:
    """``"b"``/``"i"``/``"u"`` for a boolean or integer operand, else None."""
    if isinstance(value, (bool, np.bool_)):
        return "b"
    if isinstance(value, int):
        return "i"
    dtype = getattr(value, "dtype", None)
    if dtype is not None and dtype.kind in "biu":
        return str(dtype.kind)
    return None


def check_integer_power(method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise NumPy's error on every rank if ``np.power.<method>(*inputs)`` would meet one.

    Collective when the exponent is a DArray of a signed integer dtype and the
    base is an integer; a no-op otherwise (floats, unsigned exponents, other
    methods than ``__call__`` and ``outer``).
    """
    if method not in ("__call__", "outer") or len(inputs) != 2:
        return
    base, exponent = inputs
    if _integer_kind(base) is None or _integer_kind(exponent) != "i":
        return
    if kwargs.get("dtype") is not None and np.dtype(kwargs["dtype"]).kind not in "biu":
        return  # a float loop was asked for: no error
    if method == "outer":
        shape: tuple[int, ...] = (*np.shape(base), *np.shape(exponent))
    else:
        shape = tuple(np.broadcast_shapes(np.shape(base), np.shape(exponent)))
    if math.prod(shape) == 0:
        return  # nothing is computed, nothing raises (as in NumPy)
    negative = np.less(exponent, 0)
    where = kwargs.get("where", True)
    if method == "__call__" and where is not True:
        negative = np.logical_and(negative, where)  # masked-out elements are not computed
    # bool() of a DArray is collective: every rank gets the same answer.
    if bool(np.any(negative)):
        raise ValueError(MESSAGE)
