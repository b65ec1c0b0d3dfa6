"""The signature of a compiled call: DArray specs and constants, and the DArrays in the arguments.

Two calls with equal signatures trace the same plan: every DArray argument
enters by its spec (mesh identity, layout with block bounds, dtype), every
other argument by value (NumPy arrays by shape, dtype and bytes). DArrays
inside tuples, lists and dicts count as arguments too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh.darray import DArray

__all__ = ["Unkeyable", "key_of", "rebuild", "signature"]


class Unkeyable(Exception):  # noqa: N818 - internal signal
    """An argument that is neither a DArray, a container of them, nor a hashable constant."""


def signature(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], list[DArray]]:
    """The cache key of ``(args, kwargs)`` and the DArrays found in them, in order.

    Raises :class:`Unkeyable` for an argument that cannot key a cache.
    """
    leaves: list[DArray] = []

    def leaf(x: DArray) -> Any:
        leaves.append(x)
        return ("D", x.spec)

    key = (key_of(args, leaf), key_of(kwargs, leaf))
    return key, leaves


def key_of(obj: Any, leaf: Callable[[DArray], Any]) -> Any:
    """A hashable key of ``obj``: each DArray ``x`` keyed as ``leaf(x)``, containers by
    their items, NumPy arrays by shape, dtype and bytes, other values by type and value
    (floats by their bits: ``0.0 == -0.0`` and ``nan != nan``, yet results differ)."""
    if isinstance(obj, DArray):
        return leaf(obj)
    kind = type(obj)
    if kind is tuple or kind is list:
        return (kind, tuple(key_of(x, leaf) for x in obj))
    if kind is dict:
        return (dict, tuple((k, key_of(v, leaf)) for k, v in obj.items()))
    if kind is slice:  # unhashable before Python 3.12
        return (slice, key_of((obj.start, obj.stop, obj.step), leaf))
    if kind is float:  # equal floats have equal bits, but for the sign of zero
        return (float, obj, math.copysign(1.0, obj))
    if kind is complex:
        return (complex, obj, math.copysign(1.0, obj.real), math.copysign(1.0, obj.imag))
    if isinstance(obj, (np.ndarray, np.generic)):
        if obj.dtype.hasobject:
            raise Unkeyable(f"an object array of shape {obj.shape}")
        return ("A", kind, obj.shape, obj.dtype.str, obj.tobytes())
    try:
        hash(obj)
    except TypeError:
        raise Unkeyable(f"a {kind.__name__}, which is not hashable") from None
    return (kind, obj)  # the type keeps 1, 1.0 and True apart


def rebuild(obj: Any, leaf: Callable[[DArray], Any]) -> Any:
    """``obj`` with each DArray ``x`` (inside tuples, lists, dicts) replaced by ``leaf(x)``."""
    if isinstance(obj, DArray):
        return leaf(obj)
    kind = type(obj)
    if kind is tuple:
        return tuple(rebuild(x, leaf) for x in obj)
    if kind is list:
        return [rebuild(x, leaf) for x in obj]
    if kind is dict:
        return {k: rebuild(v, leaf) for k, v in obj.items()}
    return obj
