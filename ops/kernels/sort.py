"""``np.sort`` of DArrays: a local sort where the axis is not sharded, a sample sort where it is.

Along a sharded axis of a 1-D array (Shard(0) over one or more mesh dims):

1. each rank sorts its block;
2. each rank picks ``p - 1`` regularly spaced samples; the samples of all
   ``p`` blocks are all-gathered (``p * (p - 1)`` values), sorted, and every
   ``p``-th becomes a splitter;
3. each rank cuts its sorted block at the splitters and an all-to-all sends
   piece ``q`` to block ``q``; each rank merges what it receives;
4. the blocks are now sorted and in order but uneven: a rebalance moves
   only the misplaced elements, so the result is balanced.

NaNs sort last, as in NumPy (``searchsorted`` orders them after every
number). For an N-D array sorted along a sharded axis, the sharding is first
moved to another dim (an all-to-all), then each block is sorted locally.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import collectives as coll
from collectives.errors import UnsupportedError
from dmesh.darray import DArray
from dmesh.indexing import selection
from dmesh.layout import Layout, sharding_mesh_dims
from dmesh.placement import Shard
from dmesh.spec import DArraySpec
from ops.registry import decompose


def _sample_sort(a: DArray, want_indices: bool) -> tuple[DArray, DArray | None]:
    """The sample sort of a 1-D DArray; with ``want_indices``, also the global indices.

    Stable: equal values keep their global order, because the received
    pieces arrive in block order and each is already in order.
    """
    mesh = a.mesh
    mesh_dims = sharding_mesh_dims(a.placements, 0)
    comm = mesh[mesh_dims].comm()  # rank order there is block order
    p = comm.Get_size()
    local = np.asarray(a.local)
    order = np.argsort(local, kind="stable")
    block = local[order]
    indices = order.astype(np.intp) + a.spec.offsets()[0]
    # Regular samples of the sorted block: p - 1 of them (fewer if it is short).
    if block.size:
        picks = np.linspace(0, block.size, p + 1)[1:-1].astype(np.int64)
        samples = block[np.minimum(picks, block.size - 1)]
    else:
        samples = block[:0]
    counts = coll.all_gather(np.array([samples.size], dtype=np.int64), 0, comm)
    everything = np.sort(coll.all_gather(samples, 0, comm, sizes=counts.tolist()), kind="stable")
    if everything.size:  # p - 1 splitters, every p-th sample
        chosen = np.linspace(0, everything.size, p + 1)[1:-1].astype(np.int64)
        splitters = everything[np.minimum(chosen, everything.size - 1)]
        edges = [0, *np.searchsorted(block, splitters, side="right").tolist(), block.size]
    else:  # one block (no splitters needed) or every block empty: nothing moves
        edges = [0] * p + [block.size]
    sizes = [edges[i + 1] - edges[i] for i in range(p)]
    received = coll.all_to_all(block, 0, 0, comm, split_sizes=sizes)
    merge = np.argsort(received, kind="stable")
    merged = received[merge]
    counts = coll.all_gather(np.array([merged.size], dtype=np.int64), 0, comm).tolist()
    bounds = tuple(int(b) for b in np.concatenate([[0], np.cumsum(counts)]))
    layout = Layout(mesh.shape, a.placements, a.shape, (bounds,))
    values = DArray(merged, DArraySpec(mesh, layout, merged.dtype)).rebalance()
    if not want_indices:
        return values, None
    moved = coll.all_to_all(indices, 0, 0, comm, split_sizes=sizes)[merge]
    positions = DArray(moved, DArraySpec(mesh, layout, moved.dtype)).rebalance()
    return values, positions


@decompose(np.sort)
def sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, **kwargs: Any) -> DArray:
    """``np.sort`` of a DArray (collective when the axis is sharded); the result is balanced."""
    if order is not None or kwargs:
        raise UnsupportedError("np.sort on DArrays supports axis and kind only")
    return _sort(a, axis, kind)


def _sort(a: Any, axis: Any, kind: Any, want_indices: bool = False) -> DArray:
    """Sorted values, or with ``want_indices`` the argsort (global indices along ``axis``)."""
    if axis is None:
        a = np.ravel(a)
        axis = 0
    axis = int(axis) % max(a.ndim, 1)
    a = a.reduce_partials()
    sharded = any(isinstance(p, Shard) and p.dim == axis for p in a.placements)
    if not sharded or a.mesh.coordinate is None:
        block = np.asarray(a.local)
        local = (np.argsort if want_indices else np.sort)(block, axis=axis, kind=kind)
        return DArray(local, DArraySpec(a.mesh, a.spec.layout, local.dtype))
    if a.ndim > 1:  # move the sharding to another dim, then sort each block
        other = 0 if axis != 0 else 1
        placements = [
            Shard(other) if isinstance(p, Shard) and p.dim == axis else p for p in a.placements
        ]
        return _sort(a.redistribute(a.mesh, placements), axis, kind, want_indices)
    values, positions = _sample_sort(a, want_indices)
    return positions if positions is not None else values


@decompose(np.argsort)
def argsort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, **kwargs: Any) -> DArray:
    """``np.argsort`` of a DArray: global indices, always stable (collective when sharded)."""
    if order is not None or kwargs:
        raise UnsupportedError("np.argsort on DArrays supports axis and kind only")
    return _sort(a, axis, "stable", want_indices=True)


@decompose(np.unique)
def unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: Any = None, *, equal_nan: bool = True,
           **kwargs: Any) -> DArray:  # fmt: skip
    """``np.unique`` of a DArray's values: sorted, duplicates removed (collective).

    The values are sample-sorted into balanced blocks; each rank drops the
    repeats inside its block and, with the last value of the block before
    (one neighbour message), a repeat across the edge. NaNs count as one
    value unless ``equal_nan=False``, as in NumPy.
    """
    if return_index or return_inverse or return_counts or axis is not None or kwargs:
        raise UnsupportedError(
            "np.unique on DArrays returns the unique values only (no return_*, no axis)"
        )
    ordered = _sort(np.ravel(ar), 0, None)
    values = np.asarray(ordered.local)
    same = values[1:] == values[:-1]
    if equal_nan and values.dtype.kind in "fc":
        same |= np.isnan(values[1:]) & np.isnan(values[:-1])
    keep = np.ones(values.size, dtype=bool)
    keep[1:] = ~same
    mesh_dims = sharding_mesh_dims(ordered.placements, 0)
    if mesh_dims and ordered.mesh.coordinate is not None:
        mesh = ordered.mesh
        comm = mesh[mesh_dims].comm()
        # Balanced blocks: the non-empty ones come first, so the block before a
        # non-empty one is non-empty too.
        last = values[-1:] if values.size else np.zeros(1, values.dtype)
        shift = [(r, r + 1) for r in range(comm.Get_size() - 1)]
        before = coll.permute(last, shift, comm)
        if before is not None and values.size:
            repeat = before[0] == values[0] or (
                equal_nan
                and values.dtype.kind in "fc"
                and np.isnan(before[0])
                and np.isnan(values[0])
            )
            keep[0] = not repeat
    return selection(ordered, values[keep])
