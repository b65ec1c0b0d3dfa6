"""``np.repeat`` of a DArray: each block repeated where it lies (no communication).

Along a sharded axis the output's block boundaries follow the input's: with
``c`` the cumulative counts of the repeats, input block ``[s, t)`` becomes
output block ``[c[s], c[t])``, so each rank repeats its own elements and no
data moves. The repeats are a scalar or an array every rank holds (their
prefix sums give every rank every boundary); the other dims keep their
placements, ``Partial`` included (copying elements is linear).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.core.layout import Layout
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose

__all__ = ["repeat"]


@decompose(np.repeat)
def repeat(a: Any, repeats: Any, axis: Any = None) -> DArray:
    """``np.repeat``: each block repeated in place; sharded axes keep their shards."""
    if isinstance(repeats, DArray):
        raise UnsupportedError("np.repeat: repeats must be an int or an array every rank holds, "
                               "not a DArray; gather it with repeats.full_array()")  # fmt: skip
    counts = np.asarray(repeats)
    if not np.can_cast(counts.dtype, np.intp, casting="safe"):
        raise ArgumentTypeError(f"Cannot cast array data from {counts.dtype!r} to "
                                f"dtype('int64') according to the rule 'safe'")  # fmt: skip
    if counts.ndim > 1:
        raise ArgumentError(f"np.repeat: repeats must be 0-d or 1-d, got shape {counts.shape}")
    if np.any(counts < 0):
        raise ArgumentError("repeats may not contain negative values.")
    if axis is None:
        a, axis = np.ravel(a), 0
    axis = normalize_axis_index(axis, a.ndim)
    n = a.shape[axis]
    counts = counts.astype(np.intp)
    if counts.size == 1:
        counts = np.full(n, counts.reshape(-1)[0], np.intp)
    elif counts.size != n:
        raise ArgumentError(f"operands could not be broadcast together with shape ({n},) "
                            f"({counts.size},)")  # fmt: skip
    ends = np.concatenate([[0], np.cumsum(counts)]).astype(np.intp)
    layout = a.spec.layout
    shape = list(a.shape)
    shape[axis] = int(ends[-1])
    bounds = list(layout.bounds)
    cut = bounds[axis]
    if cut is not None:
        bounds[axis] = tuple(int(ends[b]) for b in cut)
    out = Layout(layout.mesh_shape, layout.placements, tuple(shape), tuple(bounds))
    spec = DArraySpec(a.mesh, out, a.dtype)
    block = a.local
    xp = array_module(block)
    if a.mesh.coordinate is None:
        return DArray(xp.empty(spec.local_shape(), a.dtype), spec)
    start = a.spec.offsets()[axis]
    mine = counts[start : start + block.shape[axis]]
    scalar = np.ndim(repeats) == 0
    local = xp.repeat(block, int(mine[0]) if scalar and mine.size else xp.asarray(mine), axis=axis)
    return DArray(local, spec)
