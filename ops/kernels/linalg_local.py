"""``np.linalg`` on replicated matrices: ``solve`` and the functions every rank computes locally.

**Local functions.** ``solve_replicated(a, b)`` takes a replicated ``a``;
``b`` may stay sharded along its columns (or along its stack dims when ``a``
is one matrix): every rank solves its block. ``inv``, ``det``, ``eig`` and the
others in :data:`LOCAL_ONLY` are computed by every rank from replicated
arguments (:func:`compute_locally`). Sharded matrices reach these through
:mod:`dmesh.ops.kernels.solvers`, which replicates a small one first (below
its gather threshold) or factors a large one on the mesh.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels.linalg_operands import is_sharded, replicated

__all__ = ["LOCAL_ONLY", "REPLICATED_MATRIX", "compute_locally", "solve_replicated", "stand_in"]

# Functions computed only from replicated arguments (every rank computes locally).
LOCAL_ONLY = (
    np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.eig, np.linalg.eigh,
    np.linalg.eigvals, np.linalg.eigvalsh, np.linalg.cholesky, np.linalg.pinv,
    np.linalg.matrix_rank, np.linalg.cond,
)  # fmt: skip
# Functions whose (first) matrix argument must not be sharded: none since every one
# takes a sharded matrix (replicated below the gather threshold, see solvers.py).
REPLICATED_MATRIX: tuple[Any, ...] = ()


def solve_replicated(a: Any, b: Any) -> Any:
    """``np.linalg.solve`` with a replicated matrix ``a``: every rank solves its block of ``b``.

    ``b`` keeps its sharding along its columns (and along stack dims when
    ``a`` is one matrix); a sharded system axis is replicated first (it is
    as long as ``a`` is wide).
    """
    if not isinstance(b, DArray):
        return compute_locally(np.linalg.solve, "solve", (a.reduce_partials(), b), {})
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    size = a.shape[-1]
    system = 0 if b.ndim == 1 else b.ndim - 2
    if b.shape[system] != size:
        raise ArgumentError(
            f"np.linalg.solve: b has {b.shape[system]} rows along its axis {system}, a is "
            f"{size} x {size}"
        )
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if b.ndim > 1 else a.shape[:-2]
    # Axes whose blocks solve apart: b's columns, and its stack dims when a is one matrix.
    kept: set[int] = set()
    if b.ndim > 1:
        kept = {b.ndim - 1} | (set(range(b.ndim - 2)) if a.ndim == 2 else set())
    a, b = a.reduce_partials(), b.reduce_partials()
    if not is_sharded(b):
        return compute_locally(np.linalg.solve, "solve", (a, b), {})
    placements = tuple(
        p if not isinstance(p, Shard) or p.dim in kept else Replicate() for p in b.placements
    )
    bounds = tuple(
        b.spec.layout.bounds[d] if sharding_mesh_dims(placements, d) else None
        for d in range(b.ndim)
    )
    b = b.with_layout(Layout(b.mesh.shape, placements, b.shape, bounds))
    shape = (*batch, *b.shape[system:])
    shift = len(shape) - b.ndim
    out_placements: tuple[Placement, ...] = tuple(
        Shard(p.dim + shift) if isinstance(p, Shard) else p for p in placements
    )
    layout = Layout(b.mesh.shape, out_placements, shape, (None,) * shift + bounds)
    dtype = np.linalg.solve(np.eye(1, dtype=a.dtype), np.ones((1, 1), b.dtype)).dtype
    spec = DArraySpec(b.mesh, layout, dtype)
    if not b.mesh.is_member:
        return DArray(np.empty(spec.local_shape(), dtype), spec)
    if b.local.size == 0:  # solve nothing, but a singular a raises here as on the other ranks
        np.linalg.solve(a.local, np.ones((*a.shape[:-1], 1), b.dtype))
    x = np.linalg.solve(a.local, b.local).astype(dtype, copy=False)
    return DArray(x.reshape(spec.local_shape()), spec)


def compute_locally(func: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func`` on replicated DArray arguments: computed on every rank, results replicated."""
    mesh = next(x.mesh for x in (*args, *kwargs.values()) if isinstance(x, DArray))

    def block(x: Any) -> Any:
        if not isinstance(x, DArray):
            return x
        # Outside the mesh there is no data: stand-ins of the same shapes give the specs.
        return x.local if mesh.is_member else stand_in(x)

    result = func(*[block(x) for x in args], **{k: block(v) for k, v in kwargs.items()})
    return _wrap(result, mesh)


def stand_in(x: DArray) -> Any:
    """A well-conditioned array of ``x``'s shape and dtype (ones, or identity matrices).

    Ranks outside the mesh, which hold no data, call the local NumPy function
    on it so that they learn the result's shape and dtype without data.
    """
    if x.ndim < 2:
        return np.ones(x.shape, x.dtype)
    return np.broadcast_to(np.eye(x.shape[-2], x.shape[-1], dtype=x.dtype), x.shape).copy()


def _wrap(result: Any, mesh: Any) -> Any:
    if isinstance(result, tuple):
        items = [_wrap(item, mesh) for item in result]
        return type(result)(*items) if hasattr(result, "_fields") else tuple(items)
    return replicated(result, mesh)
