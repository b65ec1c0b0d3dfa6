"""Views that are not block views: writes through them reach their base.

NumPy's contract is that basic indexing (ints, slices, ``None``, ``...``)
gives a view, and a write through a view changes the base. Most basic
selections of a DArray are views of its blocks (a slice keeps every element
where it is), so a write through them lands in the base's blocks with no
further care. Three kinds are not:

* an integer index on a sharded dim (``a[4]`` when dim 0 is sharded): the
  rank holding the element keeps a view of its block, the others hold terms
  of the sum's identity, and the result is ``Partial("sum")``;
* any selection of a ``Partial`` array (its blocks are terms, not values);
* a negative step on a sharded dim (``a[::-1]``): the blocks are mirrored, a
  copy.

Such a result is *detached*: it carries a :class:`ViewOf` record, the array
it was taken from (its *root*, itself a plain array or a block view of one)
and its key composed down to the root, one item per root dim (``int`` or
``range``) plus ``None`` for new axes. Every write into a detached view is a
write into its root at the composed key, made by the root's owners:

* ``v[k] = x`` is ``root[compose(key, k)] = x`` (no message for a scalar);
* whole-array writes (``out=v``, ``v.fill``, ``v.sort()``, ``np.copyto``)
  are ``root[key] = result``;
* any other writer (``np.put``, ``np.place``, masks, ``where=``) runs inside
  :func:`writing`: the view becomes a private replicated copy, the writer
  changes it, and the copy is assigned back to ``root[key]``.

A reshape that had to move elements (:class:`Reshaped`) is a copy of its
root: writes through it, or through a selection of it, are made on its
blocks and then written back whole (``root[...] = np.reshape(r, ...)``).

A view whose blocks are live (an int index on a non-partial root: the
holder's block is a view of the root's) sees every later write of the root.
The others (views of partial arrays, mirrored blocks) are taken anew from the
root after each write through them; a *sibling* taken earlier from a
``Partial`` root does not see a write through another (the root's terms are
replaced by its reduced values, a new buffer), nor a mirrored view or a
moved reshape the writes made to its root after it (copies).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple, NoReturn

import numpy as np

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.darray import DArray

__all__ = [
    "READ_ONLY",
    "VIEW_FUNCTIONS",
    "Derived",
    "Reshaped",
    "ViewOf",
    "assign_result",
    "c_contiguous",
    "compose",
    "function_of_view",
    "normalize",
    "record",
    "refresh",
    "reshaped_write",
    "root_key",
    "whole",
    "write_back",
    "write_out",
    "writes_through",
    "writing",
]  # fmt: skip


class ViewOf(NamedTuple):
    """Where a detached view's elements live: ``root[root_key(items)]``."""

    root: DArray  # never itself detached
    items: tuple[int | range | None, ...]  # one per root dim (int or range), None for new axes
    live: bool  # the holder's block is a view of root's: later root writes show
    held: bool  # this rank's block is the root's elements (not identity terms): rank-local
    # mesh dim -> the coordinate holding the int-indexed elements, where an int
    # index of the root made the view (None where a chain did): an assignment
    # into a selection with the same owners is copied by its holders alone.
    owners: dict[int, int] | None = None


class Reshaped(NamedTuple):
    """A reshape of ``root`` that moved elements (``a.reshape(3, 10)`` of a row-sharded
    ``(5, 6)`` ``a``): its blocks are copies, so every write through it is made on its
    blocks and then written back whole, ``root[...] = np.reshape(view, root.shape)``
    (collective: the reshape moves the elements back). A selection of it is a
    detached view of it (not live: taken anew after each write through it)."""

    root: DArray  # never itself detached


def write_back(a: DArray, view: Reshaped) -> None:
    """Write the reshaped copy ``a`` back into its root (collective)."""
    view.root[...] = np.reshape(_private(a), view.root.shape)


@contextmanager
def reshaped_write(a: DArray) -> Iterator[DArray]:
    """Around a write into the blocks of ``a``, a :class:`Reshaped` view: then written back."""
    view = a._view
    assert type(view) is Reshaped
    a._view = None
    try:
        yield a
    finally:
        a._view = view
    write_back(a, view)


class Derived(NamedTuple):
    """A view a function made of a detached view (``row.T``, ``np.reshape(a[0], ...)``).

    Its blocks share the detached view's, but no key of the root says where
    its elements are, so a write through it could not reach the root; it
    raises instead of being lost. Reads are as the function's result.
    """

    function: str  # the function that made it, for the message
    read_only: bool = False  # NumPy's result is read-only (np.diagonal, np.broadcast_to)

    def refuse(self) -> NoReturn:
        """Raise the error every write through this view gets (on every rank alike)."""
        if self.read_only:  # NumPy's own error for its read-only views
            raise ValueError("assignment destination is read-only")
        raise UnsupportedError(
            f"writing through np.{self.function}(v) where v is a view that is no view of the "
            "blocks (an int index on a sharded dim, a selection of a partial array, a negative "
            "step on a sharded dim) is not supported: its elements cannot be traced back to "
            "the array they live in. Write through v itself (v[...] = np.transpose(x) for "
            "v.T[...] = x), or take a copy first (np.copy)"
        )


# Functions whose result shares the argument's elements. Of a detached view,
# np.real/np.imag become the selection of np.real/np.imag of its root (a view
# of the root's blocks); the others give a Derived view.
VIEW_FUNCTIONS: frozenset[Any] = frozenset((
    np.real, np.imag, np.transpose, np.swapaxes, np.moveaxis, np.rollaxis, np.reshape,
    np.ravel, np.squeeze, np.expand_dims, np.atleast_1d, np.atleast_2d, np.atleast_3d,
    np.broadcast_to, np.diagonal, np.matrix_transpose,
))  # fmt: skip


# View functions whose NumPy result is read-only: a write raises NumPy's ValueError.
READ_ONLY: frozenset[Any] = frozenset((np.broadcast_to, np.diagonal))


def c_contiguous(shape: tuple[int, ...], key: Any) -> bool:
    """Whether NumPy's ``x[key]`` of a C-contiguous ``x`` of ``shape`` is C-contiguous: its
    own flags on a stand-in of byte strides over one byte (nothing allocated or read)."""
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * max(shape[d + 1], 1)
    stand_in = np.lib.stride_tricks.as_strided(np.empty(1, np.uint8), shape, strides)
    return bool(stand_in[key].flags.c_contiguous)


def whole(a: DArray) -> bool:
    """Whether ``a`` is known to be C-contiguous as NumPy sees it (see DArray._contiguous)."""
    return bool(getattr(a, "_contiguous", False)) or a._local.base is None


def function_of_view(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run: Any) -> Any:
    """``func(*args, **kwargs)`` for a view function of the detached view ``args[0]``.

    ``run`` is the dispatcher, called with ``args[0]``'s record set aside so
    that it does not come back here.
    """
    x = args[0]
    view = x._view
    if func in (np.real, np.imag) and type(view) is ViewOf and len(args) == 1 and not kwargs:
        return func(view.root)[root_key(view.items)]  # a view of np.real(root): writes land
    x._view = None
    try:
        result = run(func, (type(x),), args, kwargs)
    finally:
        x._view = view
    if func in (np.reshape, np.ravel) and type(view) is ViewOf and isinstance(result, DArray):
        # a[1].reshape(2, 3): NumPy's reshape of a contiguous row is a view, written
        # back through the row to a; of a strided one (a column) a copy, as here.
        if whole(view.root) and c_contiguous(view.root.shape, root_key(view.items)):
            result._view = Reshaped(x)
            return result
        return DArray(result._local.copy(), result._spec)
    marker = view if type(view) is Derived else Derived(func.__name__, func in READ_ONLY)
    for out in result if isinstance(result, (tuple, list)) else (result,):
        if isinstance(out, DArray):
            out._view = marker
    return result


def expand(key: Any, ndim: int) -> list[Any]:
    """``key`` as one item per dim plus ``None`` items (``...`` expanded), for a basic key
    already checked (:func:`dmesh.ops.indexing.basic.expand_key` checks, then calls this)."""
    items = list(key) if type(key) is tuple else [key]
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at : at + 1] = [slice(None)] * (ndim - used)
    else:
        items += [slice(None)] * (ndim - used)
    return items


def normalize(shape: tuple[int, ...], key: Any) -> tuple[int | range | None, ...]:
    """A basic ``key`` into an array of ``shape`` as ``int``/``range``/``None`` items.

    The key was already checked by the indexing that made the view (bounds,
    one ellipsis, no more indices than dims).
    """
    out: list[int | range | None] = []
    d = 0
    for item in expand(key, len(shape)):
        if item is None:
            out.append(None)
            continue
        n = shape[d]
        if isinstance(item, slice):
            out.append(range(*item.indices(n)))
        else:
            out.append(operator.index(item) % n)
        d += 1
    return tuple(out)


def compose(
    items: tuple[int | range | None, ...], key: Any, view_ndim: int
) -> tuple[int | range | None, ...] | None:
    """The items of ``view[key]`` into the root, for a view taken with ``items``.

    None when the selection cannot be written as a key of the root (a new
    axis sliced to length 0: an empty selection, left to :func:`writing`).
    """
    sub = expand(key, view_ndim)
    out: list[int | range | None] = []
    j = 0  # position in sub
    for item in items:
        if type(item) is int:
            out.append(item)
            continue
        while j < len(sub) and sub[j] is None:  # new axes of key before this view dim
            out.append(None)
            j += 1
        k = sub[j]
        j += 1
        if item is None:  # a new axis of length 1
            if isinstance(k, slice):
                if len(range(1)[k]) == 0:
                    return None
                out.append(None)
            # an int selects its one element: the axis is gone
            continue
        assert isinstance(item, range)
        if isinstance(k, slice):
            out.append(item[k])
        else:
            out.append(item[operator.index(k)])  # (bounds were checked by the view's indexing)
    out.extend(None for _ in sub[j:])  # trailing new axes of key
    return tuple(out)


def root_key(items: tuple[int | range | None, ...]) -> tuple[Any, ...]:
    """The composed items as a key NumPy and dmesh index with."""
    key: list[Any] = []
    for item in items:
        if isinstance(item, range):
            stop: int | None = item.stop if item.stop >= 0 else None
            key.append(slice(item.start, stop, item.step) if len(item) else slice(0, 0))
        else:
            key.append(item)
    return tuple(key)


def record(
    parent: DArray, key: Any, result: DArray, owned: bool, mirrored: bool, holds: bool
) -> None:
    """Mark ``result = parent[key]`` as a detached view when it is one (see the module).

    ``owned``: an int index on a sharded dim (one coordinate holds the
    element); ``mirrored``: a negative step on a sharded dim (a copy). Both
    come from the key and the layout, so every rank records the same.
    ``holds``: this rank's block of ``result`` is ``parent``'s elements.
    """
    view: ViewOf | Derived | Reshaped | None = parent._view
    if isinstance(view, Derived):  # a selection of a function's view keeps refusing writes
        result._view = view
        return
    if isinstance(view, Reshaped):  # written through to the reshape, which writes back
        result._view = ViewOf(parent, normalize(parent.shape, key), False, holds)
        return
    if view is not None:
        items = compose(view.items, key, parent.ndim)
        if items is not None:
            live = view.live and not mirrored
            result._view = ViewOf(view.root, items, live, view.held and holds)
        return
    partial = any(p.is_partial() for p in parent.placements)
    if owned or mirrored or partial:
        live = not (partial or mirrored)
        result._view = ViewOf(parent, normalize(parent.shape, key), live, holds)


def refresh(view: DArray) -> None:
    """Take a view that is not live anew from its root, after a write through it."""
    record_ = view._view
    if type(record_) is not ViewOf or record_.live:
        return
    fresh = record_.root[root_key(record_.items)]
    view._local, view._spec, view._view = fresh._local, fresh._spec, fresh._view


@contextmanager
def writing(a: DArray) -> Iterator[DArray]:
    """Around a writer that changes ``a``'s blocks in place (collective if ``a`` is partial).

    A ``Partial`` array is first reduced in place (a write into its terms
    would leave terms that no longer sum to the written value). A detached
    view then holds a private copy of its values; once the writer is done,
    the copy is assigned to its root (``root[key] = a``) and the view is
    taken anew where it is not live.
    """
    if not isinstance(a, DArray):
        raise ArgumentTypeError(f"the target of a write must be a DArray, got {type(a).__name__}")
    view: ViewOf | Derived | Reshaped | None = a._view
    if isinstance(view, Derived):
        view.refuse()
    if isinstance(view, Reshaped):
        with reshaped_write(a):
            yield a
        return
    if any(p.is_partial() for p in a.placements):
        reduced = a.reduce_partials()
        a._local, a._spec = reduced._local, reduced._spec
    if view is None:
        yield a
        return
    a._view = None  # its reduced terms are a private copy while the writer runs
    try:
        yield a
    finally:
        a._view = view
    view.root[root_key(view.items)] = _private(a)
    fresh = view.root[root_key(view.items)]
    a._local, a._spec, a._view = fresh._local, fresh._spec, fresh._view


def _private(a: DArray) -> DArray:
    """``a`` without its view record, so that the assignment is not taken for a no-op."""
    return DArray(a._local, a._spec)


def writes_through(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func(a, ...)``, a writer into ``a``'s blocks, made to write through a detached ``a``."""

    @functools.wraps(func)
    def wrapper(a: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(a, DArray) and a._view is not None:
            with writing(a):
                return func(a, *args, **kwargs)
        return func(a, *args, **kwargs)

    return wrapper


def assign_result(target: DArray, result: DArray, casting: Any, name: str) -> None:
    """Write ``result`` (``target``'s shape and mesh) into ``target``: ``out=``'s last step.

    Moved to ``target``'s layout and copied into its blocks; a detached
    ``target`` is written through to its root instead (``target[...] = result``).
    """
    if target._view is None:
        moved = result.with_layout(target.spec.layout)
        np.copyto(target.local, moved.local, casting=casting)
        return
    if not np.can_cast(result.dtype, target.dtype, casting):
        raise ArgumentTypeError(
            f"{name}: cannot cast the output from {result.dtype!r} to {target.dtype!r} "
            f"with casting rule {casting!r}"
        )
    target[...] = result


def write_out(name: str, out: Any, compute: Callable[[], Any], casting: str = "unsafe") -> DArray:
    """``out=`` of a function computed without it: ``compute()`` written into the one DArray of
    ``out`` (through to its root for a detached view). ``out`` is checked before ``compute``
    runs (every rank alike, before any message): one DArray; then the result must have its
    shape and mesh. Returns ``out``'s array."""
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != 1 or not isinstance(outs[0], DArray):
        raise ArgumentTypeError(
            f"np.{name}(..., out=): out must be one DArray, got {type(out).__name__}; make it "
            "one with dmesh.zeros(shape, mesh=mesh, placements=...)"
        )
    target = outs[0]
    result = compute()
    if (
        not isinstance(result, DArray)
        or result.shape != target.shape
        or result.mesh is not target.mesh
    ):
        raise ArgumentError(
            f"np.{name}(..., out=): the result of shape {np.shape(result)} does not fit out "
            f"{target.spec}; out needs the result's shape and mesh"
        )
    assign_result(target, result, casting, f"np.{name}")
    return target
