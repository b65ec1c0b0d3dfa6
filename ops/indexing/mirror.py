"""Mirrored blocks: a sharded dim read backwards (``a[::-1]``, ``np.flip``).

Reversing a sharded dim reverses the order of its blocks: block ``j`` of
``k`` goes, reversed, to the holder of block ``k - 1 - j`` (one message per
non-empty block over the mesh dims that shard the dim; nothing is gathered).
The boundaries are mirrored too, so uneven blocks stay uneven.
"""

from __future__ import annotations

import dmesh.collectives as coll
from dmesh.collectives.device import array_module
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = ["mirror_blocks", "mirrored_layout"]


def mirrored_layout(layout: Layout, dim: int) -> Layout:
    """``layout`` with the boundaries of ``dim`` mirrored: block ``j`` gets ``k-1-j``'s size."""
    cut = layout.bounds[dim]
    if cut is None:
        return layout
    k, n = len(cut) - 1, layout.shape[dim]
    bounds = list(layout.bounds)
    bounds[dim] = tuple(n - cut[k - j] for j in range(k + 1))
    return Layout(layout.mesh_shape, layout.placements, layout.shape, tuple(bounds))


def mirror_blocks(a: DArray, dim: int) -> DArray:
    """``a`` reversed along ``dim``, which mesh dims shard: block ``j`` moves to ``k - 1 - j``.

    Each block is reversed and sent to the holder of its mirror, one message
    per non-empty block over the mesh dims that shard ``dim`` (whose rank order
    is block order, nested shardings included); the middle block of an odd
    ``k`` is reversed in place (a copy). Partial placements on other mesh dims
    stay: each term moves with its block. Collective over those mesh dims.
    """
    layout = a.spec.layout
    spec = DArraySpec(a.mesh, mirrored_layout(layout, dim), a.dtype)
    coord = a.mesh.coordinate
    if coord is None:  # not a member: an empty block, no message
        return DArray(a.local, spec)
    xp = array_module(a.local)
    sizes = layout.sizes(dim)
    k = len(sizes)
    j = layout.block_number(coord, dim)
    block = xp.flip(a.local, dim)
    shape = list(block.shape)
    shape[dim] = sizes[k - 1 - j]
    pairs = [(i, k - 1 - i) for i in range(k) if sizes[i] and i != k - 1 - i]
    got = None
    if pairs:  # every rank of the group knows the sizes, so all skip alike
        comm = a.mesh[sharding_mesh_dims(a.placements, dim)].comm()
        got = coll.permute(block, pairs, comm, recv_shape=shape)
    if got is None:
        got = block.copy() if k - 1 - j == j else xp.empty(tuple(shape), a.dtype)
    return DArray(got, spec)
