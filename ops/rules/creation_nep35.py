"""NEP 35 ``like=``: NumPy's creation functions called with ``like=a``, ``a`` a DArray.

``np.zeros(5, like=a)`` reaches ``a.__array_function__`` with ``like``
removed from the arguments; the result is a DArray on ``a``'s mesh made as
the ``dmesh.`` factory of the same name would make it (``Shard(0)`` on the
first mesh dim), each rank computing only its block (no communication).
``np.array(x, like=a)``/``np.asarray(x, like=a)`` take an ``x`` that every
rank holds (as ``dmesh.distribute(x, a.mesh)`` does) or a DArray (kept in its
layout). NumPy's ``order=`` (C order only), ``device=`` (None or ``"cpu"``)
and ``subok=`` keep their defaults; other values raise ``UnsupportedError``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from dmesh import creation, creation_grids
from dmesh.collectives.errors import ArgumentTypeError, UnsupportedError
from dmesh.convert import distribute
from dmesh.darray import DArray
from dmesh.ops.registry import decompose

__all__ = ["LIKE_FUNCTIONS", "like_target"]

# The NumPy functions taking ``like=`` that have a decomposition here.
LIKE_FUNCTIONS = (
    np.zeros, np.ones, np.empty, np.full, np.arange, np.array, np.asarray, np.asanyarray,
    np.ascontiguousarray, np.eye, np.identity, np.tri, np.fromfunction,
)  # fmt: skip


def like_target(like: Any) -> DArray:
    """The DArray passed as ``like=``.

    NumPy drops ``like`` from the arguments it hands to
    ``DArray.__array_function__``; until that method passes it on (as
    ``like=self``), it is found as the ``self`` of the nearest
    ``DArray.__array_function__`` frame on the stack: a creation function
    reaches this module only through that method, called on ``like``.
    """
    if isinstance(like, DArray):
        return like
    code = DArray.__array_function__.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            target = frame.f_locals.get("self")
            if isinstance(target, DArray):
                return target
        frame = frame.f_back  # type: ignore[assignment]
    raise ArgumentTypeError(f"like=: expected a DArray, got {type(like).__name__}")


def _check(name: str, order: Any = "C", device: Any = None, orders: str = "C") -> None:
    if order not in tuple(orders) or device not in (None, "cpu"):
        raise UnsupportedError(
            f"np.{name}(..., like=DArray) takes order={'/'.join(map(repr, orders))} and "
            f"device=None; got order={order!r}, device={device!r}"
        )


def _maker(name: str, factory: Callable[..., DArray]) -> Callable[..., DArray]:
    def make(
        shape: Any, dtype: Any = None, order: Any = "C", *, device: Any = None, like: Any = None
    ) -> DArray:
        target = like_target(like)
        _check(name, order, device)
        return factory(shape, mesh=target.mesh, dtype=dtype)

    make.__name__ = name
    make.__doc__ = f"``np.{name}(shape, dtype, like=a)``: ``dmesh.{name}`` on ``a``'s mesh."
    return make


zeros = decompose(np.zeros)(_maker("zeros", creation.zeros))
ones = decompose(np.ones)(_maker("ones", creation.ones))
empty = decompose(np.empty)(_maker("empty", creation.empty))


@decompose(np.full)
def full(shape: Any, fill_value: Any, dtype: Any = None, order: Any = "C", *, device: Any = None,
         like: Any = None) -> DArray:  # fmt: skip
    """``np.full(shape, fill_value, dtype, like=a)``: ``dmesh.full`` on ``a``'s mesh."""
    target = like_target(like)
    _check("full", order, device)
    if isinstance(fill_value, DArray):
        raise UnsupportedError(
            "np.full(..., like=DArray): fill_value must be a scalar every rank holds, not a "
            "DArray; use np.broadcast_to(value, shape) for a DArray value"
        )
    return creation.full(shape, fill_value, mesh=target.mesh, dtype=dtype)


@decompose(np.arange)
def arange(*args: Any, dtype: Any = None, device: Any = None, like: Any = None,
           **kwargs: Any) -> DArray:  # fmt: skip
    """``np.arange([start,] stop[, step], dtype, like=a)``: ``dmesh.arange`` on ``a``'s mesh."""
    target = like_target(like)
    _check("arange", device=device)
    names = ("start", "stop", "step")
    given = dict(zip(names, args)) | kwargs
    if len(args) > 3 or set(given) - set(names):
        raise ArgumentTypeError(f"np.arange: unexpected arguments {args!r}, {kwargs!r}")
    if not given:
        raise ArgumentTypeError("np.arange() requires stop to be specified")
    # np.arange(5) and np.arange(start=5): 5 is the stop (dmesh.arange reads a lone start so)
    start, stop, step = given.get("start", 0), given.get("stop"), given.get("step", 1)
    return creation.arange(start, stop, step, mesh=target.mesh, dtype=dtype)


@decompose(np.eye)
def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = float, order: Any = "C", *,
        device: Any = None, like: Any = None) -> DArray:  # fmt: skip
    """``np.eye(N, M, k, dtype, like=a)``: ``dmesh.eye`` on ``a``'s mesh."""
    target = like_target(like)
    _check("eye", order, device)
    return creation.eye(N, M, k, mesh=target.mesh, dtype=dtype)


@decompose(np.identity)
def identity(n: int, dtype: Any = None, *, like: Any = None) -> DArray:
    """``np.identity(n, dtype, like=a)``: ``dmesh.eye(n)`` on ``a``'s mesh."""
    return creation.eye(n, mesh=like_target(like).mesh, dtype=dtype)


@decompose(np.tri)
def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = float, *,
        like: Any = None) -> DArray:  # fmt: skip
    """``np.tri(N, M, k, dtype, like=a)``: ``dmesh.tri`` on ``a``'s mesh."""
    return creation_grids.tri(N, M, k, dtype, mesh=like_target(like).mesh)


@decompose(np.fromfunction)
def fromfunction(function: Callable[..., Any], shape: Any, *, dtype: Any = float,
                 like: Any = None, **kwargs: Any) -> DArray:  # fmt: skip
    """``np.fromfunction(f, shape, dtype, like=a)``: ``dmesh.fromfunction`` on ``a``'s mesh."""
    mesh = like_target(like).mesh
    return creation_grids.fromfunction(function, shape, dtype=dtype, mesh=mesh, **kwargs)


def _holds_darray(obj: Any, depth: int = 0) -> bool:
    """Whether a nested list or tuple holds a DArray (NumPy would gather it element by element)."""
    if isinstance(obj, DArray):
        return True
    if isinstance(obj, (list, tuple)) and depth < 8:
        return any(_holds_darray(x, depth + 1) for x in obj)
    return False


def _converted(name: str, obj: Any, dtype: Any, copy: Any, like: Any, ndmin: int = 0,
               order: Any = "K") -> DArray:  # fmt: skip
    """``np.array``/``asarray`` of ``obj`` with ``like=a``: a DArray kept, else distributed."""
    target = like_target(like)
    _check(name, order, None, orders="KAC" if name != "ascontiguousarray" else "C")
    if isinstance(obj, DArray):
        if ndmin > obj.ndim:
            raise UnsupportedError(
                f"np.{name}(DArray, ndmin={ndmin}) is not supported; use np.expand_dims"
            )
        result = obj.astype(obj.dtype if dtype is None else dtype, copy=bool(copy))
        if copy is False and result is not obj:
            raise ValueError(f"np.{name}: a copy is needed to change the dtype, and copy=False")
        return result
    if _holds_darray(obj):
        raise UnsupportedError(
            f"np.{name}(..., like=DArray) of a list holding DArrays would gather them; "
            "use np.stack or np.concatenate on the DArrays"
        )
    local = np.array(obj, dtype=dtype, ndmin=ndmin)
    return distribute(local, target.mesh)


@decompose(np.array)
def array(obj: Any, dtype: Any = None, *, copy: Any = True, order: Any = "K", subok: Any = False,
          ndmin: int = 0, like: Any = None) -> DArray:  # fmt: skip
    """``np.array(obj, like=a)``: ``obj`` (every rank holds it) distributed on ``a``'s mesh."""
    return _converted("array", obj, dtype, copy, like, ndmin, order)


@decompose(np.asarray)
def asarray(obj: Any, dtype: Any = None, order: Any = None, *, device: Any = None,
            copy: Any = None, like: Any = None) -> DArray:  # fmt: skip
    """``np.asarray(obj, like=a)``: a DArray unchanged, other data distributed on ``a``'s mesh."""
    _check("asarray", "K" if order is None else order, device, orders="KAC")
    return _converted("asarray", obj, dtype, copy, like)


@decompose(np.asanyarray)
def asanyarray(obj: Any, dtype: Any = None, order: Any = None, *, device: Any = None,
               copy: Any = None, like: Any = None) -> DArray:  # fmt: skip
    """``np.asanyarray(obj, like=a)``: as ``np.asarray``."""
    _check("asanyarray", "K" if order is None else order, device, orders="KAC")
    return _converted("asanyarray", obj, dtype, copy, like)


@decompose(np.ascontiguousarray)
def ascontiguousarray(obj: Any, dtype: Any = None, *, like: Any = None) -> DArray:
    """``np.ascontiguousarray(obj, like=a)``: as ``np.asarray`` (blocks are C-contiguous)."""
    return _converted("ascontiguousarray", obj, dtype, None, like, order="C")
