"""Elementwise functions of the Array API standard (2024.12) on DArrays.

Each maps to the NumPy ufunc of the same meaning, called on DArrays: NumPy
dispatches it to dmesh's distributed rule (collective on every rank). Type
promotion is NumPy 2's, which has no value-based casting: a Python scalar
operand takes the array's dtype (of its kind), as the standard asks. Floating
point warnings are silenced: a block holding a zero divisor would otherwise
warn on its rank only. Where the standard differs from NumPy, the function
says how in its docstring (``clip``, ``round``, ``pow`` of integers).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentTypeError
from dmesh.darray import DArray

__all__ = [
    "abs",
    "acos",
    "acosh",
    "add",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "ceil",
    "clip",
    "conj",
    "copysign",
    "cos",
    "cosh",
    "divide",
    "equal",
    "exp",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "hypot",
    "imag",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "log",
    "log1p",
    "log2",
    "log10",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "nextafter",
    "not_equal",
    "positive",
    "pow",
    "real",
    "reciprocal",
    "remainder",
    "round",
    "sign",
    "signbit",
    "sin",
    "sinh",
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "trunc",
]  # fmt: skip

Scalar = bool | int | float | complex
_SCALARS = (bool, int, float, complex)


def _require_array(name: str, x: object, what: str = "x") -> DArray:
    """``x`` if it is a DArray, else a TypeError naming ``name`` (raised alike on every rank)."""
    if not isinstance(x, DArray):
        raise ArgumentTypeError(
            f"{name}: {what} must be a DArray, got {type(x).__name__}; "
            "make it one with xp.asarray(...)"
        )
    return x


def _is_scalar(x: object) -> bool:
    """Whether ``x`` is a Python scalar (NumPy's scalars are 0-d arrays, not these)."""
    return type(x) in _SCALARS


def _require_operands(name: str, x1: object, x2: object) -> None:
    """Check a binary function's operands: DArrays or Python scalars, at least one DArray."""
    for what, x in (("x1", x1), ("x2", x2)):
        if not isinstance(x, DArray) and not _is_scalar(x):
            raise ArgumentTypeError(
                f"{name}: {what} must be a DArray or a Python scalar, got {type(x).__name__}; "
                "make it a DArray with xp.asarray(...)"
            )
    if not isinstance(x1, DArray) and not isinstance(x2, DArray):
        raise ArgumentTypeError(
            f"{name}: at least one of x1, x2 must be a DArray, got two Python scalars; "
            "make one a DArray with xp.asarray(...)"
        )


def _call(func: Callable[..., Any], *args: Any) -> DArray:
    """``func(*args)`` with floating point warnings off (they would differ between ranks)."""
    with np.errstate(all="ignore"):
        result: DArray = func(*args)
    return result


def _unary(name: str, func: Callable[..., Any], doc: str) -> Callable[[DArray], DArray]:
    """The standard's one-array function ``name``: ``func(x)`` on a DArray."""

    def function(x: DArray, /) -> DArray:
        return _call(func, _require_array(name, x))

    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    function.__module__ = __name__
    return function


def _binary(
    name: str, func: Callable[..., Any], doc: str
) -> Callable[[DArray | Scalar, DArray | Scalar], DArray]:
    """The standard's two-array function ``name``: ``func(x1, x2)``, one may be a Python scalar."""

    def function(x1: DArray | Scalar, x2: DArray | Scalar, /) -> DArray:
        _require_operands(name, x1, x2)
        return _call(func, x1, x2)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    function.__module__ = __name__
    return function


def _u(name: str, func: Callable[..., Any], note: str = "") -> Callable[[DArray], DArray]:
    """A one-array function mapped to ``np.<func>`` with a generated docstring."""
    label = getattr(func, "__name__", name)
    return _unary(name, func, f"``np.{label}(x)`` elementwise{note}.")


def _b(
    name: str, func: Callable[..., Any], note: str = ""
) -> Callable[[DArray | Scalar, DArray | Scalar], DArray]:
    """A two-array function mapped to ``np.<func>`` with a generated docstring."""
    label = getattr(func, "__name__", name)
    return _binary(
        name,
        func,
        f"``np.{label}(x1, x2)`` elementwise, broadcasting; one operand may be a "
        f"Python scalar{note}.",
    )


abs = _u("abs", np.absolute)
acos = _u("acos", np.arccos)
acosh = _u("acosh", np.arccosh)
asin = _u("asin", np.arcsin)
asinh = _u("asinh", np.arcsinh)
atan = _u("atan", np.arctan)
atanh = _u("atanh", np.arctanh)
bitwise_invert = _u("bitwise_invert", np.invert)
ceil = _u("ceil", np.ceil, " (integers keep their dtype)")
conj = _u("conj", np.conjugate, " (real input returned unchanged in value and dtype)")
cos = _u("cos", np.cos)
cosh = _u("cosh", np.cosh)
exp = _u("exp", np.exp)
expm1 = _u("expm1", np.expm1)
floor = _u("floor", np.floor, " (integers keep their dtype)")
isfinite = _u("isfinite", np.isfinite)
isinf = _u("isinf", np.isinf)
isnan = _u("isnan", np.isnan)
log = _u("log", np.log)
log10 = _u("log10", np.log10)
log1p = _u("log1p", np.log1p)
log2 = _u("log2", np.log2)
logical_not = _u("logical_not", np.logical_not)
negative = _u("negative", np.negative)
positive = _u("positive", np.positive)
reciprocal = _u("reciprocal", np.reciprocal)
signbit = _u("signbit", np.signbit)
sin = _u("sin", np.sin)
sinh = _u("sinh", np.sinh)
sqrt = _u("sqrt", np.sqrt)
square = _u("square", np.square)
tan = _u("tan", np.tan)
tanh = _u("tanh", np.tanh)
trunc = _u("trunc", np.trunc, " (integers keep their dtype)")

add = _b("add", np.add)
atan2 = _b("atan2", np.arctan2)
bitwise_and = _b("bitwise_and", np.bitwise_and)
bitwise_left_shift = _b("bitwise_left_shift", np.left_shift)
bitwise_or = _b("bitwise_or", np.bitwise_or)
bitwise_right_shift = _b("bitwise_right_shift", np.right_shift)
bitwise_xor = _b("bitwise_xor", np.bitwise_xor)
copysign = _b("copysign", np.copysign)
divide = _b("divide", np.true_divide)
equal = _b("equal", np.equal)
floor_divide = _b("floor_divide", np.floor_divide)
greater = _b("greater", np.greater)
greater_equal = _b("greater_equal", np.greater_equal)
hypot = _b("hypot", np.hypot)
less = _b("less", np.less)
less_equal = _b("less_equal", np.less_equal)
logaddexp = _b("logaddexp", np.logaddexp)
logical_and = _b("logical_and", np.logical_and)
logical_or = _b("logical_or", np.logical_or)
logical_xor = _b("logical_xor", np.logical_xor)
maximum = _b("maximum", np.maximum)
minimum = _b("minimum", np.minimum)
multiply = _b("multiply", np.multiply)
nextafter = _b("nextafter", np.nextafter)
not_equal = _b("not_equal", np.not_equal)
remainder = _b("remainder", np.remainder)
subtract = _b("subtract", np.subtract)


def real(x: DArray, /) -> DArray:
    """``np.real(x)``: the real part (real input: its values, in its dtype)."""
    return _call(np.real, _require_array("real", x))


def imag(x: DArray, /) -> DArray:
    """``np.imag(x)``: the imaginary part (real input: zeros of its dtype)."""
    return _call(np.imag, _require_array("imag", x))


def sign(x: DArray, /) -> DArray:
    """``np.sign(x)``; complex: ``x / |x|`` as the standard has it (NaN for infinities), 0 at 0."""
    _require_array("sign", x)
    if x.dtype.kind != "c":
        return _call(np.sign, x)
    safe = _call(np.where, _call(np.not_equal, x, 0), x, 1)  # a zero divided by 1 keeps its sign
    return _call(np.divide, x, _call(np.absolute, safe))


def round(x: DArray, /) -> DArray:
    """``np.round(x)``: the nearest integer, halves to even (no ``decimals``; ints unchanged)."""
    return _call(np.round, _require_array("round", x))


def clip(
    x: DArray,
    /,
    min: DArray | int | float | None = None,
    max: DArray | int | float | None = None,
) -> DArray:
    """``np.clip(x, min, max)`` in x's dtype: bounds are DArrays, Python ints/floats or None.

    Unlike NumPy the result keeps x's dtype whatever the bounds' (NumPy
    promotes); a bound left as None is not applied, both None copy x.
    """
    _require_array("clip", x)
    for what, bound in (("min", min), ("max", max)):
        if bound is not None and not isinstance(bound, DArray) and type(bound) not in (int, float):
            raise ArgumentTypeError(
                f"clip: {what} must be a DArray, a Python int or float, or None, "
                f"got {type(bound).__name__}; make it a DArray with xp.asarray(...)"
            )
    if x.dtype.kind in "iu":  # Python int bounds beyond x's range: none, or x's extreme
        info = np.iinfo(x.dtype)
        if type(min) is int:
            min = None if min <= info.min else builtins.min(min, int(info.max))
        if type(max) is int:
            max = None if max >= info.max else builtins.max(max, int(info.min))
    if min is None and max is None:
        result: DArray = x.copy()
        return result
    clipped = _call(np.clip, x, min, max)
    if clipped.dtype != x.dtype:
        converted: DArray = clipped.astype(x.dtype)
        return converted
    return clipped


def pow(x1: DArray | Scalar, x2: DArray | Scalar, /) -> DArray:
    """``np.power(x1, x2)``; one operand may be a Python scalar.

    Integers to negative integer powers, an error in NumPy (raised only on the
    ranks whose blocks hold one), give the truncated exact value instead:
    1 for a base of 1, +-1 for -1, and 0 otherwise (0 for a base of 0 too).
    """
    _require_operands("pow", x1, x2)
    kind = np.result_type(*(x.dtype if isinstance(x, DArray) else x for x in (x1, x2))).kind
    signed = (isinstance(x2, DArray) and x2.dtype.kind == "i") or (type(x2) is int and x2 < 0)
    if kind == "f":
        return _real_pow(x1, x2)
    if kind not in "iu" or not signed:
        return _call(np.power, x1, x2)
    if not isinstance(x2, DArray):  # a negative Python int: x1 is a DArray
        assert isinstance(x1, DArray)
        assert isinstance(x2, int)
        unit = _call(np.equal, _call(np.absolute, x1), 1)
        return _call(np.where, unit, _call(np.power, x1, x2 & 1), 0)
    negative = _call(np.less, x2, 0)
    exponent = _call(np.where, negative, _call(np.bitwise_and, x2, 1), x2)
    powered = _call(np.power, x1, exponent)  # for a negative exponent, x1 ** parity
    if not isinstance(x1, DArray):
        return powered if x1 in (1, -1) else _call(np.where, negative, 0, powered)
    unit = _call(np.equal, _call(np.absolute, x1), 1)
    zero = _call(np.logical_and, negative, _call(np.logical_not, unit))
    return _call(np.where, zero, 0, powered)


def _real_pow(x1: DArray | Scalar, x2: DArray | Scalar) -> DArray:
    """``np.power`` of reals, with -0 and -inf to the power 0.5 giving +0 and +inf.

    NumPy takes ``sqrt`` for an exponent of 0.5 where the exponent is a
    scalar or broadcast (so in some blocks only), and sqrt(-0) is -0,
    sqrt(-inf) NaN; the standard asks +0 and +inf, as C's pow gives.
    """
    result = _call(np.power, x1, x2)
    if not isinstance(x2, DArray) and x2 != 0.5:
        return result
    at: DArray | bool
    if isinstance(x1, DArray):
        at = _call(np.logical_or, _call(np.equal, x1, 0), _call(np.equal, x1, -np.inf))
    elif x1 == 0 or x1 == -np.inf:
        at = True
    else:
        return result
    if isinstance(x2, DArray):
        at = _call(np.logical_and, at, _call(np.equal, x2, 0.5))
    magnitude = _call(np.absolute, x1) if isinstance(x1, DArray) else builtins.abs(x1)
    return _call(np.where, at, magnitude, result)  # a Python float stays weak
