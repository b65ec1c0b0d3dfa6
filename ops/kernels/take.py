"""``np.take`` on DArrays: integer-array indexing along one axis (``dmesh.ops.indexing.fancy``).

The owners of the taken elements are found from the block boundaries and
answer requests (two all-to-alls); no rank gathers the array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.errors import UnsupportedError
from dmesh.darray import DArray
from dmesh.ops.indexing import fancy as fancy_indexing
from dmesh.ops.registry import decompose


@decompose(np.take)
def take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> DArray:
    """``np.take`` of a DArray; ``indices`` as in NumPy, or an integer DArray (collective)."""
    if out is not None:
        raise UnsupportedError("np.take on DArrays: out= is not supported; assign the result")
    if not isinstance(a, DArray):
        raise UnsupportedError(
            "np.take of a NumPy array with DArray indices: distribute the array first, e.g. "
            "dmesh.distribute(a, mesh, [Replicate()] * mesh.ndim)"
        )
    return fancy_indexing.take(a, indices, axis, mode)
