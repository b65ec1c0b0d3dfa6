"""``DArray``: a distributed array, this rank's block plus the spec of the whole."""

from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from dmesh import _call_keys, _elision, _hooks
from dmesh.collectives import tracing
from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.layout import Layout
from dmesh.core.placement import Placement, Replicate, normalize_placements
from dmesh.core.plan import estimate_cost, plan_redistribution
from dmesh.core.spec import DArraySpec
from dmesh.darray_array_api import ArrayAPIObject
from dmesh.darray_methods import ArrayMethods, element_index
from dmesh.darray_operators import Operators
from dmesh.redistribution import run_steps
from dmesh.scalar_routes import GATHER, LOCAL, direct_move, reduce_terms, route_of, routes

__all__ = ["DArray", "Redistribution", "redistribute"]

# (spec, target layout) -> (the moved spec, the plan's steps) of moves within one
# mesh made before, for a member rank: a repeated move (an operand realigned on
# every call, ``out=``'s write) skips building the spec and the plan's lookup.
_planned_moves: dict[tuple[DArraySpec, Layout], tuple[DArraySpec, Any]] = {}


# NumPy functions that dispatch on their ``like=`` argument only: NumPy calls
# ``like.__array_function__`` and leaves ``like`` out of the arguments.
_LIKE: frozenset[Any] = frozenset((
    np.zeros, np.ones, np.empty, np.full, np.arange, np.array, np.asarray, np.asanyarray,
    np.ascontiguousarray, np.asfortranarray, np.eye, np.identity, np.tri, np.fromfunction,
    np.frombuffer, np.fromiter, np.fromstring, np.require, np.loadtxt, np.genfromtxt,
))  # fmt: skip


class Redistribution(NamedTuple):
    """A redistribution about to run, as debug tools are told of it (``dmesh.debug``)."""

    source: DArraySpec
    target: DArraySpec
    steps: tuple[tuple[Any, ...], ...]  # the plan (see dmesh.redistribution)
    cost: float  # estimated bytes per rank, latency included (estimate_cost)


def redistribute(a: DArray, mesh: Any = None, placements: Any = None) -> DArray:
    """``a.redistribute(mesh, placements)``: the same array laid out anew (collective)."""
    return a.redistribute(mesh, placements)


class DArray(ArrayMethods, ArrayAPIObject, Operators):
    """A global array split into blocks over a :class:`~dmesh.DeviceMesh`.

    Each rank holds one block (a ``numpy.ndarray``, or a ``cupy.ndarray`` on a
    ``"cuda"`` mesh), described by a :class:`DArraySpec`. Build one with
    :func:`dmesh.distribute`, :func:`dmesh.from_local` or a factory such as
    :func:`dmesh.zeros`; the constructor is internal.

    Calls that communicate are collective (every rank of the mesh makes them,
    in the same order): :meth:`full_array`, ``np.asarray(a)``,
    :meth:`redistribute`, :meth:`rebalance`, :meth:`item`, :meth:`tolist`.
    The others (:meth:`to_local`, the properties, ``repr``) are local.
    """

    # _view: None, or where a detached view's elements live (an int index on a
    # sharded dim, a selection of a partial array, mirrored blocks): a record
    # of dmesh.ops.indexing.views, which routes writes through it to its root.
    __slots__ = ("_contiguous", "_local", "_spec", "_view")
    # NumPy calls on DArrays go to the op dispatcher (installed by ``ops``).
    # Operators are ufuncs (NDArrayOperatorsMixin), called directly where they
    # can (dmesh.darray_operators).
    __array_priority__ = 1000

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if _hooks.dispatch_ufunc is None:
            raise UnsupportedError(f"{ufunc.__name__} on DArrays: the ops package is not loaded")
        return _hooks.dispatch_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if _hooks.dispatch_function is None:
            raise UnsupportedError(f"{func.__name__} on DArrays: the ops package is not loaded")
        if func in _LIKE:  # NEP 35: np.zeros(5, like=a) reaches here without its like=
            kwargs = {**kwargs, "like": self}
        return _hooks.dispatch_function(func, types, args, kwargs)

    # Arithmetic that reuses a temporary operand's block (``a * b + c``).
    __add__ = _elision.binary_method(np.add, NDArrayOperatorsMixin.__add__)
    __radd__ = _elision.reflected_method(np.add, NDArrayOperatorsMixin.__radd__)
    __sub__ = _elision.binary_method(np.subtract, NDArrayOperatorsMixin.__sub__)
    __rsub__ = _elision.reflected_method(np.subtract, NDArrayOperatorsMixin.__rsub__)
    __mul__ = _elision.binary_method(np.multiply, NDArrayOperatorsMixin.__mul__)
    __rmul__ = _elision.reflected_method(np.multiply, NDArrayOperatorsMixin.__rmul__)
    __truediv__ = _elision.binary_method(np.true_divide, NDArrayOperatorsMixin.__truediv__)
    __rtruediv__ = _elision.reflected_method(np.true_divide, NDArrayOperatorsMixin.__rtruediv__)
    __pow__ = _elision.binary_method(np.power, NDArrayOperatorsMixin.__pow__)

    def __init__(self, local: Any, spec: DArraySpec) -> None:
        self._local = local
        self._spec = spec
        self._view: Any = None
        # Known to be C-contiguous as NumPy would see it (a slice of a whole array that
        # NumPy's reshape turns into a view): set by slicing; a block that owns its
        # memory is whole too (ops.kernels.views asks both before writing a reshape back).
        self._contiguous = False

    # -- description (local) ---------------------------------------------------
    @property
    def spec(self) -> DArraySpec:
        """The global description: mesh, layout (placements, block boundaries), dtype."""
        return self._spec

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the global array."""
        return self._spec.shape

    @property
    def dtype(self) -> np.dtype:
        """Dtype of the array."""
        return self._spec.dtype

    @property
    def ndim(self) -> int:
        """Number of dimensions of the global array."""
        return self._spec.ndim

    @property
    def size(self) -> int:
        """Number of elements of the global array."""
        return math.prod(self._spec.shape)

    @property
    def mesh(self) -> Any:
        """The :class:`~dmesh.DeviceMesh` the blocks live on."""
        return self._spec.mesh

    @property
    def placements(self) -> tuple[Placement, ...]:
        """One placement per mesh dimension (``Shard``, ``Replicate``, ``Partial``)."""
        return self._spec.placements

    @property
    def local(self) -> Any:
        """This rank's block (the array itself, not a copy)."""
        if _hooks.before_block_access is not None:
            _hooks.before_block_access()
        return self._local

    def to_local(self) -> Any:
        """This rank's block, without communication."""
        if _hooks.before_block_access is not None:
            _hooks.before_block_access()
        return self._local

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DArray")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DArray({self._spec!r})"

    # -- collective -----------------------------------------------------------------
    def redistribute(self, mesh: Any = None, placements: Any = None) -> DArray:
        """The same global array with other placements (or on another mesh over the same ranks).

        Collective over the mesh. ``mesh`` defaults to this array's mesh and
        ``placements`` to its placements; the target has balanced blocks.
        """
        mesh = self.mesh if mesh is None else mesh
        if placements is None:
            placements = self.placements
        placements = normalize_placements(placements, mesh.ndim, self.ndim)
        target = Layout.balanced(mesh.shape, placements, self.shape)
        return self._moved(mesh, target)

    def reduce_partials(self) -> DArray:
        """The same array with its ``Partial`` mesh dims reduced to ``Replicate()`` (collective)."""
        if not any(p.is_partial() for p in self.placements):
            return self
        return self.redistribute(
            self.mesh, [Replicate() if p.is_partial() else p for p in self.placements]
        )

    def with_layout(self, layout: Layout) -> DArray:
        """The same array in ``layout`` (placements and block boundaries) on its mesh.

        Collective over the mesh; no data moves when the layout is already
        this array's. For dispatch, which aligns operands' blocks.
        """
        return self._moved(self._spec.mesh, layout)

    def rebalance(self) -> DArray:
        """The same placements with balanced blocks (moves only misplaced elements). Collective."""
        target = Layout.balanced(self.mesh.shape, self.placements, self.shape)
        return self._moved(self.mesh, target)

    def _moved(self, mesh: Any, target: Layout) -> DArray:
        recorder = _hooks.recorder
        if recorder is not None:  # dmesh.compile records the move instead of making it
            moved = recorder.redistribute(self, mesh, target)
            if moved is not NotImplemented:
                return moved  # type: ignore[no-any-return]
        if mesh is self._spec.mesh and not tracing.hooked:
            # A one-element array whose plan is a copy or one all_reduce (an operand's
            # partials reduced: ``x @ y``, then arithmetic): the step made directly.
            move = direct_move(self._spec, target)
            if move is not None and (move[1] is LOCAL or not mesh.closed):
                spec, route = move
                local = self._local.copy() if route is LOCAL else reduce_terms(self._local, route)
                return DArray(local, spec)
            planned = _planned_moves.get((self._spec, target))
            if planned is not None:  # a move made before: its spec and steps kept
                return DArray(run_steps(self._local, planned[1], mesh, mesh), planned[0])
        spec = DArraySpec(mesh, target, self.dtype)
        if mesh is not self.mesh and sorted(mesh.ranks.ravel()) != sorted(self.mesh.ranks.ravel()):
            raise ArgumentError(
                f"redistribute: {mesh!r} and {self.mesh!r} must cover the same ranks "
                "(redistribution moves data between the ranks of one mesh)"
            )
        if not self.mesh.is_member or not mesh.is_member:
            xp = array_module(self._local)
            return DArray(xp.empty(spec.local_shape(), self.dtype), spec)
        if mesh is self.mesh and target == self._spec.layout:
            return DArray(self._local, spec)
        steps = plan_redistribution(self._spec.layout, target, mesh is self.mesh)
        if mesh is self._spec.mesh:
            if len(_planned_moves) >= 1024:  # bounded: specs hold meshes
                _planned_moves.clear()
            _planned_moves[(self._spec, target)] = (spec, steps)
        if tracing.hooked:  # a debug tool watches: tell it what moves and the estimate
            item = self.dtype.itemsize
            cost = estimate_cost(self._spec.layout, target, item, mesh is self.mesh)
            tracing.emit("redistribute", Redistribution(self._spec, spec, steps, cost))
        local = run_steps(self._local, steps, self.mesh, mesh)
        return DArray(local, spec)

    def full_array(self) -> Any:
        """The whole global array on every rank (collective; empty on non-members)."""
        spec = self._spec
        route = routes.get(spec)  # only one-element specs are remembered
        if route is None and math.prod(spec.shape) == 1 and not spec.mesh.closed:
            route = route_of(spec)
        if route is LOCAL:  # one element, one term: the block is the value
            return self._local
        if route is not None and route is not GATHER and not spec.mesh.closed:
            # One element (``a.sum().full_array()``): one reduction of the
            # partial terms, not a planned redistribution.
            return reduce_terms(self._local, route)
        if not self.mesh.is_member:
            return array_module(self._local).empty(self.shape, self.dtype)
        replicated = (Replicate(),) * self.mesh.ndim
        target = Layout.balanced(self.mesh.shape, replicated, self.shape)
        return self._moved(self.mesh, target).local

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The full array, gathered on every rank: **collective**, as ``full_array``."""
        if _hooks.gathers_refused:
            _hooks.gather_was_refused = True
            raise _hooks.GatherRefusedError(
                f"needs the whole {self.shape} array as a NumPy array (np.asarray of a DArray "
                "there would gather it on every rank)"
            )
        full = self.full_array()
        if not isinstance(full, np.ndarray):
            full = full.get()
        return np.asarray(full, dtype=dtype)

    def item(self, *args: Any) -> Any:
        """The value of a one-element array, or of the element at ``args``, as a Python
        scalar (collective): ``a.item(k)`` takes a flat C-order index, ``a.item(i, j)``
        one per dim, as ``ndarray.item``."""
        if args:
            return self[element_index(args, self.shape)].item()
        spec = self._spec
        route = routes.get(spec)  # only one-element specs are remembered
        if route is None:
            if self.size != 1:
                raise ArgumentError(
                    f"item(): the array has {self.size} elements (shape {self.shape}); "
                    "only one-element arrays convert to a scalar"
                )
            route = GATHER if self.mesh.closed else route_of(spec)
        if route is LOCAL:
            return self._local.item()
        if route is GATHER or spec.mesh.closed:
            return self.full_array().item()  # (raises on a closed mesh)
        # The hot case, float(np.sum(a)): one MPI call on the partial terms.
        return reduce_terms(self._local, route).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __index__(self) -> int:
        return operator.index(self.item())

    def __bool__(self) -> bool:
        """Truth of a one-element array (collective); larger arrays are ambiguous, as in NumPy."""
        if self.size != 1:
            raise ArgumentError(
                f"the truth value of a DArray with {self.size} elements is ambiguous; "
                "use a.any() or a.all()"
            )
        return bool(self.item())

    # ndarray's methods: the np. function, handed to the dispatcher past NumPy's
    # protocol (a microsecond of argument handling); arguments left at their
    # defaults are not passed, so ``a.sum()`` is the cached ``np.sum(a)``.
    def _reduce(self, func: Any, **kwargs: Any) -> Any:
        given = {k: v for k, v in kwargs.items() if v is not None and v is not False}
        if _hooks.dispatch_function is None:
            raise UnsupportedError(f"{func.__name__} on DArrays: the ops package is not loaded")
        return _hooks.dispatch_function(func, (DArray,), (self,), given)

    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
        """``np.sum(a, ...)``: a summed sharded axis gives a ``Partial`` result."""
        if axis is None and dtype is None and keepdims is False and _hooks.dispatch_function:
            return _hooks.dispatch_function(np.sum, (DArray,), (self,), {})  # the hot call
        return self._reduce(np.sum, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
        """``np.prod(a, ...)``."""
        return self._reduce(np.prod, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
        """``np.mean(a, ...)``."""
        return self._reduce(np.mean, axis=axis, dtype=dtype, keepdims=keepdims)

    def var(
        self, axis: Any = None, dtype: Any = None, ddof: float = 0, keepdims: bool = False
    ) -> Any:
        """``np.var(a, ...)``."""
        return self._reduce(np.var, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def std(
        self, axis: Any = None, dtype: Any = None, ddof: float = 0, keepdims: bool = False
    ) -> Any:
        """``np.std(a, ...)``."""
        return self._reduce(np.std, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def reshape(self, *shape: Any, order: Any = "C") -> Any:
        """The array in another shape (see ``np.reshape``); a view where the blocks allow."""
        target: Any = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return np.reshape(self, target, order=order)

    def ravel(self, order: Any = "C") -> Any:
        """``np.ravel(a)``: the flattened array, in C order."""
        return np.ravel(self, order=order)

    def __getitem__(self, key: Any) -> DArray:
        """Slices and ints move no data, except a negative step on a sharded dim (blocks go to
        their mirrored owners); integer arrays are collective (``dmesh.ops.indexing``)."""
        if _hooks.getitem is None:
            raise UnsupportedError("indexing DArrays: the ops package is not loaded")
        selected: DArray = _hooks.getitem(self, key)
        return selected

    def __setitem__(self, key: Any, value: Any) -> None:
        """Assign a scalar, a replicated array or a DArray to a basic selection."""
        if _hooks.setitem is None:
            raise UnsupportedError("indexing DArrays: the ops package is not loaded")
        _hooks.setitem(self, key, value)

    def transpose(self, *axes: Any) -> Any:
        """The transposed array (a view of each block; no data moves)."""
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
            axes = () if axes[0] is None else tuple(axes[0])
        return np.transpose(self, axes or None)

    @property
    def T(self) -> Any:
        """``a.transpose()``: the axes reversed (placements follow their dims)."""
        return np.transpose(self)

    @property
    def real(self) -> Any:
        """``np.real(a)``: the real part (each block's; no data moves)."""
        return np.real(self)

    @real.setter
    def real(self, value: Any) -> None:
        np.real(self)[...] = value  # a view of each block: writes through

    @property
    def imag(self) -> Any:
        """``np.imag(a)``: the imaginary part (each block's; no data moves)."""
        return np.imag(self)

    @imag.setter
    def imag(self, value: Any) -> None:
        if self.dtype.kind != "c":
            raise TypeError(f"a.imag = v: a {self.dtype} array has no imaginary part to set")
        np.imag(self)[...] = value

    def conj(self) -> Any:
        """``np.conjugate(a)``: the complex conjugate (each block's; no data moves)."""
        return np.conjugate(self)

    conjugate = conj

    def round(self, decimals: int = 0) -> Any:
        """``np.round(a, decimals)``: rounded element by element (no data moves)."""
        return np.round(self, decimals)

    def tolist(self) -> Any:
        """The full array as nested Python lists (collective)."""
        return self.full_array().tolist()

    # -- local operations that keep the layout ------------------------------------------
    def copy(self) -> DArray:
        """A DArray with a copy of the block and the same spec (no communication)."""
        return DArray(self._local.copy(), self._spec)

    def __copy__(self) -> DArray:
        """``copy.copy(a)``: a copy with its own block, as ``ndarray.__copy__`` (no messages)."""
        return self.copy()

    def __deepcopy__(self, memo: Any) -> DArray:
        """``copy.deepcopy(a)``: a copy with its own block on the same mesh (no communication)."""
        return self.copy()


_call_keys.darray_type = DArray  # (keys and the operators' direct path are for DArray itself)
