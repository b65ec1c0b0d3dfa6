"""A block and its neighbours' cells along one axis: the window of a stencil.

Differences (``np.gradient``, ``np.ediff1d``) and 1-D convolutions compute
each output from a few consecutive inputs along one axis. Each rank computes
the outputs of its own block with NumPy on its block extended by the cells of
the neighbouring blocks (:func:`dmesh.halo`, two messages per sharded mesh
dim), so no rank ever holds more than its block and a few cells.

Only real cells are kept: at the global edges the window stops where the
array does (a zero of the halo's padding would turn ``inf * 0`` into NaN or
change a zero's sign where NumPy uses a shorter sum), and the caller, which
knows the window's global offset, computes exactly what NumPy computes there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import UnsupportedError
from dmesh.core.layout import sharding_mesh_dims
from dmesh.core.placement import Shard, shorts
from dmesh.darray import DArray
from dmesh.halo import halo

__all__ = ["Window", "window"]


@dataclass(frozen=True)
class Window:
    """This rank's block of ``[lo, hi)`` along the axis, and the real cells around it.

    ``cells`` holds global positions ``[start, stop)`` along the axis
    (``start = max(0, lo - before)``, ``stop = min(n, hi + after)``); the
    other axes are the block's own.
    """

    cells: Any
    start: int
    lo: int
    hi: int
    n: int


def _fits(sizes: tuple[int, ...], before: int, after: int) -> bool:
    """Whether each block can give its neighbours the cells the halo asks of it."""
    k = len(sizes)
    return all(
        size >= max(before if i < k - 1 else 0, after if i > 0 else 0)
        for i, size in enumerate(sizes)
    )


def window(a: DArray, axis: int, before: int, after: int, name: str) -> tuple[DArray, Window]:
    """``a`` (partials reduced, rebalanced if its blocks were too thin) and this rank's window.

    Collective. Blocks thinner than the cells they must pass on are first
    rebalanced (one redistribution); if even balanced blocks are too thin
    (fewer than ``before``/``after`` elements per block), ``UnsupportedError``
    is raised on every rank before any message (every rank knows the layout).
    """
    a = a.reduce_partials()
    # (one block along the axis, as on a mesh dim of one rank: nothing to exchange)
    sharded = bool(sharding_mesh_dims(a.placements, axis)) and len(a.spec.layout.sizes(axis)) > 1
    if sharded and not _fits(a.spec.layout.sizes(axis), before, after):
        balanced = type(a.spec.layout).balanced(a.mesh.shape, a.placements, a.shape)
        if not _fits(balanced.sizes(axis), before, after) and a.ndim > 1:
            # Too many blocks for this axis: another axis takes its sharding (an all-to-all).
            target = max((d for d in range(a.ndim) if d != axis), key=lambda d: a.shape[d])
            moved = [Shard(target) if p == Shard(axis) else p for p in a.placements]
            a = a.redistribute(a.mesh, moved)
            return window(a, axis, before, after, name)
        if not _fits(balanced.sizes(axis), before, after):
            raise UnsupportedError(
                f"{name}: axis {axis} of length {a.shape[axis]} is cut into "
                f"{len(balanced.sizes(axis))} blocks ({shorts(a.placements)}), too thin to pass "
                f"on the {max(before, after)} neighbouring cells each output needs; shard fewer "
                "blocks along it (or replicate it: a.redistribute(mesh, [Replicate()] * "
                "mesh.ndim))"
            )
        a = a.rebalance()
    n = a.shape[axis]
    coord = a.mesh.coordinate
    if coord is None:  # not a member: an empty block, nothing exchanged
        return a, Window(a.local, 0, 0, 0, n)
    lo, hi = a.spec.layout.block(coord)[axis]
    widths = [(0, 0)] * a.ndim
    widths[axis] = (before, after) if sharded else (0, 0)
    padded = halo(a, widths) if sharded else a.local
    got_before = before if sharded else 0
    start, stop = max(0, lo - got_before), min(n, hi + (after if sharded else 0))
    first = got_before - (lo - start)
    key = [slice(None)] * a.ndim
    key[axis] = slice(first, first + stop - start)
    cells = padded[tuple(key)]
    if not sharded:  # the block holds the whole axis
        start, stop = 0, n
    return a, Window(array_module(cells).ascontiguousarray(cells), start, lo, hi, n)


def take(block: Any, axis: int, index: Any) -> Any:
    """``block[..., index, ...]`` with ``index`` on ``axis``."""
    key = [slice(None)] * np.ndim(block)
    key[axis] = index
    return block[tuple(key)]
