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

``np.argsort`` carries the global indices through the same sort (always
stable). ``np.unique`` (``axis=None``) sorts the flattened values with their
indices and finds the runs of equal values across block edges from a few
numbers per rank; see :func:`unique`.
"""

from __future__ import annotations

import operator
from typing import Any, cast

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.errors import AxisArgumentError, UnsupportedError
from dmesh.convert import blocks_on_host, blocks_to
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose


def _sample_sort(
    a: DArray, want_indices: bool, stable: bool = True
) -> tuple[DArray, DArray | None]:
    """The sample sort of a 1-D DArray; with ``want_indices``, also the global indices.

    Stable (``stable``): equal values keep their global order, because the
    received pieces arrive in block order and each is already in order. Without
    it each block's indices are sorted by NumPy's default argsort (introsort,
    several times faster than the stable one on random data), and equal values
    may come in any order, as NumPy's default argsort allows.
    """
    mesh = a.mesh
    mesh_dims = sharding_mesh_dims(a.placements, 0)
    comm = mesh[mesh_dims].comm()  # rank order there is block order
    p = comm.Get_size()
    local = np.asarray(a.local)
    if want_indices:
        order = np.argsort(local, kind="stable" if stable else None)
        block = local[order]
        indices = order.astype(np.intp) + a.spec.offsets()[0]
        if p == 1:  # one block along the axis: its sort is the answer (no merge, no message)
            return DArray(block, a.spec), DArray(
                indices, DArraySpec(mesh, a.spec.layout, indices.dtype)
            )
    elif p == 1:
        block = np.sort(local)
        return DArray(block, a.spec), None
    else:  # values alone: NumPy's fastest sort (SIMD), no permutation to carry; equal
        block = np.sort(local)  # values are alike (a zero's sign: NumPy's own order is arbitrary)
    # Regular samples of the sorted block: p - 1 of them (fewer if it is short).
    if block.size:
        picks = np.linspace(0, block.size, p + 1)[1:-1].astype(np.int64)
        samples = block[np.minimum(picks, block.size - 1)]
    else:
        samples = block[:0]
    counts = coll.all_gather(
        np.array([samples.size], dtype=np.int64), 0, comm, sizes=[1] * comm.Get_size()
    )
    everything = np.sort(coll.all_gather(samples, 0, comm, sizes=counts.tolist()), kind="stable")
    if everything.size:  # p - 1 splitters, every p-th sample
        chosen = np.linspace(0, everything.size, p + 1)[1:-1].astype(np.int64)
        splitters = everything[np.minimum(chosen, everything.size - 1)]
        edges = [0, *np.searchsorted(block, splitters, side="right").tolist(), block.size]
    else:  # one block (no splitters needed) or every block empty: nothing moves
        edges = [0] * p + [block.size]
    sizes = [edges[i + 1] - edges[i] for i in range(p)]
    received = coll.all_to_all(block, 0, 0, comm, split_sizes=sizes)
    # The received pieces are sorted runs in block order: a stable sort merges them
    # (timsort's runs), and with the permutation the positions follow.
    merge = np.argsort(received, kind="stable") if want_indices else None
    merged = received[merge] if merge is not None else np.sort(received, kind="stable")
    counts = coll.all_gather(
        np.array([merged.size], dtype=np.int64), 0, comm, sizes=[1] * comm.Get_size()
    ).tolist()
    bounds = tuple(int(b) for b in np.concatenate([[0], np.cumsum(counts)]))
    layout = Layout(mesh.shape, a.placements, a.shape, (bounds,))
    values = DArray(merged, DArraySpec(mesh, layout, merged.dtype)).rebalance()
    if not want_indices:
        return values, None
    moved = coll.all_to_all(indices, 0, 0, comm, split_sizes=sizes)[merge]
    positions = DArray(moved, DArraySpec(mesh, layout, moved.dtype)).rebalance()
    return values, positions


def _kind(kind: Any, stable: Any) -> Any:
    """NumPy 2's ``stable=``: True is ``kind="stable"``; both given is NumPy's ValueError."""
    if stable is None:
        return kind
    if kind is not None:
        raise ValueError("`kind` and keyword parameters can't be provided at the same time. "
                         "Use only one of them.")  # fmt: skip
    return "stable" if stable else None


@decompose(np.sort)
def sort(
    a: Any,
    axis: Any = -1,
    kind: Any = None,
    order: Any = None,
    *,
    stable: Any = None,
    **kwargs: Any,
) -> DArray:
    """``np.sort`` of a DArray (collective when the axis is sharded); the result is balanced."""
    return _entry("sort", a, axis, kind, order, stable, kwargs, False)


def _entry(name: str, a: Any, axis: Any, kind: Any, order: Any, stable: Any,
           kwargs: dict[str, Any], want_indices: bool) -> DArray:  # fmt: skip
    """np.sort/np.argsort: the arguments checked (on every rank, before any message), then
    :func:`_sort` of the host blocks."""
    if order is not None or kwargs:
        raise UnsupportedError(f"np.{name} on DArrays supports axis, kind and stable only")
    kind = _kind(kind, stable)
    host, xp = blocks_on_host(a)
    result: DArray = blocks_to(_sort(host, axis, kind, want_indices), xp)
    return result


def _sort(a: Any, axis: Any, kind: Any, want_indices: bool = False) -> DArray:
    """Sorted values, or with ``want_indices`` the argsort (global indices along ``axis``)."""
    if axis is None:
        a = np.ravel(a)
        axis = 0
    axis = operator.index(axis)
    if not -a.ndim <= axis < a.ndim:  # NumPy's AxisError (a 0-d array has no axis -1)
        raise AxisArgumentError(axis, a.ndim)
    axis %= a.ndim
    a = a.reduce_partials()
    sharded = any(
        isinstance(p, Shard) and p.dim == axis and a.mesh.shape[m] > 1
        for m, p in enumerate(a.placements)
    )
    if not sharded or a.mesh.coordinate is None:  # one block along the axis: NumPy's own sort
        block = np.asarray(a.local)
        local = (np.argsort if want_indices else np.sort)(block, axis=axis, kind=kind)
        return DArray(local, DArraySpec(a.mesh, a.spec.layout, local.dtype))
    if a.ndim > 1:  # move the sharding to another dim, then sort each block
        other = 0 if axis != 0 else 1
        placements = [
            Shard(other) if isinstance(p, Shard) and p.dim == axis else p for p in a.placements
        ]
        return _sort(a.redistribute(a.mesh, placements), axis, kind, want_indices)
    values, positions = _sample_sort(a, want_indices, kind in ("stable", "mergesort"))
    return positions if positions is not None else values


@decompose(np.argsort)
def argsort(
    a: Any,
    axis: Any = -1,
    kind: Any = None,
    order: Any = None,
    *,
    stable: Any = None,
    **kwargs: Any,
) -> DArray:
    """``np.argsort`` of a DArray: global indices (collective when sharded).

    Along a sharded axis, stable for ``kind="stable"``/``"mergesort"`` (NumPy 2's
    ``stable=True``); otherwise ties may come in any order, as NumPy's default
    allows, and each block is sorted by the faster introsort. NumPy's own ``kind``
    where one block holds the axis, so that ties are ordered as NumPy orders them
    on one process.
    """
    return _entry("argsort", a, axis, kind, order, stable, kwargs, True)


@decompose(np.unique)
def unique(ar: Any, *args: Any, **kwargs: Any) -> Any:
    """``np.unique`` of a DArray; see :func:`_unique` (device blocks are sorted on the host)."""
    host, xp = blocks_on_host(ar)
    return blocks_to(_unique(host, *args, **kwargs), xp)


def _unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: Any = None, *, equal_nan: bool = True,
           sorted: bool = True, **kwargs: Any) -> Any:  # fmt: skip
    """``np.unique`` of a DArray (``axis=None``): NumPy's results, as DArrays (collective).

    The flattened values are sample-sorted (with their global flat indices
    when an index or the inverse is asked for) into balanced blocks. A run of
    equal values may cross block edges and span several ranks: each rank
    shares the first and last value of its block and three counts (one
    all-gather each, a few numbers per rank), from which every rank knows
    where runs start, how many unique values come before its block, and how
    far its last run continues into the blocks after it. The unique values,
    first indices and counts are 1-D DArrays with uneven blocks; the inverse
    (one all-to-all sends each element's unique id back to the owner of its
    original position) is a DArray of the input's shape, in its layout. NaNs
    count as one value unless ``equal_nan=False``, as in NumPy. ``sorted``
    is accepted and the values are always sorted (NumPy allows that).
    Returns one DArray, or a tuple in NumPy's order when a ``return_*`` flag
    is set.
    """
    if axis is not None or kwargs:
        # Validated before any message, from arguments every rank has.
        extra = f"axis={axis!r}" if axis is not None else ", ".join(f"{k}=" for k in kwargs)
        raise UnsupportedError(
            "np.unique on DArrays supports axis=None with return_index, return_inverse, "
            f"return_counts and equal_nan only (got {extra})"
        )
    del sorted  # always sorted
    wanted = (bool(return_index), bool(return_inverse), bool(return_counts))
    a = ar.reduce_partials()
    if not a.mesh.is_member:  # non-members hold empty blocks and never communicate
        results = _unique_outside(a, wanted)
    else:
        results = _unique_member(a, wanted, bool(equal_nan))
    return results[0] if len(results) == 1 else tuple(results)


def _unique_outside(a: DArray, wanted: tuple[bool, bool, bool]) -> list[DArray]:
    """What a rank outside the mesh returns: empty blocks (it cannot know the unique count)."""
    mesh = a.mesh
    replicated = Layout(mesh.shape, (Replicate(),) * mesh.ndim, (0,), (None,))
    values = DArray(np.empty((0,), a.dtype), DArraySpec(mesh, replicated, a.dtype))
    index = DArray(np.empty((0,), np.intp), DArraySpec(mesh, replicated, np.dtype(np.intp)))
    results = [values]
    if wanted[0]:
        results.append(index)
    if wanted[1]:
        local = np.empty(a.spec.local_shape(), np.intp)
        results.append(DArray(local, DArraySpec(mesh, a.spec.layout, local.dtype)))
    if wanted[2]:
        results.append(index)
    return results


def _same(x: Any, y: Any, equal_nan: bool) -> Any:
    """Elementwise ``x == y``, NaN equal to NaN when ``equal_nan`` (as ``np.unique``)."""
    same = x == y
    if equal_nan and x.dtype.kind in "fcmM":
        same = same | (np.isnan(x) & np.isnan(y))
    return same


def _unique_member(a: DArray, wanted: tuple[bool, bool, bool], equal_nan: bool) -> list[DArray]:
    """``np.unique`` on a mesh member; ``a`` has no Partial placements."""
    return_index, return_inverse, return_counts = wanted
    want_positions = return_index or return_inverse
    mesh = a.mesh
    # np.ravel dispatches to the DArray kernel: a view unless dims other than 0 are sharded.
    flat = cast(DArray, np.ravel(a))
    mesh_dims = sharding_mesh_dims(flat.placements, 0)
    if mesh_dims:
        comm: Any = mesh[mesh_dims].comm()  # rank order there is block order
        p, r = comm.Get_size(), comm.Get_rank()
        ordered, moved = _sample_sort(flat, want_positions)
        values = np.asarray(ordered.local)
        positions = np.asarray(moved.local) if moved is not None else None
    else:  # replicated: every rank does it all, with no message
        comm, p, r = None, 1, 0
        local = np.asarray(flat.local)
        order = np.argsort(local, kind="stable")
        values, positions = local[order], order.astype(np.intp)
    k = values.size

    # Run starts inside the block; the first element's status needs the block before.
    inner = np.zeros(k, dtype=bool)
    inner[1:] = ~_same(values[1:], values[:-1], equal_nan)
    inner_n = int(np.count_nonzero(inner))
    inner_lead = int(np.argmax(inner)) if inner_n else k  # elements before the first inner start
    ends = values[[0, -1]] if k else np.zeros(2, values.dtype)
    info = np.array([k, inner_n, inner_lead], dtype=np.int64)
    if comm is not None:
        ends = coll.all_gather(ends, 0, comm, sizes=[2] * p)
        info = coll.all_gather(info, 0, comm, sizes=[3] * p)
    firsts, lasts = ends[0::2], ends[1::2]
    sizes, inner_ns, inner_leads = info[0::3], info[1::3], info[2::3]
    # A block's first element starts a run unless it equals the last element of
    # the nearest non-empty block before it (empty blocks are skipped).
    full = np.flatnonzero(sizes > 0)
    head = np.ones(full.size, dtype=bool)
    head[1:] = ~_same(firsts[full[1:]], lasts[full[:-1]], equal_nan)
    starts_per_block = np.zeros(p, dtype=np.int64)
    starts_per_block[full] = head + inner_ns[full]
    lead = np.zeros(p, dtype=np.int64)  # elements before the block's first run start
    lead[full] = np.where(head, 0, inner_leads[full])
    bounds = tuple(int(b) for b in np.concatenate([[0], np.cumsum(starts_per_block)]))

    starts = inner
    if k:
        starts[0] = head[np.searchsorted(full, r)]
    first_of_run = np.flatnonzero(starts)
    placements = tuple(Shard(0) if m in mesh_dims else Replicate() for m in range(mesh.ndim))
    layout = Layout(mesh.shape, placements, (bounds[-1],), (bounds if mesh_dims else None,))

    def wrap(local: Any) -> DArray:
        return DArray(local, DArraySpec(mesh, layout, local.dtype))

    results = [wrap(values[first_of_run])]
    if return_index:  # the sort is stable: a run's first element has its smallest index
        assert positions is not None
        results.append(wrap(positions[first_of_run]))
    if return_inverse:
        assert positions is not None
        ids = bounds[r] + np.cumsum(starts, dtype=np.intp) - 1
        results.append(_inverse(a, flat, comm, ids, positions))
    if return_counts:
        # The block's last run continues through the following blocks up to
        # the first one that starts a run of its own.
        tail = 0
        for q in full[full > r].tolist():
            if lead[q] < sizes[q]:
                tail += int(lead[q])
                break
            tail += int(sizes[q])
        counts = np.diff(np.append(first_of_run, k)).astype(np.intp)
        if counts.size:
            counts[-1] += tail
        results.append(wrap(counts))
    return results


def _inverse(a: DArray, flat: DArray, comm: Any, ids: Any, positions: Any) -> DArray:
    """Each element's unique id, sent back to its place: a DArray of ``a``'s shape and layout.

    ``ids[i]`` belongs at global flat index ``positions[i]``. One all-to-all
    over the sort's ranks delivers it to the owner of that index in ``flat``'s
    layout, which is ``a``'s own when ``a`` has only dim 0 sharded (else one
    redistribution undoes what ``np.ravel`` moved).
    """
    mesh = a.mesh
    if a.size == 0:  # every rank knows it: nothing to send
        local = np.empty(a.spec.local_shape(), np.intp)
        return DArray(local, DArraySpec(mesh, a.spec.layout, local.dtype))
    cut = flat.spec.layout.bounds[0]
    offset = flat.spec.offsets()[0]
    if comm is not None and cut is not None:
        owners = np.searchsorted(np.asarray(cut), positions, side="right") - 1
        order = np.argsort(owners, kind="stable")
        pairs = np.stack([positions[order], ids[order]], axis=1).astype(np.intp)
        split = np.bincount(owners, minlength=comm.Get_size()).tolist()
        received = coll.all_to_all(pairs, 0, 0, comm, split_sizes=split)
        positions, ids = received[:, 0], received[:, 1]
    block = np.empty(flat.local.shape[0], np.intp)
    block[positions - offset] = ids
    # In ``flat``'s layout, then ``a``'s shape (np.reshape: a view where the blocks
    # allow, else only misplaced elements move) and ``a``'s layout.
    inverse = DArray(block, DArraySpec(mesh, flat.spec.layout, block.dtype))
    return cast(DArray, np.reshape(inverse, a.shape)).with_layout(a.spec.layout)
