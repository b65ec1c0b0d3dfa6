"""Advanced (integer-array) index keys of DArrays, checked and split into a plan; no communication.

NumPy's rules: the index arrays (and any int next to them) broadcast to one
shape ``S``, which replaces the indexed dims when the advanced items are
adjacent in the key and goes first otherwise; a bool ndarray counts as its
``nonzero()`` arrays; indices may be negative and are bounds-checked
(``IndexError``); a bool scalar is a new axis of length 1 indexed by
``[0]`` (True) or ``[]`` (False). Every check reads what every rank holds (the key, the
spec), so every rank raises alike. DArray indices are checked later, with
their data (:mod:`dmesh.ops.indexing.fancy`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentTypeError, UnsupportedError
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = ["VALID", "Plan", "is_advanced", "is_darray", "parse"]

VALID = (
    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
    "boolean arrays are valid indices"
)


def is_darray(item: Any) -> bool:
    """Whether an index item is a DArray (an index array that may itself be sharded)."""
    return isinstance(item, DArray)


def is_advanced(key: Any) -> bool:
    """Whether ``key`` holds an index array (a list, an ndarray with dims, a DArray) or a bool."""
    items = key if isinstance(key, tuple) else (key,)
    return any(
        isinstance(i, (list, bool, np.bool_))
        or (isinstance(i, np.ndarray) and (i.ndim > 0 or i.dtype == np.bool_))
        or is_darray(i)
        for i in items
    )


@dataclass(frozen=True)
class Plan:
    """A key split into a basic view and the advanced indices into that view."""

    basic: tuple[Any, ...]  # the key with slice(None) for each advanced item
    axes: tuple[int, ...]  # the dims of the view that the indices address
    dims: tuple[int, ...]  # the same dims of the indexed array (for messages)
    sizes: tuple[int, ...]  # their lengths
    indices: tuple[Any, ...]  # int64 ndarrays (checked, >= 0) or integer DArrays (unchecked)
    shape: tuple[int, ...]  # the broadcast shape S of the indices
    position: int  # where S goes in the result


def _as_index(item: Any, spec: DArraySpec) -> Any:
    """A key item that is not a slice/None/...: an int ndarray, a bool ndarray or a DArray."""
    if is_darray(item):
        if item.mesh is not spec.mesh:
            raise ArgumentTypeError("an index DArray must be on the indexed array's mesh")
        if item.dtype.kind == "b":
            raise UnsupportedError(
                "a boolean DArray inside an index is not supported: read with a[mask] (a mask "
                "of the array's whole shape) or index with the int DArrays of np.nonzero(mask); "
                "assign with np.where(mask, value, a)"
            )
        if item.dtype.kind not in "iu":
            raise IndexError(VALID)
        return item
    array = np.asarray(item)
    if isinstance(item, list) and array.size == 0:
        array = array.astype(np.intp)  # NumPy reads [] as an empty index, not floats
    if array.dtype.kind not in "iub":
        raise IndexError(VALID)
    return array


def parse(spec: DArraySpec, key: Any) -> Plan:
    """Check ``key`` from what every rank knows and split it (no communication)."""
    items = [
        i if i is None or i is Ellipsis or isinstance(i, slice) else _as_index(i, spec)
        for i in (key if isinstance(key, tuple) else (key,))
    ]
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(
        i.ndim if isinstance(i, np.ndarray) and i.dtype == np.bool_ else 1
        for i in items
        if i is not None and i is not Ellipsis
    )
    if used > spec.ndim:
        raise IndexError(f"too many indices for a {spec.ndim}-d DArray: {used} were given")
    basic: list[Any] = []
    axes: list[int] = []
    dims: list[int] = []
    sizes: list[int] = []
    indices: list[Any] = []
    at: list[int] = []  # the key position of each index, for NumPy's placement rule
    d = v = 0  # the input dim and the view dim of the next item
    for k, item in enumerate(items):
        if item is None or isinstance(item, slice) or item is Ellipsis:
            width = spec.ndim - used if item is Ellipsis else 1
            basic.append(item)
            d += 0 if item is None else width
            v += width
            continue
        boolean = isinstance(item, np.ndarray) and item.dtype == np.bool_
        if boolean and item.ndim == 0:
            # NumPy's a[True]/a[False]: a new axis of length 1, indexed by [0] or [].
            basic.append(None)
            indices.append(np.flatnonzero(item.reshape(1)).astype(np.int64))
            dims.append(d)
            sizes.append(1)
            axes.append(v)
            at.append(k)
            v += 1
            continue
        if boolean:
            _check_mask(item, spec.shape, d)
        for part in np.nonzero(item) if boolean else (item,):
            indices.append(part if is_darray(part) else _checked(part, spec.shape[d], d))
            dims.append(d)
            sizes.append(spec.shape[d])
            axes.append(v)
            basic.append(slice(None))
            at.append(k)
            d += 1
            v += 1
    try:
        shape = np.broadcast_shapes(*(i.shape for i in indices))
    except ValueError as exc:
        shapes = " ".join(str(i.shape) for i in indices)
        raise IndexError(
            f"shape mismatch: indexing arrays could not be broadcast together with shapes {shapes}"
        ) from exc
    # NumPy: the index dims replace the indexed ones when the advanced items are
    # adjacent in the key (ellipsis, None and slices separate them), else go first.
    adjacent = at[-1] - at[0] == len(set(at)) - 1
    return Plan(
        tuple(basic),
        tuple(axes),
        tuple(dims),
        tuple(sizes),
        tuple(indices),
        shape,
        axes[0] if adjacent else 0,
    )


def _check_mask(mask: np.ndarray, shape: tuple[int, ...], first: int) -> None:
    for k, n in enumerate(mask.shape):
        if shape[first + k] != n:
            raise IndexError(
                f"boolean index did not match indexed array along axis {first + k}; size of "
                f"axis is {shape[first + k]} but size of corresponding boolean axis is {n}"
            )


def _checked(index: np.ndarray, n: int, axis: int) -> np.ndarray:
    """``index`` as int64 in ``[0, n)``, or IndexError naming the first bad value."""
    index = index.astype(np.int64)
    bad = (index >= n) | (index < -n)
    if bad.any():
        value = int(index[bad].flat[0])
        raise IndexError(f"index {value} is out of bounds for axis {axis} with size {n}")
    return np.where(index < 0, index + n, index)
