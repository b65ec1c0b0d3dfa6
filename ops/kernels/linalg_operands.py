"""Arguments and results of ``np.linalg`` on DArrays: the checks, dtypes and layouts kernels share.

Every check reads shapes and specs only, so errors are raised on every rank
before any message.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentTypeError, ShardingError, UnsupportedError
from dmesh.context import implicit_replication_active
from dmesh.convert import distribute
from dmesh.core.layout import Layout
from dmesh.core.placement import Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = [
    "SUPPORTED",
    "by_rows",
    "is_sharded",
    "linalg_dtypes",
    "matrix",
    "operands",
    "replicated",
    "rows_layout",
    "sharded_error",
    "stack_error",
]

SUPPORTED = (
    "on DArrays, np.linalg computes qr, lstsq and svd of a tall matrix with sharded rows "
    "(TSQR); solve, inv, det, slogdet and cholesky of a sharded matrix (replicated below "
    "dmesh.ops.kernels.solvers.GATHER_THRESHOLD elements, blocked above it); the other "
    "functions (eig, eigh, pinv, ...) of a sharded matrix below that threshold"
)


def operands(name: str, args: tuple[Any, ...]) -> list[Any]:
    """The arguments with plain arrays made replicated DArrays (or refused, as dispatch does)."""
    mesh = next((x.mesh for x in args if isinstance(x, DArray)), None)
    if mesh is None:
        return list(args)
    out = []
    for i, x in enumerate(args):
        if isinstance(x, DArray):
            if x.mesh is not mesh:
                raise ShardingError(
                    f"np.linalg.{name}: operands 0 and {i} are on different meshes ({mesh!r} "
                    f"and {x.mesh!r}); redistribute one onto the other's mesh first"
                )
        elif isinstance(x, np.ndarray) and x.ndim:
            if not implicit_replication_active():
                raise ArgumentTypeError(
                    f"np.linalg.{name}: operand {i} is a {type(x).__name__} of shape {x.shape}, "
                    "mixed with DArrays; make it a DArray first, e.g. dmesh.distribute(x, mesh, "
                    "placements), or use it inside `with dmesh.implicit_replication():`"
                )
            x = distribute(x, mesh, [Replicate()] * mesh.ndim)
        out.append(x)
    return out


def is_sharded(x: Any) -> bool:
    """Whether ``x`` is a DArray with a ``Shard`` placement on some mesh dim."""
    return isinstance(x, DArray) and any(isinstance(p, Shard) for p in x.placements)


def sharded_error(name: str, x: DArray) -> UnsupportedError:
    """The error for ``np.linalg.<name>`` of a sharded DArray: what works, how to replicate."""
    return UnsupportedError(
        f"np.linalg.{name} of a sharded DArray ({x.spec!r}) is not supported: {SUPPORTED}. "
        "Replicate a small matrix first: x.redistribute(x.mesh, [Replicate()] * x.mesh.ndim)"
    )


def linalg_dtypes(*dtypes: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(computation dtype, result dtype), chosen as NumPy's linalg does."""
    single, is_complex = True, False
    for dtype in dtypes:
        if dtype.kind in "fc":
            if dtype.itemsize not in ((4, 8) if dtype.kind == "f" else (8, 16)):
                raise ArgumentTypeError(f"array type {dtype} is unsupported in linalg")
            is_complex |= dtype.kind == "c"
            single &= dtype.itemsize == (4 if dtype.kind == "f" else 8)
        else:
            single = False
    compute = np.dtype(np.complex128 if is_complex else np.float64)
    result = np.dtype(np.complex64 if is_complex else np.float32) if single else compute
    return compute, result


def replicated(value: Any, mesh: Any) -> DArray:
    """``value`` (the same on every rank) as a replicated DArray; empty outside the mesh."""
    value = value if hasattr(value, "shape") and not np.isscalar(value) else np.asarray(value)
    layout = Layout.balanced(mesh.shape, (Replicate(),) * mesh.ndim, tuple(value.shape))
    spec = DArraySpec(mesh, layout, np.dtype(value.dtype))
    if not mesh.is_member:
        value = np.empty(spec.local_shape(), value.dtype)
    return DArray(value, spec)


def rows_layout(a: DArray, shape: tuple[int, ...]) -> Layout:
    """The layout of an array of ``shape`` whose dim 0 is cut like ``a``'s rows."""
    placements = tuple(Shard(0) if p == Shard(0) else Replicate() for p in a.placements)
    bounds = (a.spec.layout.bounds[0],) + (None,) * (len(shape) - 1)
    return Layout(a.mesh.shape, placements, shape, bounds)


def by_rows(a: DArray) -> DArray:
    """``a`` (2-D, no Partial) with every sharding mesh dim on its rows."""
    if any(p == Shard(1) for p in a.placements):  # an all-to-all moves them to the rows
        return a.redistribute(a.mesh, [Shard(0) if p == Shard(1) else p for p in a.placements])
    return a


def matrix(name: str, a: Any) -> DArray:
    """``a`` checked as NumPy checks a matrix argument (on its spec: every rank agrees)."""
    if not isinstance(a, DArray):
        raise ArgumentTypeError(f"np.linalg.{name}: expected a DArray matrix, got {type(a)}")
    if a.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{a.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    linalg_dtypes(a.dtype)
    return a


def stack_error(name: str, a: DArray) -> UnsupportedError:
    """The error for ``np.linalg.<name>`` of a stack of matrices sharded along the stack."""
    return UnsupportedError(
        f"np.linalg.{name} of a sharded stack of matrices ({a.spec!r}) is not supported; "
        f"{SUPPORTED}"
    )
