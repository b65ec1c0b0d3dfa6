"""ndarray's methods and properties on DArrays, as NumPy's functions.

``a.cumsum(axis)`` is ``_np.cumsum(a, axis)``, dispatched by the op layer like
any call of the function, so a method is exactly as distributed as its
function (and raises the same clear error where the function is not
supported). The in-place methods (``sort``, ``partition``, ``fill``, ``put``)
write the result into this array's blocks, so views of it see the change, as
with NumPy's; where the array holds partial terms, they replace its spec by
the reduced value's.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from dmesh import _call_keys, _hooks
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Replicate

if TYPE_CHECKING:
    from dmesh.core.spec import DArraySpec
    from dmesh.darray import DArray

__all__ = ["ArrayMethods", "FlatView", "element_index"]

_np: Any = np  # NumPy's functions, called on DArrays (dispatched, not typed for them)


def element_index(args: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """``ndarray.item``'s arguments as one index per dim (a flat index is unravelled)."""
    size = math.prod(shape)
    if len(args) == 1 and isinstance(args[0], tuple):
        args = args[0]
    if len(args) == 1:
        k = operator.index(args[0])
        if not -size <= k < size:
            raise ArgumentError(f"item({k}): index out of range for size {size}")
        return tuple(int(i) for i in _np.unravel_index(k % size, shape))
    if len(args) != len(shape):
        raise ArgumentError(f"item{args}: give one index, or {len(shape)} (one per dim)")
    return tuple(operator.index(i) for i in args)


def _axis_method(func: Any, name: str, doc: str = "") -> Any:
    """``a.name(axis=None, keepdims=False)``: the dispatched ``np.name(a, ...)``."""

    def method(self: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce(func, axis=axis, keepdims=keepdims)

    method.__name__, method.__qualname__ = name, f"DArray.{name}"
    method.__doc__ = f"``np.{name}(a, ...)``{doc}."
    return method


def _cast_block(block: Any, *, spec: Any, dtype: np.dtype) -> Any:
    """``astype(dtype)`` of one block (the node ``dmesh.compile`` records for it)."""
    return block.astype(dtype)


class ArrayMethods:
    """The ndarray methods that are NumPy functions of the array (mixed into DArray)."""

    __slots__ = ()
    if TYPE_CHECKING:
        _local: Any
        _spec: DArraySpec
        _view: Any

        @property
        def shape(self) -> tuple[int, ...]: ...
        @property
        def dtype(self) -> np.dtype: ...
        @property
        def ndim(self) -> int: ...
        @property
        def size(self) -> int: ...
        def _reduce(self, func: Any, **kwargs: Any) -> Any: ...

        def ravel(self, order: Any = "C") -> Any: ...
        def with_layout(self, layout: Any) -> Any: ...
        def __getitem__(self, key: Any) -> Any: ...
        def __setitem__(self, key: Any, value: Any) -> None: ...

    # -- sizes (local) -------------------------------------------------------------
    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return int(self.dtype.itemsize)

    @property
    def nbytes(self) -> int:
        """Bytes of the global array (all blocks together, as ``ndarray.nbytes`` of it)."""
        return int(self.size * self.dtype.itemsize)

    @property
    def mT(self) -> Any:
        """The last two axes swapped (``np.matrix_transpose``); at least 2-D."""
        if self.ndim < 2:
            raise ArgumentError(f"mT: the array is {self.ndim}-D; it needs at least 2 dims")
        return _np.swapaxes(self, -1, -2)

    @property
    def flat(self) -> FlatView:
        """A flat view: ``a.flat[k]`` reads and ``a.flat[k] = v`` writes in C order."""
        return FlatView(self)

    min = _axis_method(np.min, "min")
    max = _axis_method(np.max, "max")
    argmax = _axis_method(np.argmax, "argmax", ": global indices")
    argmin = _axis_method(np.argmin, "argmin", ": global indices")
    any = _axis_method(np.any, "any")
    all = _axis_method(np.all, "all")

    # -- the functions of the array ----------------------------------------------------
    def view(self, dtype: Any = None, type: Any = None) -> Any:
        """``a.view()``: a new DArray on the same blocks, so writes through either reach both
        (a detached view stays one); with a ``dtype`` of the same item size, the blocks
        reinterpreted as it (``a.view(np.int64)`` of float64 data)."""
        if type is not None:
            raise UnsupportedError("a.view(type=...) on DArrays: only dtype= (or nothing)")
        this: Any = self
        made: Any = self.__class__  # DArray (this mixin's class)
        if dtype is None:
            result = made(this._local.view(), this._spec)
        else:
            dtype = np.dtype(dtype)
            if dtype.itemsize != self.dtype.itemsize or any(
                p.is_partial() for p in this._spec.placements
            ):
                raise UnsupportedError(
                    f"a.view({dtype}) of a {self.dtype} DArray: only a dtype of the same item "
                    f"size ({self.dtype.itemsize} bytes), on an array without partial terms"
                )
            result = made(this._local.view(dtype), this._spec.with_dtype(dtype))
        result._view = this._view
        return result

    def flatten(self, order: Any = "C") -> Any:
        """A flattened copy (``_np.ravel(a).copy()``)."""
        if order not in ("C", "A", "K"):
            raise ArgumentError(f"flatten: order={order!r}; DArrays flatten in C order")
        return _np.ravel(self).copy()

    def squeeze(self, axis: Any = None) -> Any:
        """``_np.squeeze(a, axis)``."""
        return _np.squeeze(self, axis=axis)

    def swapaxes(self, axis1: int, axis2: int) -> Any:
        """``_np.swapaxes(a, axis1, axis2)``: a view of each block."""
        return _np.swapaxes(self, axis1, axis2)

    def repeat(self, repeats: Any, axis: Any = None) -> Any:
        """``_np.repeat(a, repeats, axis)``."""
        return _np.repeat(self, repeats, axis=axis)

    def clip(self, min: Any = None, max: Any = None, **kwargs: Any) -> Any:
        """``_np.clip(a, min, max)``; either bound may be None."""
        return _np.clip(self, min, max, **kwargs)

    def take(self, indices: Any, axis: Any = None, mode: Any = "raise") -> Any:
        """``_np.take(a, indices, axis, mode=mode)``."""
        if mode == "raise":
            return _np.take(self, indices, axis=axis)
        return _np.take(self, indices, axis=axis, mode=mode)

    def nonzero(self) -> Any:
        """``_np.nonzero(a)``: a tuple of index arrays, one per dim."""
        return _np.nonzero(self)

    def compress(self, condition: Any, axis: Any = None) -> Any:
        """``_np.compress(condition, a, axis)``."""
        return _np.compress(condition, self, axis=axis)

    def choose(self, choices: Any, mode: Any = "raise") -> Any:
        """``_np.choose(a, choices, mode=mode)``."""
        return _np.choose(self, choices, mode=mode)

    def searchsorted(self, v: Any, side: Any = "left", sorter: Any = None) -> Any:
        """``_np.searchsorted(a, v, side, sorter)``."""
        return _np.searchsorted(self, v, side=side, sorter=sorter)

    def cumsum(self, axis: Any = None, dtype: Any = None) -> Any:
        """``_np.cumsum(a, axis, dtype)``."""
        return _np.cumsum(self, axis=axis, dtype=dtype)

    def cumprod(self, axis: Any = None, dtype: Any = None) -> Any:
        """``_np.cumprod(a, axis, dtype)``."""
        return _np.cumprod(self, axis=axis, dtype=dtype)

    def ptp(self, axis: Any = None, keepdims: bool = False) -> Any:
        """``_np.ptp(a, axis)``: maximum minus minimum."""
        return _np.ptp(self, axis=axis, keepdims=keepdims)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None) -> Any:
        """``_np.trace(a, offset, axis1, axis2, dtype)``."""
        return _np.trace(self, offset, axis1, axis2, dtype)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
        """``_np.diagonal(a, offset, axis1, axis2)``."""
        return _np.diagonal(self, offset, axis1, axis2)

    def dot(self, b: Any) -> Any:
        """``_np.dot(a, b)``."""
        return _np.dot(self, b)

    def argsort(self, axis: Any = -1, kind: Any = None, order: Any = None, **kw: Any) -> Any:
        """``_np.argsort(a, axis, kind)``: global indices."""
        if order is not None:
            raise ArgumentError("argsort: order= is for structured arrays; DArrays have none")
        return _np.argsort(self, axis=axis, kind=kind, **kw)

    def argpartition(self, kth: Any, axis: Any = -1, kind: Any = "introselect") -> Any:
        """``_np.argpartition(a, kth, axis)``."""
        return _np.argpartition(self, kth, axis=axis, kind=kind)

    def astype(
        self, dtype: Any, order: Any = "K", casting: Any = "unsafe", subok: Any = True,
        copy: Any = True,
    ) -> DArray:  # fmt: skip
        """The array converted to ``dtype`` block by block (no communication, unless partial).

        A partial array's value is its reduction, so the cast applies to that:
        partial terms are cast as they are only where the cast commutes with
        their reduction (float and complex sums and products, float max and
        min: casts there are monotone or only round); otherwise the terms are
        reduced first (``np.sum(a, 0).astype(int)`` truncates the sum, not each
        term; a partial max cast to complex has no order to reduce by).
        """
        dtype = np.dtype(dtype)
        if not np.can_cast(self.dtype, dtype, casting):
            raise TypeError(f"astype: cannot cast {self.dtype} to {dtype} with casting={casting!r}")
        if dtype == self.dtype and not copy:
            return self  # type: ignore[return-value]  # (self is a DArray)
        source: Any = self
        ops = {p.op for p in self._spec.placements if isinstance(p, Partial)}
        if ops and dtype != self.dtype and not _cast_commutes(ops, self.dtype, dtype):
            source = self.reduce_partials()  # type: ignore[attr-defined]
        recorder = _hooks.recorder
        if recorder is not None and recorder.records(source):  # dmesh.compile traces: a node
            cast = functools.partial(_cast_block, dtype=dtype)
            return recorder.block_call(cast, source, f"astype({dtype})", lambda: dtype)  # type: ignore[no-any-return]
        # A new DArray, not type(self): a compiled call's stand-ins (dmesh.compile's lazy
        # arrays) are subclasses made another way, and the cast's result is a plain block.
        darray = _call_keys.darray_type
        return darray(source._local.astype(dtype), source._spec.with_dtype(dtype))  # type: ignore[no-any-return]

    # -- in place ------------------------------------------------------------------------
    def sort(self, axis: Any = -1, kind: Any = None, order: Any = None, **kw: Any) -> None:
        """Sort in place (``np.sort``'s result written into this array's blocks)."""
        if order is not None:
            raise ArgumentError("sort: order= is for structured arrays; DArrays have none")
        self._assign_result(_np.sort(self, axis=axis, kind=kind, **kw))

    def partition(self, kth: Any, axis: Any = -1, kind: Any = "introselect") -> None:
        """Partition in place (``np.partition``'s result written into this array's blocks)."""
        self._assign_result(_np.partition(self, kth, axis=axis, kind=kind))

    def put(self, indices: Any, values: Any, mode: Any = "raise") -> None:
        """``_np.put(a, indices, values, mode)``: in place."""
        _np.put(self, indices, values, mode=mode)

    def fill(self, value: Any) -> None:
        """Set every element to ``value`` (no communication).

        A partial array becomes replicated along its partial mesh dims: each
        rank holds the value itself, not a term of it.
        """
        if self._view is not None:  # a detached view (dmesh.ops.indexing.views): written through
            self[...] = value
            return
        layout = self._spec.layout
        if any(p.is_partial() for p in layout.placements):
            placements = tuple(Replicate() if p.is_partial() else p for p in layout.placements)
            self._spec = self._spec.with_layout(  # type: ignore[misc]  # DArray's slot
                Layout(layout.mesh_shape, placements, layout.shape, layout.bounds)
            )
        if _hooks.before_block_access is not None:
            _hooks.before_block_access()
        self._local[...] = value

    def _assign_result(self, result: Any) -> None:
        """Make ``result`` (same shape and dtype) this array's value, in place."""
        if self._view is not None:  # a detached view (dmesh.ops.indexing.views): written through
            self[...] = result
            return
        if _hooks.before_block_access is not None:
            _hooks.before_block_access()
        if any(p.is_partial() for p in self._spec.placements):
            self._local, self._spec = result._local, result._spec  # type: ignore[misc]  # no partial terms to keep
            return
        aligned = result.with_layout(self._spec.layout)
        self._local[...] = aligned._local


def _cast_commutes(ops: set[str], source: np.dtype, target: np.dtype) -> bool:
    """Whether casting each partial term to ``target`` gives the cast of their reduction."""
    floats = source.kind in "fc" and target.kind in "fc"
    if ops <= {"sum", "prod"}:
        return floats
    if ops <= {"max", "min"}:
        return source.kind == "f" and target.kind == "f"
    return False


class FlatView:
    """``a.flat``: C-order element access of a DArray by flat index (reads and writes)."""

    __slots__ = ("_array",)

    def __init__(self, array: Any) -> None:
        self._array = array

    def __len__(self) -> int:
        return int(self._array.size)

    def __getitem__(self, key: Any) -> Any:
        return _np.ravel(self._array)[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        # Every rank takes the same path, decided from the key and the shape alone.
        size = self.size
        if isinstance(key, slice):  # a.flat[::2] = v: np.put at those flat indices (NumPy
            flat = range(size)[key]  # repeats a short v, as np.put does)
            _np.put(self._array, np.arange(flat.start, flat.stop, flat.step), value)
            return
        if not isinstance(key, (int, np.integer)) or isinstance(key, bool):
            raise ArgumentError(
                f"a.flat[key] = v of a DArray takes an integer or a slice; got {key!r}: "
                "write through a[index] (or np.put for flat indices) instead"
            )
        if not -size <= key < size:
            raise ArgumentError(f"a.flat[{key}]: index out of range for size {size}")
        self._array[_np.unravel_index(int(key) % size, self._array.shape)] = value

    def __iter__(self) -> Iterator[Any]:
        raise ArgumentError(
            "iterating a.flat of a DArray would take one collective per element; "
            "use a.ravel() or a.tolist()"
        )

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(math.prod(self._array.shape))
