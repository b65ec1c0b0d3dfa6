"""In-place writes into DArrays: ``np.put``, ``np.place``, ``np.putmask`` and ``np.copyto``.

Each writes into the target's blocks and returns None, as NumPy does. A
``Partial`` target is first reduced in place (its terms would no longer sum
to the written value). Writes at scattered positions (``put``'s flat
indices, ``place``'s True positions) take the integer-array assignment of
:mod:`dmesh.ops.indexing.fancy`: each value travels to the owner of its
position in one all-to-all, never gathered. Writes whose value at each
position is known from the position alone (``putmask``, ``copyto``) are
local once the value and the mask are laid out like the target.

A value array shorter than the positions is repeated, as NumPy does: the
value of the ``j``-th position is ``values.flat[j % len(values)]``, computed
from ``j`` where the position is held (a DArray of values answers requests
for those elements, by the same integer-array machinery).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.darray import DArray
from dmesh.ops.indexing.fancy import block_of
from dmesh.ops.indexing.operands import PYTHON_SCALARS, dtype_of, reduce_in_place
from dmesh.ops.indexing.views import writes_through
from dmesh.ops.registry import decompose

__all__ = ["copyto", "cycled", "place", "positions", "put", "putmask", "target"]

CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def target(a: Any, name: str) -> DArray:
    """The DArray written into, with its partial terms reduced in place (collective)."""
    if not isinstance(a, DArray):
        raise UnsupportedError(
            f"{name} into a NumPy array with DArray arguments is not supported: the target "
            "must be a DArray (dmesh.distribute it), or pass NumPy arrays only"
        )
    reduce_in_place(a)
    return a


def positions(like: DArray) -> DArray:
    """The DArray ``arange(len(like))`` laid out like the 1-D, non-partial DArray ``like``."""
    offset = like.spec.offsets()[0]
    xp_local = np.arange(offset, offset + like.local.shape[0], dtype=np.intp)
    return DArray(xp_local, like.spec.with_dtype(np.dtype(np.intp)))


def cycled(values: Any, count: int, like: Any) -> Any:
    """``values.flat[j % len(values)]`` for ``j < count``: a value per position (collective).

    ``like`` is the 1-D index (an ndarray, or a non-partial DArray) whose
    layout the result takes when ``values`` must be repeated; a value that
    needs no repeating (its length is ``count``, or 1) is returned flat.
    """
    flat = np.ravel(values) if isinstance(values, DArray) else np.asarray(values).ravel()
    size = flat.shape[0]
    if size in (count, 1):
        return flat
    if not isinstance(flat, DArray):
        if not isinstance(like, DArray):
            return np.resize(flat, count)
        where = positions(like)
        return DArray(flat[where.local % size], where.spec.with_dtype(flat.dtype))
    index: Any = np.arange(count) % size
    if isinstance(like, DArray):
        index = np.remainder(positions(like), size)
    return flat[index]


def _flat_indices(ind: Any) -> Any:
    """``ind`` flattened: a 1-D integer ndarray, or a non-partial 1-D integer DArray."""
    if isinstance(ind, DArray):
        flat = np.ravel(ind.reduce_partials())
    else:
        flat = np.asarray(ind).ravel()
        if flat.size == 0:
            flat = flat.astype(np.intp)
    if not np.can_cast(flat.dtype, np.intp, "safe"):
        raise ArgumentTypeError(
            f"Cannot cast array data from {flat.dtype!r} to dtype('int64') according to the "
            "rule 'safe'"
        )
    return flat


def _bounds_check(flat: Any, n: int) -> None:
    """NumPy's IndexError for a flat index outside ``[-n, n)`` (collective for a DArray)."""
    if isinstance(flat, DArray):
        low, high = int(np.min(flat)), int(np.max(flat))
        bad = high if high >= n else low if low < -n else None
    else:
        wrong = flat[(flat >= n) | (flat < -n)]
        bad = int(wrong[0]) if wrong.size else None
    if bad is not None:
        raise IndexError(f"index {bad} is out of bounds for axis 0 with size {n}")


@decompose(np.put)
@writes_through
def put(a: Any, ind: Any, v: Any, mode: str = "raise") -> None:
    """``np.put``: ``a.flat[ind] = v``, ``v`` repeated as needed; mode raise, wrap or clip.

    Collective: each value goes to the owner of its position.
    """
    if mode not in ("raise", "wrap", "clip"):
        raise ArgumentError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    array = target(a, "np.put")
    flat = _flat_indices(ind)
    count = flat.shape[0]
    size = v.size if isinstance(v, DArray) else np.size(v)
    if count == 0 or size == 0:
        return  # NumPy writes nothing
    n = array.size
    if n == 0:
        raise IndexError("cannot replace elements of an empty array")
    if mode == "raise":
        _bounds_check(flat, n)
    flat = np.clip(flat, 0, n - 1) if mode == "clip" else np.mod(flat, n)
    if array.ndim == 0:
        if isinstance(flat, DArray) or isinstance(v, DArray):
            raise UnsupportedError("np.put into a 0-d DArray with DArray arguments")
        array[...] = np.resize(np.asarray(v).ravel(), count)[-1]  # the last write wins
        return
    array[np.unravel_index(flat, array.shape)] = cycled(v, count, flat)


def _mask_like(mask: Any, a: DArray, name: str) -> Any:
    """``mask`` as a bool array of ``a``'s shape (same size required, as NumPy)."""
    size = mask.size if isinstance(mask, DArray) else np.size(mask)
    if size != a.size:
        raise ArgumentError(f"{name}: mask and data must be the same size")
    if isinstance(mask, DArray):
        if mask.mesh is not a.mesh:
            raise ArgumentTypeError(f"{name}: the mask must be on the array's mesh")
        if mask.shape != a.shape:
            mask = np.reshape(mask, a.shape)
        return mask if mask.dtype == np.bool_ else mask.astype(bool)
    return np.asarray(mask).reshape(a.shape).astype(bool)


@decompose(np.place)
@writes_through
def place(arr: Any, mask: Any, vals: Any) -> None:
    """``np.place``: the ``j``-th True position of ``mask`` gets ``vals[j % len(vals)]``.

    Collective: the True positions are counted (one all-gather) and the
    values go to their owners.
    """
    array = target(arr, "np.place")
    condition = _mask_like(mask, array, "place")
    if array.ndim == 0:
        raise UnsupportedError("np.place into a 0-d DArray is not supported; use a[...] = v")
    index = np.nonzero(condition)
    count = index[0].shape[0]
    if count == 0:
        return
    size = vals.size if isinstance(vals, DArray) else np.size(vals)
    if size == 0:
        raise ArgumentError("Cannot insert from an empty array!")
    array[index] = cycled(vals, count, index[0])


@decompose(np.putmask)
@writes_through
def putmask(a: Any, mask: Any, values: Any) -> None:
    """``np.putmask``: ``a.flat[n] = values.flat[n % len(values)]`` where ``mask`` is True.

    Local when ``values`` has one element or ``a``'s shape (after laying it
    and the mask out like ``a``); otherwise a DArray of values answers the
    requests for the repeated elements (collective).
    """
    array = target(a, "np.putmask")
    condition = _mask_like(mask, array, "putmask")
    size = values.size if isinstance(values, DArray) else np.size(values)
    if size == 0:
        return  # NumPy writes nothing
    layout = array.spec.layout
    coord = array.mesh.coordinate
    shape = values.shape if isinstance(values, DArray) else np.shape(values)
    if isinstance(values, DArray) and values.mesh is not array.mesh:
        raise ArgumentTypeError("putmask: the values must be on the array's mesh")
    if size == 1 or tuple(shape) == array.shape:
        source: Any = values if size != 1 or isinstance(values, DArray) else np.ravel(values)
        if isinstance(source, DArray) and size == 1:
            source = np.reshape(source, (1,) * array.ndim)
        if coord is None:
            return
        block = block_of(source if isinstance(source, DArray) else np.asarray(source), layout,
                         coord)  # fmt: skip
    else:
        # The flat position of each element of this block, repeated over the values.
        flat = np.zeros((), np.intp)  # a 0-d array's one element
        if array.ndim:
            local = np.indices(array.local.shape).reshape(array.ndim, -1)
            offsets = np.asarray(array.spec.offsets(), np.intp).reshape(-1, 1)
            flat = np.ravel_multi_index(tuple(local + offsets), array.shape).reshape(
                array.local.shape
            )
        flat %= size
        if isinstance(values, DArray):
            where = DArray(flat.astype(np.intp), array.spec.with_dtype(np.dtype(np.intp)))
            block = np.ravel(values)[where].with_layout(layout).local
        else:
            block = np.asarray(values).ravel()[flat]
        if coord is None:
            return
    chosen = block_of(condition, layout, coord)
    array.local[chosen] = block[chosen] if block.shape else block


@decompose(np.copyto)
@writes_through
def copyto(dst: Any, src: Any, casting: Any = "same_kind", where: Any = True) -> None:
    """``np.copyto``: ``src`` broadcast into ``dst`` where ``where`` holds, cast by ``casting``.

    Local once ``src`` and ``where`` are laid out like ``dst`` (a DArray is
    moved there, collective). Shapes and casts are checked on every rank first.
    """
    array = target(dst, "np.copyto")
    if casting not in CASTINGS:
        raise ArgumentError(f"casting must be one of {', '.join(map(repr, CASTINGS))}")
    for name, x in (("src", src), ("where", where)):
        if type(x) in PYTHON_SCALARS:
            continue
        if isinstance(x, DArray) and x.mesh is not array.mesh:
            raise ArgumentTypeError(f"np.copyto: {name} must be on the destination's mesh")
        shape = x.shape if isinstance(x, DArray) else np.shape(x)
        try:
            fits = np.broadcast_shapes(tuple(shape), array.shape) == array.shape
        except ValueError:
            fits = False
        if not fits:
            word = "input array" if name == "src" else "mask"
            raise ArgumentError(
                f"could not broadcast {word} from shape {tuple(shape)} into shape {array.shape}"
            )
        have = dtype_of(x)
        want, rule = (array.dtype, casting) if name == "src" else (np.dtype(bool), "safe")
        rule_: Any = rule
        if not np.can_cast(have, want, rule_):
            raise ArgumentTypeError(
                f"Cannot cast array data from {have!r} to {want!r} according to the rule '{rule}'"
            )
    coord = array.mesh.coordinate
    if coord is None:  # not a member: no block, and no part in the mesh's collectives
        return
    layout = array.spec.layout
    parts = [x if type(x) in PYTHON_SCALARS else block_of(_array(x), layout, coord)
             for x in (src, where)]  # fmt: skip
    np.copyto(array.local, parts[0], casting=casting, where=parts[1])


def _array(x: Any) -> Any:
    return x if isinstance(x, DArray) else np.asarray(x)
