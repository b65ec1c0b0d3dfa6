"""The one key scheme of dmesh's call caches: how a call's operands, arguments and keywords
enter the key under which its decision is remembered.

dmesh remembers what it decided for a call (``dmesh.ops.pipeline.steps``: the
rule's layout decision and the fused closure that runs it) under a key made of
the callable and of what that decision depends on, and nothing else:

* an **operand** (:func:`operand_key`) by what fixes the result's layout and
  dtype: a DArray by its spec (mesh, layout, dtype); a Python or NumPy scalar by
  its type (``dmesh.core.scalars.KEY_SCALARS``: from NumPy 2 on its value plays
  no part in the result dtype, NEP 50); a numeric 0-d ndarray by its dtype (it
  broadcasts against every shape). Anything else (a list, an n-d ndarray, a
  stand-in of ``dmesh.compile``, a DArray subclass) has no key: such calls are
  planned afresh;
* a **keyword** or a positional **argument that is no operand** (``axis=0``,
  ``keepdims=True``, ``np.sum(a, 0)``, ``"ij,jk"``) by its value and its type
  (:func:`value_key`: ``None``, bools, ints, strings, tuples of ints; the type
  keeps ``axis=True`` and ``axis=1`` apart).

Every door builds its key here: the operators and ufuncs (:func:`call_key`,
:func:`binary_key`), ``__array_function__`` calls with positional arguments
(:func:`argument_key`), calls whose rule parsed the arguments
(:func:`parsed_key`), ``out=`` calls (:func:`out_key`) and basic indexing,
``a[key]`` and ``a[key] = v`` (:func:`index_key`, kept with the array's spec). The hottest paths
(``a * b`` in ``dmesh._elision``, ``np.add(a, b)`` and ``np.sqrt(a)`` in
``dmesh.ops.dispatch.call_ufunc``) write :func:`operand_key` out inline for a
DArray and fall back on it for everything else; ``tests/test_call_keys.py``
checks that each door finds the steps stored under these keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dmesh.core.scalars import KEY_SCALARS, KIND_TYPED

__all__ = [
    "PARSED", "argument_key", "binary_key", "call_key", "index_key", "keyword_key",
    "operand_key", "out_key", "parsed_key", "value_key",
]  # fmt: skip

# The DArray class itself, set by dmesh.darray (this module sits below it). Its
# subclasses (dmesh.compile's stand-ins) have no key: their calls record or break.
darray_type: Any = None

# Marks the keys of parsed operands (no callable is a str).
PARSED = "parsed"

_VALUES = (bool, int, str)
_SLICE = "slice"  # tags a slice's fields in an index key (no plain item is a str)
_INT_TYPES = (int, np.integer)


def operand_key(x: Any) -> Any:
    """``x``'s part of a call's key as an operand, or None where it has none."""
    kind = type(x)
    if kind is darray_type:
        return x._spec
    if kind in KEY_SCALARS:  # (its type is its dtype: dmesh.core.scalars)
        return kind
    if kind is np.ndarray and KIND_TYPED and x.ndim == 0 and x.dtype.kind in "biufc":
        return (np.ndarray, x.dtype)
    return None


def value_key(x: Any) -> tuple[Any, type] | None:
    """``x``'s part of a key as an argument taken by value (an axis, a flag, a subscript
    string), with its type; None for any other kind (a float, an array, a list)."""
    kind = type(x)
    if x is None or kind in _VALUES or (kind is tuple and all(type(v) is int for v in x)):
        return (x, kind)
    return None


def keyword_key(name: str, value: Any) -> tuple[str, Any, type] | None:
    """The part of a key of keyword ``name=value`` (by value), or None."""
    entry = value_key(value)
    return None if entry is None else (name, *entry)


def call_key(func: Any, operands: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The key of ``func(*operands, **kwargs)``: every positional argument an operand, every
    keyword by value; None when one has no key."""
    key: list[Any] = [func]
    for x in operands:
        part = operand_key(x)
        if part is None:
            return None
        key.append(part)
    for name, value in kwargs.items():
        entry = keyword_key(name, value)
        if entry is None:
            return None
        key.append(entry)
    return tuple(key)


def binary_key(ufunc: np.ufunc, x: Any, y: Any) -> tuple[Any, Any, Any]:
    """``call_key(ufunc, (x, y), {})`` as the operators look it up: always a tuple (an
    operand without a key enters as None, under which nothing is ever stored)."""
    return (ufunc, operand_key(x), operand_key(y))


def argument_key(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...] | None:
    """The key of ``func(*args, **kwargs)`` whose DArrays are operands and whose other
    positional arguments are taken by value (``np.sum(a, 0)``,
    ``np.einsum("i,i->", a, b)``); None when one has no key."""
    keywords: list[Any] = []
    for name, value in kwargs.items():  # first: out= (a DArray) fails here at once
        entry = keyword_key(name, value)
        if entry is None:
            return None
        keywords.append(entry)
    key: list[Any] = [func]
    for x in args:
        part = x._spec if type(x) is darray_type else value_key(x)
        if part is None:
            return None
        key.append(part)
    return (*key, *keywords)


def parsed_key(func: Any, parsed: Sequence[Any], static: Any) -> tuple[Any, ...] | None:
    """The key of a call as its rule parsed it: the parsed operands and the static
    arguments (``np.concatenate``'s list, ``np.stack``'s axis); None when an operand has
    no key, none is a DArray, or ``static`` is unhashable."""
    key: list[Any] = [func, PARSED, static]
    darray = False
    for x in parsed:
        part = operand_key(x)
        if part is None:
            return None
        darray = darray or type(x) is darray_type
        key.append(part)
    if not darray:
        return None
    try:
        hash(static)
    except TypeError:
        return None
    return tuple(key)


def out_key(ufunc: np.ufunc, target: Any, inputs: Sequence[Any]) -> tuple[Any, ...]:
    """The key of ``ufunc(*inputs, out=target)`` with a DArray ``target`` (an operand
    without a key enters as None, under which nothing is stored)."""
    darray = darray_type
    if len(inputs) == 2:  # (the hot np.add(a, b, out=o): DArrays inline, no list)
        x, y = inputs
        return (
            ufunc,
            target._spec,
            x._spec if type(x) is darray else operand_key(x),
            y._spec if type(y) is darray else operand_key(y),
        )
    return (ufunc, target._spec, *[operand_key(x) for x in inputs])


def _plain_int(v: Any) -> bool:
    return isinstance(v, _INT_TYPES) and not isinstance(v, (bool, np.bool_))


def _plain_item(item: Any) -> Any:
    """The hashable form of a key item :func:`index_key` does not take inline (NumPy
    integers, slices of them, ``None``, ``...``), or NotImplemented."""
    if type(item) is slice:
        fields = (item.start, item.stop, item.step)
        if all(v is None or _plain_int(v) for v in fields):
            return (_SLICE, *(None if v is None else int(v) for v in fields))
        return NotImplemented
    if item is None or item is Ellipsis:
        return item
    if _plain_int(item):
        return int(item)
    return NotImplemented


def index_key(key: Any) -> Any:
    """The hashable form of a plain basic key (``a[key]``, ``a[key] = v``: Python or NumPy
    integers, not bools, slices of them, ``None``, ``...``, alone or in a tuple), under
    which ``dmesh.ops.indexing.plans`` keeps its plans with the array's spec; None for
    any other key (arrays, masks, lists), which is planned afresh."""
    out = []
    for item in key if type(key) is tuple else (key,):
        # Python ints and slices of them inline: this runs on every cached a[key].
        kind = type(item)
        if kind is int:
            out.append(item)
            continue
        if kind is slice:
            start, stop, step = item.start, item.stop, item.step
            if (
                (start is None or type(start) is int)
                and (stop is None or type(stop) is int)
                and (step is None or type(step) is int)
            ):
                out.append((_SLICE, start, stop, step))
                continue
        plain = _plain_item(item)
        if plain is NotImplemented:
            return None
        out.append(plain)
    return tuple(out)
