"""Hypothesis strategies for the rule checker: hostile calls of every registered op.

A case is ``(args, kwargs, darray)``: the NumPy call on global arrays, and for
each array operand after the rule's parse whether it is a DArray (a 0-d array
may be one: ``np.sqrt(np.max(a))`` takes a 0-d partial DArray) or a scalar.
Values are hostile: NaN, both infinities, both zeros, negatives, values
outside each ufunc's domain, integer extremes; dtypes include bool, narrow and
unsigned integers, float16 and complex; shapes have size-0 and size-1 dims.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import rule_cases_creation
import rule_cases_linalg
import rule_cases_selection
import rule_cases_sets
import rule_cases_shape
import rule_cases_signals
import rule_cases_statistics
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = ["CASES", "Case", "case_for"]

Case = tuple[tuple[Any, ...], dict[str, Any], tuple[bool, ...] | None]

# Type codes drawn from: bool, int8, uint8, int64, uint64, float16/32/64, complex64/128.
CODES = "?bBlLefdFD"
FLOAT_SPECIALS = [
    np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.5, -7.25,
    1e-30, -1e-30, 1e10, -1e10, 100.0, -100.0, 0.9999, 1.0001, -1.0001,
]  # fmt: skip


def values(dtype: np.dtype) -> st.SearchStrategy[Any]:
    """Hostile elements of ``dtype``."""
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        specials = [
            v
            for v in (info.min, info.max, 0, 1, -1, 2, -2, 7, info.min + 1)
            if info.min <= v <= info.max
        ]
        return st.sampled_from(specials) | st.integers(max(info.min, -50), min(info.max, 50))
    floats = st.sampled_from(FLOAT_SPECIALS) | st.floats(-10, 10, allow_subnormal=False)
    if dtype.kind == "c":
        return st.builds(complex, floats, floats)
    return floats


def array(dtype: Any, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """An array of hostile values (cast to ``dtype``: 1e10 is inf in float16)."""
    dtype = np.dtype(dtype)
    with np.errstate(all="ignore"):
        return hnp.arrays(dtype, shape, elements=values(dtype).map(lambda v: _cast(v, dtype)))


def _cast(value: Any, dtype: np.dtype) -> Any:
    with np.errstate(all="ignore"):
        return np.array(value).astype(dtype)[()]


def shapes(min_dims: int = 0, max_dims: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes with lengths 0 to 5 (size-0 and size-1 dims included)."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=5)


def dtypes(codes: str = CODES) -> st.SearchStrategy[np.dtype]:
    return st.sampled_from([np.dtype(c) for c in codes])


def _loops(ufunc: np.ufunc) -> list[str]:
    loops = []
    for loop in ufunc.types:
        inputs, output = loop.split("->")
        if set(inputs) <= set(CODES) and set(output) <= set(CODES) | {"q", "Q", "i"}:
            loops.append(inputs)
    return loops


@st.composite
def ufunc_case(draw: Any, ufunc: np.ufunc) -> Case:
    """``ufunc(*operands)`` with broadcasting, scalars and 0-d DArrays."""
    loop = draw(st.sampled_from(_loops(ufunc)))
    out = draw(shapes())
    operands: list[Any] = []
    darray: list[bool] = []
    for code in loop:
        kind = draw(st.sampled_from(["full", "broadcast", "0-d", "python"]))
        if kind == "python" and code in "?ldD":
            python = {"?": bool, "l": int, "d": float, "D": complex}[code]
            operands.append(python(draw(values(np.dtype(code)))))
            darray.append(False)
            continue
        if kind in ("0-d", "python"):
            operands.append(draw(array(code, ())))
            darray.append(draw(st.booleans()))
            continue
        ndim = draw(st.integers(0, len(out))) if kind == "broadcast" else len(out)
        shape = tuple(
            1 if kind == "broadcast" and draw(st.booleans()) else n for n in out[len(out) - ndim :]
        )
        operands.append(draw(array(code, shape)))
        darray.append(True)
    if not any(darray):
        darray[0] = True
        operands[0] = np.asarray(operands[0])
    return tuple(operands), {}, tuple(darray)


@st.composite
def reduction_case(draw: Any, func: Any, ufunc_method: bool = False) -> Case:
    ordered = (np.max, np.min, np.maximum, np.minimum)
    codes = CODES[:-2] if func in ordered else CODES  # complex: dmesh refuses Partial max/min
    dtype = draw(dtypes(codes))
    shape = draw(shapes(min_dims=1 if ufunc_method else 0))
    a = draw(array(dtype, shape))
    ndim = len(shape)
    kwargs: dict[str, Any] = {}
    axis_choices: list[Any] = [*range(-ndim, ndim)]
    if ndim and not ufunc_method:
        axis_choices += [
            None,
            tuple(sorted(set(draw(st.lists(st.integers(0, ndim - 1), max_size=ndim))))),
        ]
    if axis_choices:
        axis = draw(st.sampled_from(axis_choices))
        if axis is not None:
            kwargs["axis"] = axis
    if draw(st.booleans()):
        kwargs["keepdims"] = True
    if func in (np.sum, np.prod, np.mean, np.nansum, np.nanprod) and draw(st.booleans()):
        kwargs["dtype"] = draw(st.sampled_from([np.float64, np.int64, np.float32]))
    return (a,), kwargs, None


@st.composite
def elementwise_function_case(draw: Any, func: Any) -> Case:
    shape = draw(shapes())
    dtype = draw(dtypes("?blefdD" if func is not np.clip else "blfd"))
    a = draw(array(dtype, shape))
    if func is np.where:
        condition = draw(array(bool, shape[draw(st.integers(0, len(shape))) :]))
        y = (
            draw(st.sampled_from([0.0, np.nan]))
            if draw(st.booleans())
            else draw(array(dtype, shape))
        )
        return (condition, a, y), {}, None
    if func is np.clip:
        low = draw(values(np.dtype(dtype)))
        high = draw(array(dtype, shape)) if draw(st.booleans()) else draw(values(np.dtype(dtype)))
        open_side = draw(st.sampled_from(["neither", "low", "high"]))  # a None bound: open
        if open_side == "low":
            return (a, None, high), {}, None
        if open_side == "high":
            return (a, low, None), {}, None
        return (a, low, high), {}, None
    if func is np.isclose:
        b = draw(array(dtype, shape))
        return (a, b), {"equal_nan": draw(st.booleans())}, None
    if func in (np.real, np.imag, np.iscomplex, np.isreal, np.fix, np.isposinf, np.isneginf,
                np.sinc, np.i0):  # fmt: skip
        return (a,), {}, None
    if func in (np.round, np.around):
        return (a,), {"decimals": draw(st.sampled_from([0, 1, 3, -1]))}, None
    if func is np.angle:
        return (a,), {"deg": draw(st.booleans())}, None
    return (a,), {"nan": -1.5, "posinf": draw(st.sampled_from([None, 9.0]))}, None


@st.composite
def transpose_case(draw: Any, func: Any) -> Case:
    shape = draw(shapes(min_dims=1))
    a = draw(array(draw(dtypes()), shape))
    ndim = len(shape)
    if func is np.transpose:
        return (a, tuple(draw(st.permutations(range(ndim))))), {}, None
    first, second = draw(st.integers(-ndim, ndim - 1)), draw(st.integers(-ndim, ndim - 1))
    return (a, first, second), {}, None


@st.composite
def joining_case(draw: Any, func: Any) -> Case:
    shape = draw(shapes(min_dims=1))
    n = draw(st.integers(1, 3))
    ndim = len(shape)
    if func is np.broadcast_to:
        a = draw(array(draw(dtypes()), shape))
        lead = draw(shapes(max_dims=2))
        target = (*lead, *(draw(st.integers(0, 3)) if m == 1 else m for m in shape))
        return (a, target), {}, None
    axis = draw(st.integers(-ndim - (func is np.stack), ndim - 1))
    arrays = []
    for _ in range(n):
        own = list(shape)
        if func is np.concatenate:
            own[axis] = draw(st.integers(0, 4))
        arrays.append(draw(array(draw(dtypes()), tuple(own))))
    return (arrays, axis), {}, None


SUBSCRIPTS = [
    "ij,j->i", "ij,jk->ik", "ij,kj->ik", "i,i->", "i,j->ij", "ijk,ikl->ijl", "ij->ji", "ij->",
    "ij,ij->ij", "ij,ij->i", "ii->i", "ii", "iij->j", "ij,jj->i", "i,i,i->i",
]  # fmt: skip


@st.composite
def contraction_case(draw: Any, func: Any) -> Case:
    dtype = draw(dtypes("?lfdD"))
    sizes = {c: draw(st.integers(0, 4)) for c in "ijkl"}
    if func is np.einsum:
        subscripts = draw(st.sampled_from(SUBSCRIPTS))
        terms = subscripts.split("->")[0].split(",")
        arrays = [draw(array(dtype, tuple(sizes[c] for c in term))) for term in terms]
        return (subscripts, *arrays), {}, None
    i, j, k = sizes["i"], sizes["j"], sizes["k"]
    if func is np.tensordot:
        a = draw(array(dtype, (i, j, k)))
        b, axes = draw(st.sampled_from([
            ((k, i), 1), ((j, k, 2), 2), ((j, 3), ([1], [0])), ((2,), 0),
            ((k, j), ([-1, 1], [0, 1])),
        ]))  # fmt: skip
        return (a, draw(array(dtype, b)), axes), {}, None
    if func is np.vdot:
        first = draw(st.sampled_from([(j,), (i, j), (j, i)]))
        second = draw(
            st.sampled_from([s for s in [(j,), (i, j), (j, i)] if np.prod(s) == np.prod(first)])
        )
        return (draw(array(dtype, first)), draw(array(dtype, second))), {}, None
    if func in (np.outer,):
        return (
            (draw(array(dtype, draw(shapes(1, 2)))), draw(array(dtype, draw(shapes(1, 2))))),
            {},
            None,
        )
    pairs = {
        np.matmul: [
            ((i, j), (j, k)),
            ((i, j), (j,)),
            ((j,), (j, k)),
            ((j,), (j,)),
            ((2, i, j), (2, j, k)),
        ],
        np.dot: [((i, j), (j, k)), ((i, j), (j,)), ((j,), (j,)), ((j,), (j, k))],
        np.inner: [((i, j), (k, j)), ((j,), (j,)), ((i, j), (j,))],
    }[func]
    first, second = draw(st.sampled_from(pairs))
    return (draw(array(dtype, first)), draw(array(dtype, second))), {}, None


_AREAS = (rule_cases_creation, rule_cases_linalg, rule_cases_selection, rule_cases_sets,
          rule_cases_shape, rule_cases_signals, rule_cases_statistics)  # fmt: skip


def _by_name(name: str, key: Any) -> Callable[[], st.SearchStrategy[Case]] | None:
    family, _, _ = name.partition(".")
    func = key[0] if isinstance(key, tuple) else key
    if family == "elementwise":
        if isinstance(func, np.ufunc):
            return lambda: ufunc_case(func)
        return lambda: elementwise_function_case(func)
    if family == "reduction":
        if isinstance(key, tuple):
            return lambda: reduction_case(key[0], ufunc_method=True)
        return lambda: reduction_case(func)
    if family == "shape":
        return lambda: transpose_case(func)
    if family == "joining":
        return lambda: joining_case(func)
    if family == "contraction":
        return lambda: contraction_case(func)
    for area in _AREAS:  # issue 14's rules, one module of cases per area
        make = area.by_name(name, key)
        if make is not None:
            return make
    return None


def case_for(name: str, key: Any) -> st.SearchStrategy[Case] | None:
    """The strategy of calls for the rule ``name`` registered under ``key`` (None: no cases)."""
    make = _by_name(name, key)
    return None if make is None else make()


CASES = case_for
