"""Small helpers shared by the selection functions: the mesh of a call, plain arrays as operands.

A NumPy array passed beside DArrays is, by dmesh's contract, the same on
every rank; dispatch refuses to mix one with DArrays in an elementwise op, so
the selection functions (which are decompositions written with such ops)
wrap it first as a replicated DArray: each rank keeps the whole array, and
nothing is communicated.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentTypeError
from dmesh.convert import distribute
from dmesh.core.placement import Replicate
from dmesh.darray import DArray

__all__ = ["as_operand", "dtype_of", "mesh_of", "reduce_in_place", "weak"]

PYTHON_SCALARS = (int, float, complex, bool)


def mesh_of(values: Iterable[Any], name: str) -> Any:
    """The mesh of the DArrays among ``values`` (all on one mesh), for the message ``name``."""
    meshes = {id(v.mesh): v.mesh for v in values if isinstance(v, DArray)}
    if len(meshes) != 1:
        raise ArgumentTypeError(
            f"{name}: the DArray arguments must be on one mesh; got {len(meshes)} meshes"
        )
    return next(iter(meshes.values()))


def as_operand(x: Any, mesh: Any) -> Any:
    """``x`` as an operand of dispatched ops: a DArray or a Python scalar stays, a 0-d array
    stays (a replicated value), any other array becomes a replicated DArray (no message)."""
    if isinstance(x, DArray) or type(x) in PYTHON_SCALARS:
        return x
    array = np.asarray(x)
    if array.ndim == 0:
        return array
    return distribute(array, mesh, [Replicate()] * mesh.ndim)


def weak(x: Any) -> Any:
    """What ``np.result_type`` should see of ``x``: a Python scalar (weak, NEP 50) or a dtype."""
    if type(x) in PYTHON_SCALARS:
        return x
    return dtype_of(x)


def dtype_of(x: Any) -> np.dtype:
    """The dtype of a DArray or of ``np.asarray(x)``."""
    return x.dtype if isinstance(x, DArray) else np.asarray(x).dtype


def reduce_in_place(a: DArray) -> None:
    """Make a ``Partial`` DArray hold its reduced value, in place (collective if partial).

    An in-place write into partial terms would leave terms that no longer sum
    to the written value; the array becomes replicated along its partial mesh
    dims instead (its other placements are kept; its blocks become balanced).
    """
    if not any(p.is_partial() for p in a.placements):
        return
    reduced = a.reduce_partials()
    a._local, a._spec = reduced._local, reduced._spec
