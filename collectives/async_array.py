"""``AsyncArray``: the result of a non-blocking collective, waited for on first use.

A collective called with ``async_op=True`` starts an MPI non-blocking
operation and returns at once. The returned object behaves as the result
array: the first operation that needs values (a ufunc, a NumPy function,
element access, ``np.asarray``, an arithmetic operator, ``.wait()``) completes
the request, so the compute issued between the call and that use overlaps the
communication. Operations that only make a view (basic slicing, ``reshape``,
``transpose``/``.T``) return another ``AsyncArray`` without waiting.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from dmesh.collectives import tracing
from dmesh.collectives.blocks import resolve_shape

__all__ = ["AsyncArray", "Pending"]


class Pending:
    """Requests of one non-blocking call and how to turn their buffers into results.

    ``keep`` holds whatever references the buffers MPI still reads or writes
    (typically the closure that started the call): mpi4py does not keep a
    non-blocking collective's buffers alive, so a send buffer packed for the
    call would otherwise be freed, and reused, while MPI reads it. It is
    dropped on completion.
    """

    __slots__ = ("_finish", "_keep", "_requests", "_results")

    def __init__(
        self,
        requests: Sequence[MPI.Request],
        finish: Callable[[], tuple[Any, ...]],
        keep: object = None,
    ) -> None:
        self._requests = list(requests)
        self._finish = finish
        self._keep = keep
        self._results: tuple[Any, ...] | None = None

    def wait(self) -> tuple[Any, ...]:
        """Complete the requests (once) and return the results."""
        if self._results is None:
            tracing.wait_all(self._requests)  # (watched by DMESH_HANG_TIMEOUT's watchdog)
            self._requests = []
            self._results = self._finish()
            self._keep = None
        return self._results

    def test(self) -> bool:
        """True if the communication has completed; makes progress, never blocks."""
        if self._results is not None or not self._requests:
            return True
        return bool(MPI.Request.Testall(self._requests))


def _is_view_key(key: Any) -> bool:
    """Basic slicing that keeps every dimension: slices, ``None`` and ``...``."""
    items = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, slice) for k in items)


def _placeholder(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A zero-memory array of ``shape``: lets NumPy compute view shapes for us."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape))


class AsyncArray:
    """An array whose values arrive from a pending collective (see the module docstring)."""

    __slots__ = ("_dtype", "_index", "_pending", "_shape", "_views")

    def __init__(
        self,
        pending: Pending,
        index: int,
        shape: tuple[int, ...],
        dtype: np.dtype,
        views: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        self._pending = pending
        self._index = index
        self._shape = shape
        self._dtype = dtype
        self._views = views

    # -- completion ---------------------------------------------------------
    def wait(self) -> Any:
        """Block until the data has arrived; return it as a NumPy (or CuPy) array."""
        result = self._pending.wait()[self._index]
        for kind, arg in self._views:
            if kind == "getitem":
                result = result[arg]
            elif kind == "reshape":
                result = result.reshape(arg)
            else:
                result = result.transpose(arg)
        return result

    def done(self) -> bool:
        """True once the communication has completed (makes progress, never blocks)."""
        return self._pending.test()

    # -- metadata without waiting ------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the result (known before it arrives)."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """Dtype of the result (known before it arrives)."""
        return self._dtype

    @property
    def ndim(self) -> int:
        """Number of dimensions of the result."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements of the result."""
        return math.prod(self._shape)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d array")
        return self._shape[0]

    def __repr__(self) -> str:
        state = "done" if self._pending._results is not None else "pending"
        return f"AsyncArray(shape={self._shape}, dtype={self._dtype}, {state})"

    # -- views without waiting ---------------------------------------------
    def _view(self, kind: str, arg: Any, shape: tuple[int, ...]) -> AsyncArray:
        return AsyncArray(
            self._pending, self._index, shape, self._dtype, (*self._views, (kind, arg))
        )

    def __getitem__(self, key: Any) -> Any:
        if _is_view_key(key):
            shape = _placeholder(self._shape, self._dtype)[key].shape
            return self._view("getitem", key, shape)
        return self.wait()[key]

    def reshape(self, *shape: Any, order: str = "C") -> Any:
        """The result reshaped (waits for it), as ``numpy.ndarray.reshape``."""
        if order != "C":
            return self.wait().reshape(*shape, order=order)
        target = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        # A zero-stride placeholder cannot be reshaped without a copy, so work
        # out the shape (with its -1 resolved) on a zero-size stand-in.
        new_shape = resolve_shape(target, self.size)
        return self._view("reshape", new_shape, new_shape)

    def transpose(self, *axes: Any) -> AsyncArray:
        """The result with its axes permuted (waits for it), as ``numpy.transpose``."""
        order = (
            axes[0]
            if len(axes) == 1 and axes[0] is not None and not isinstance(axes[0], int)
            else axes
        )
        perm = tuple(range(self.ndim))[::-1] if not order or order == (None,) else tuple(order)
        shape = _placeholder(self._shape, self._dtype).transpose(perm).shape
        return self._view("transpose", perm, shape)

    @property
    def T(self) -> AsyncArray:
        """The result transposed (waits for it)."""
        return self.transpose()

    # -- everything else waits ---------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        result = self.wait()
        if not isinstance(result, np.ndarray):
            result = result.get()  # a CuPy array
        return np.asarray(result, dtype=dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        inputs = tuple(_resolve(x) for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(_resolve(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return func(*_resolve_nested(args), **_resolve_nested(kwargs))

    def __getattr__(self, name: str) -> Any:
        # Methods and attributes of the result array (sum, astype, real, ...).
        return getattr(self.wait(), name)

    def __iter__(self) -> Any:
        return iter(self.wait())

    def __setitem__(self, key: Any, value: Any) -> None:
        self.wait()[key] = _resolve(value)

    def __bool__(self) -> bool:
        return bool(self.wait())

    def __float__(self) -> float:
        return float(self.wait())

    def __int__(self) -> int:
        return int(self.wait())

    def __complex__(self) -> complex:
        return complex(self.wait())

    def __index__(self) -> int:
        return operator.index(self.wait())


def _resolve(x: Any) -> Any:
    return x.wait() if isinstance(x, AsyncArray) else x


def _resolve_nested(x: Any) -> Any:
    if isinstance(x, AsyncArray):
        return x.wait()
    if isinstance(x, (list, tuple)):
        return type(x)(_resolve_nested(v) for v in x)
    if isinstance(x, dict):
        return {k: _resolve_nested(v) for k, v in x.items()}
    return x


def _binary(op: Callable[[Any, Any], Any]) -> Callable[[AsyncArray, Any], Any]:
    def method(self: AsyncArray, other: Any) -> Any:
        return op(self.wait(), _resolve(other))

    return method


def _reflected(op: Callable[[Any, Any], Any]) -> Callable[[AsyncArray, Any], Any]:
    def method(self: AsyncArray, other: Any) -> Any:
        return op(_resolve(other), self.wait())

    return method


def _unary(op: Callable[[Any], Any]) -> Callable[[AsyncArray], Any]:
    def method(self: AsyncArray) -> Any:
        return op(self.wait())

    return method


for _name, _op in {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
    "pow": operator.pow, "matmul": operator.matmul, "and": operator.and_,
    "or": operator.or_, "xor": operator.xor, "lshift": operator.lshift,
    "rshift": operator.rshift, "divmod": divmod,
}.items():  # fmt: skip
    setattr(AsyncArray, f"__{_name}__", _binary(_op))
    setattr(AsyncArray, f"__r{_name}__", _reflected(_op))
for _name, _op in {
    "lt": operator.lt, "le": operator.le, "eq": operator.eq,
    "ne": operator.ne, "gt": operator.gt, "ge": operator.ge,
}.items():  # fmt: skip
    setattr(AsyncArray, f"__{_name}__", _binary(_op))
_unary_ops: dict[str, Callable[[Any], Any]] = {
    "neg": operator.neg, "pos": operator.pos, "abs": operator.abs, "invert": operator.invert,
}  # fmt: skip
for _name, _uop in _unary_ops.items():
    setattr(AsyncArray, f"__{_name}__", _unary(_uop))
