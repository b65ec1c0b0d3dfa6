"""``np.linalg.vector_norm``, ``matrix_norm`` and ``svdvals`` of DArrays, through ``norm``/``svd``.

As NumPy (``numpy/linalg/_linalg.py``): ``vector_norm`` over several axes
(or all, ``axis=None``) moves them first and merges them into one (a
transpose and a reshape, which redistribute the blocks when a merged axis is
sharded, never to one rank), then takes ``norm`` over that axis;
``matrix_norm`` is ``norm`` over the last two axes and ``svdvals`` the
singular values of ``np.linalg.svd`` (TSQR when the rows are sharded).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from dmesh.collectives.blocks import normalize_axis
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.darray import DArray
from dmesh.ops.registry import decompose

__all__ = ["matrix_norm", "svdvals", "vector_norm"]


def _darray(name: str, x: Any) -> DArray:
    if not isinstance(x, DArray):
        raise ArgumentTypeError(f"np.linalg.{name}: expected a DArray, got {type(x)}")
    return x


@decompose(np.linalg.vector_norm)
def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    """``np.linalg.vector_norm``: the ``ord``-norm over ``axis`` (an int, a tuple, or all)."""
    x = _darray("vector_norm", x)
    shape = list(x.shape)
    if axis is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axis, tuple):
        axes = tuple(normalize_axis(operator.index(d), x.ndim, "axis") for d in axis)
        if len(set(axes)) < len(axes):
            raise ArgumentError(f"np.linalg.vector_norm: repeated axis in {axis}")
    else:
        axes = (normalize_axis(operator.index(axis), x.ndim, "axis"),)
    if len(axes) == 1:
        result = np.linalg.norm(x, ord=ord, axis=axes[0])
    else:
        rest = tuple(d for d in range(x.ndim) if d not in axes)
        merged = math.prod(x.shape[d] for d in axes)
        if axes + rest != tuple(range(x.ndim)):
            x = np.transpose(x, axes + rest)
        if x.ndim != len(rest) + 1:
            x = np.reshape(x, (merged, *(shape[d] for d in rest)))
        result = np.linalg.norm(x, ord=ord, axis=0)
    if keepdims:
        for d in axes:
            shape[d] = 1
        result = np.reshape(result, tuple(shape))
    return result


@decompose(np.linalg.matrix_norm)
def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """``np.linalg.matrix_norm``: ``np.linalg.norm`` over the last two axes."""
    x = _darray("matrix_norm", x)
    if x.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{x.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    return np.linalg.norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


@decompose(np.linalg.svdvals)
def svdvals(x: Any, /) -> Any:
    """``np.linalg.svdvals``: ``np.linalg.svd(x, compute_uv=False)``."""
    return np.linalg.svd(_darray("svdvals", x), compute_uv=False)
