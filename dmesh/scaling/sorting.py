"""Traffic of ``np.sort``, ``np.argsort`` and ``np.unique`` on DArrays (pure).

Along an axis no mesh dim of more than one rank shards, each rank sorts its
blocks: no message.
An N-D array sorted along a sharded axis first gives that sharding to
another dim (``S(axis) -> S(other)``, one ``all_to_all`` per sharding mesh
dim, as in ``dmesh.scaling.redistribution``), then sorts locally. A 1-D array
sharded along its axis over ``k`` ranks (the mesh dims that shard it) takes
the sample sort of ``dmesh/ops/kernels/sort.py``, whose calls are, in order:

1. ``all_gather`` of each block's sample count (8 bytes in, ``8 k`` out);
2. ``all_gather`` of the samples: ``k - 1`` values per non-empty block;
3. ``all_to_all`` of the sorted block, cut at the ``k - 1`` splitters:
   ``n_r s`` bytes in (the whole block, the piece kept included) and
   ``m_r s`` out, where ``m_r`` is how many elements land on block ``r``
   (data-dependent: :func:`sample_sort_counts` follows dmesh's splitters);
4. ``all_gather`` of the new block lengths ``m_r`` (8 bytes, ``8 k``);
5. the rebalance of the blocks ``m_r`` to balanced ones when any ``m_r`` is
   off balance: a transfer, one ``all_to_all`` over the whole mesh, of
   ``(m_r - k_r) s`` bytes in and ``(n/k - k_r) s`` out, ``k_r`` the
   elements the rank keeps (copied locally, not sent).

``argsort`` (and ``unique`` with ``return_index`` or ``return_inverse``)
carries the 8-byte global indices through steps 3 and 5 as well.
``np.partition``/``np.argpartition`` of a 1-D sharded array are the sort
and the stable argsort (same traffic).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Shard
from dmesh.scaling.redistribution import layout_traffic
from dmesh.scaling.traffic import Call, Traffic, block_sizes, per_rank

__all__ = ["argsort", "sample_sort_counts", "sort", "unique"]

INDEX = np.dtype(np.intp).itemsize  # the global indices argsort carries


def sample_sort_counts(
    values: np.ndarray, parts: int, lengths: Sequence[int] | None = None
) -> np.ndarray:
    """``counts[i, j]``: the elements block ``i`` sends block ``j`` in dmesh's sample sort.

    ``values`` is the whole array, flattened, cut into ``parts`` blocks of
    ``lengths`` (default: balanced, as ``distribute`` cuts a 1-D array; an
    N-D array with dim 0 sharded flattens to row blocks). Each block is
    sorted and gives ``parts - 1`` regularly spaced samples (at positions
    ``j b / parts``, ``j = 1 .. parts-1``, of its ``b`` elements); every
    ``parts``-th of the sorted samples (index ``i (parts-1)``) is splitter
    ``i``; block ``i`` sends block ``j`` its elements above splitter ``j``
    and at most splitter ``j + 1``. ``counts.sum(axis=0)`` is what
    :func:`sort` takes as ``received``. Uniform random data: about
    ``n / parts^2`` each. Sorted data: the splitters fall ``n / parts^2``
    past the block edges, so each block sends its first ``n / parts^2``
    elements to the block before. At worst (all values equal) every block
    sends all its elements to block 0.
    """
    flat = np.asarray(values).reshape(-1)
    p = parts
    cuts = np.cumsum((0, *(block_sizes(flat.size, p) if lengths is None else lengths)))
    blocks = [np.sort(flat[cuts[i] : cuts[i + 1]], kind="stable") for i in range(p)]
    samples = []
    for block in blocks:
        if block.size:
            picks = np.linspace(0, block.size, p + 1)[1:-1].astype(np.int64)
            samples.append(block[np.minimum(picks, block.size - 1)])
    everything = np.sort(np.concatenate([flat[:0], *samples]), kind="stable")
    counts = np.zeros((p, p), dtype=np.int64)
    for i, block in enumerate(blocks):
        if everything.size:
            chosen = np.linspace(0, everything.size, p + 1)[1:-1].astype(np.int64)
            splitters = everything[np.minimum(chosen, everything.size - 1)]
            edges = [0, *np.searchsorted(block, splitters, side="right").tolist(), block.size]
        else:
            edges = [0] * p + [block.size]
        counts[i] = np.diff(edges)
    return counts


def _sample_sort_calls(
    layout: Layout, itemsize: int, received: Sequence[int], indices: bool
) -> list[Traffic]:
    """Every rank's calls in the sample sort of the 1-D array in ``layout``."""
    mesh_shape = layout.mesh_shape
    dims = sharding_mesh_dims(layout.placements, 0)
    k = math.prod(mesh_shape[m] for m in dims)
    n = layout.shape[0]
    if len(received) != k or sum(received) != n:
        raise ValueError(
            f"sort: received must give each of the {k} blocks' element counts, summing to "
            f"{n}; got {list(received)}"
        )
    if k == 1:  # one block: its own sort, no message
        return per_rank(mesh_shape, lambda coord: ())
    sizes = layout.sizes(0)
    samples = [k - 1 if size else 0 for size in sizes]
    cut = tuple(int(b) for b in np.cumsum((0, *received)))
    bounds = (cut, *layout.bounds[1:])
    merged = Layout(mesh_shape, layout.placements, layout.shape, bounds)
    balanced = Layout.balanced(mesh_shape, layout.placements, layout.shape)
    values = layout_traffic(merged, balanced, itemsize)
    positions = layout_traffic(merged, balanced, INDEX)

    def calls_at(coord: tuple[int, ...]) -> list[Call]:
        me = int(np.ravel_multi_index(coord, mesh_shape)) if coord else 0
        g = layout.block_number(coord, 0)
        held, got = sizes[g], received[g]
        calls = [
            Call("all_gather", k, 8, 8 * k),
            Call("all_gather", k, samples[g] * itemsize, sum(samples) * itemsize),
            Call("all_to_all", k, held * itemsize, got * itemsize),
            Call("all_gather", k, 8, 8 * k),
            *values[me],
        ]
        if indices:
            calls += [Call("all_to_all", k, held * INDEX, got * INDEX), *positions[me]]
        return calls

    return per_rank(mesh_shape, calls_at)


def _sort_traffic(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    placements: Sequence[Placement],
    axis: int | None,
    received: Sequence[int] | None,
    indices: bool,
) -> list[Traffic]:
    mesh_shape, placements = tuple(mesh_shape), tuple(placements)
    if axis is None:
        if len(shape) != 1:
            raise ValueError("sort: axis=None is modelled for 1-D arrays (ravel's move aside)")
        axis = 0
    axis %= max(len(shape), 1)
    layout = Layout.balanced(mesh_shape, placements, tuple(shape))
    if math.prod(mesh_shape[m] for m in sharding_mesh_dims(placements, axis)) == 1:
        return per_rank(mesh_shape, lambda coord: ())  # one block along the axis sorts alone
    if len(shape) > 1:  # the sharding moves to another dim; then each block sorts alone
        other = 0 if axis != 0 else 1
        moved = tuple(Shard(other) if isinstance(p, Shard) and p.dim == axis else p
                      for p in placements)  # fmt: skip
        return layout_traffic(layout, Layout.balanced(mesh_shape, moved, tuple(shape)), itemsize)
    if received is None:
        raise ValueError("sort: a 1-D sharded array needs received (see sample_sort_counts)")
    return _sample_sort_calls(layout, itemsize, received, indices)


def sort(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    placements: Sequence[Placement],
    axis: int | None = -1,
    received: Sequence[int] | None = None,
) -> list[Traffic]:
    """Every rank's calls in ``np.sort(a, axis)`` of a balanced ``a`` (Shard/Replicate placements).

    Axis not sharded: none. N-D, axis sharded: ``S(axis) -> S(other)``
    (``other`` is 0, or 1 for axis 0): one ``all_to_all`` of the block per
    sharding mesh dim. 1-D sharded over ``k`` ranks: the sample sort (see the
    module), where ``received[r]`` is how many elements land on block ``r``
    (``sample_sort_counts(values, k).sum(axis=0)``). Even blocks of ``n/k``
    elements of ``s`` bytes on a 1-D mesh (``k = p``), when the rebalance
    moves: calls ``3 all_gather + 2 all_to_all``, bytes sent
    ``16 + (k-1) s + (n/k + m_r) s``; uniform data (``m_r ~ n/k``) take
    ``3 L alpha + 2 (k-1) alpha + (16 (k-1) + (k-1)^2 s + 2 (k-1)/k^2 n s) beta``
    (``L = ceil(log2 k)``; on a 2-D mesh the rebalance runs over all ``p``
    ranks). Worst case (all values equal, one
    block receives all): its all_to_all receives ``n s``, its rebalance sends it.
    """
    return _sort_traffic(mesh_shape, shape, itemsize, placements, axis, received, False)


def argsort(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    placements: Sequence[Placement],
    axis: int | None = -1,
    received: Sequence[int] | None = None,
) -> list[Traffic]:
    """Every rank's calls in ``np.argsort(a, axis)``: :func:`sort`'s, and for a 1-D sharded ``a``
    the 8-byte global indices too (an ``all_to_all`` of ``n_r`` of them in and ``m_r`` out,
    then their rebalance): ``3 all_gather + 4 all_to_all``, ``(n/k + m_r)(s + 8)`` bytes
    sent per rank beside the counts and samples."""
    return _sort_traffic(mesh_shape, shape, itemsize, placements, axis, received, True)


def unique(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    placements: Sequence[Placement],
    received: Sequence[int] | None = None,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
) -> list[Traffic]:
    """Every rank's calls in ``np.unique(a, return_index, return_inverse, return_counts)``.

    ``a`` is flattened (a view: ``a`` is 1-D or has only dim 0 sharded; other
    layouts first pay ``np.ravel``'s move, not modelled here: ``ValueError``).
    With no mesh dim sharding it, each rank does it all: no message. Else,
    over the ``k`` ranks sharding it: the sample sort of the flat array
    (:func:`argsort`'s calls with ``return_index`` or ``return_inverse``,
    :func:`sort`'s otherwise; ``received`` from :func:`sample_sort_counts`
    of the flat values and its block lengths), then two ``all_gather``: each
    block's first and last value (``2 s`` in, ``2 k s`` out) and three int64
    (``24``, ``24 k``). ``return_inverse`` adds one ``all_to_all`` of 16-byte
    ``(position, id)`` pairs: ``16 n/k`` in and out (the sorted block in,
    the original block out). The number of distinct values does not change
    the traffic: the results keep uneven blocks and ``return_counts`` is
    computed from the shared counts.
    """
    mesh_shape, shape = tuple(mesh_shape), tuple(shape)
    layout = Layout.balanced(mesh_shape, tuple(placements), shape)
    if any(isinstance(p, Shard) and p.dim != 0 for p in layout.placements):
        raise ValueError("unique: only layouts whose ravel is a view (dim 0 sharded) are modelled")
    row = math.prod(shape[1:])
    cut = layout.bounds[0] if shape else None
    flat_bounds = (None if cut is None else tuple(b * row for b in cut),)
    flat = Layout(mesh_shape, layout.placements, (math.prod(shape),), flat_bounds)
    dims = sharding_mesh_dims(flat.placements, 0)
    if not dims:
        return per_rank(mesh_shape, lambda coord: ())
    if received is None:
        raise ValueError("unique: a sharded array needs received (see sample_sort_counts)")
    k = math.prod(mesh_shape[m] for m in dims)
    positions = return_index or return_inverse
    sorting = _sample_sort_calls(flat, itemsize, received, positions)
    balanced = Layout.balanced(mesh_shape, flat.placements, flat.shape)

    def calls_at(coord: tuple[int, ...]) -> list[Call]:
        me = int(np.ravel_multi_index(coord, mesh_shape)) if coord else 0
        calls = [
            *sorting[me],
            Call("all_gather", k, 2 * itemsize, 2 * k * itemsize),
            Call("all_gather", k, 24, 24 * k),
        ]
        if return_inverse and flat.shape[0]:
            mine = 2 * INDEX * balanced.local_shape(coord)[0]
            theirs = 2 * INDEX * flat.local_shape(coord)[0]
            calls.append(Call("all_to_all", k, mine, theirs))
        return calls

    return per_rank(mesh_shape, calls_at)
