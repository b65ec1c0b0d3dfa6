"""``np.meshgrid`` of DArray coordinate vectors: views of them, broadcast (no communication).

Each vector becomes an array with one long dim (its own: ``x`` is sharded along
it), broadcast to the grid's shape: a sharded vector gives a grid sharded
along that vector's dim, as ``dmesh.meshgrid`` makes it from replicated data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.darray import DArray
from dmesh.ops.registry import decompose


@decompose(np.meshgrid)
def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> Any:
    """``np.meshgrid`` with DArray coordinates: a tuple of DArrays (views unless ``copy``)."""
    if indexing not in ("xy", "ij"):
        raise ArgumentError(f"np.meshgrid: indexing={indexing!r}; use 'xy' or 'ij'")
    for i, x in enumerate(xi):
        if not isinstance(x, DArray) and np.ndim(x) > 0:
            raise ArgumentTypeError(
                f"np.meshgrid: coordinate {i} is a {type(x).__name__}, mixed with DArrays; make "
                "it a DArray first (dmesh.distribute(x, mesh, placements)), or call "
                "dmesh.meshgrid with vectors every rank holds"
            )
    ndim = len(xi)
    shapes = [[1] * ndim for _ in xi]
    for i in range(ndim):
        shapes[i][i] = -1
    if indexing == "xy" and ndim > 1:  # NumPy's Cartesian indexing: x along columns
        shapes[0][:2], shapes[1][:2] = [1, -1], [-1, 1]
    output = [np.reshape(np.ravel(x), tuple(shape)) for x, shape in zip(xi, shapes)]
    if not sparse:
        output = list(np.broadcast_arrays(*output))
    if copy:
        output = [x.copy() for x in output]
    return tuple(output)
