"""The signature of a compiled call: DArray specs and constants, and the DArrays in the arguments.

Two calls with equal signatures trace the same plan: every DArray argument
enters by its spec (mesh identity, layout with block bounds, dtype), every
other argument by value (NumPy arrays by shape, dtype and bytes). DArrays
inside tuples, lists and dicts count as arguments too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh.darray import DArray

__all__ = ["Unkeyable", "rebuild", "signature"]


class Unkeyable(Exception):  # noqa: N818 - internal signal
    """An argument that is neither a DArray, a container of them, nor a hashable constant."""


def signature(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], list[DArray]]:
    """The cache key of ``(args, kwargs)`` and the DArrays found in them, in order.

    Raises :class:`Unkeyable` for an argument that cannot key a cache.
    """
    leaves: list[DArray] = []
    key = (_key(args, leaves), _key(kwargs, leaves))
    return key, leaves


def _key(obj: Any, leaves: list[DArray]) -> Any:
    if isinstance(obj, DArray):
        leaves.append(obj)
        return ("D", obj.spec)
    kind = type(obj)
    if kind is tuple or kind is list:
        return (kind, tuple(_key(x, leaves) for x in obj))
    if kind is dict:
        return (dict, tuple((k, _key(v, leaves)) for k, v in obj.items()))
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise Unkeyable(f"an object array of shape {obj.shape}")
        return ("A", obj.shape, obj.dtype.str, obj.tobytes())
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
