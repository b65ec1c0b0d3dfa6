"""``tril_indices``/``triu_indices`` as DArrays: each rank computes only its block.

The indices of a triangle, in NumPy's (row-major) order, are cut into blocks
like any 1-D array; a rank finds the rows of its positions from the count of
elements per row (a prefix sum over the ``n`` rows, which every rank computes
alike), so no communication is needed.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from dmesh._device import device_module
from dmesh.collectives.errors import ArgumentError
from dmesh.core.layout import Layout
from dmesh.core.placement import Replicate, Shard, normalize_placements
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = ["tril_indices", "triu_indices"]


def tril_indices(
    n: int, k: int = 0, m: int | None = None, *, mesh: Any = None, placements: Any = None
) -> tuple[DArray, DArray]:
    """``np.tril_indices(n, k, m)``: row and column indices as 1-D DArrays (``Shard(0)``
    on the first mesh dim unless ``placements`` says otherwise)."""
    return _indices(n, k, m, mesh, placements, lower=True)


def triu_indices(
    n: int, k: int = 0, m: int | None = None, *, mesh: Any = None, placements: Any = None
) -> tuple[DArray, DArray]:
    """``np.triu_indices(n, k, m)``: row and column indices as 1-D DArrays (``Shard(0)``
    on the first mesh dim unless ``placements`` says otherwise)."""
    return _indices(n, k, m, mesh, placements, lower=False)


def _indices(
    n: int, k: int, m: int | None, mesh: Any, placements: Any, lower: bool
) -> tuple[DArray, DArray]:
    from dmesh.creation import default_mesh  # the default mesh, as dmesh.zeros makes it

    n, k = operator.index(n), operator.index(k)
    m = n if m is None else operator.index(m)
    mesh = default_mesh() if mesh is None else mesh
    if placements is None:
        placements = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    placements = normalize_placements(placements, mesh.ndim, 1)
    if any(p.is_partial() for p in placements):
        raise ArgumentError(f"tril_indices/triu_indices: placements {placements} cannot be Partial")
    rows = np.arange(max(n, 0))
    # First column of each row's run, and its length: [start, m) or [0, stop).
    first = np.zeros(rows.size, np.intp) if lower else np.clip(rows + k, 0, max(m, 0))
    stop = np.clip(rows + k + 1, 0, max(m, 0)) if lower else np.full(rows.size, max(m, 0))
    counts = np.maximum(stop - first, 0)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if ends.size else 0
    layout = Layout.balanced(mesh.shape, placements, (total,))
    spec = DArraySpec(mesh, layout, np.dtype(np.intp))
    xp = device_module(mesh.device)
    if mesh.coordinate is None:
        empty = xp.empty(spec.local_shape(), np.intp)
        return DArray(empty, spec), DArray(empty.copy(), spec)
    lo = spec.offsets()[0]
    position = np.arange(lo, lo + spec.local_shape()[0])
    row = np.searchsorted(ends, position, side="right")
    column = first[row] + position - (ends[row] - counts[row])
    return DArray(xp.asarray(row.astype(np.intp)), spec), DArray(xp.asarray(column), spec)
