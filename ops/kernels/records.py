"""A sample sort of records by several keys, and the neighbours of sorted blocks.

For ``np.lexsort`` and the set functions, which sort by a value and then by
more keys (which array an element came from, its position). Records are
sorted by ``keys[0]`` first (as NumPy sorts: NaN last, ``-0.0 == 0.0``), ties
broken by ``keys[1]``, then ``keys[2]``..., then by the rank that held the
record and its place there (the sort is stable over rank order).

The ranks are split by the first key alone, at splitters taken from regular
samples (``sort.py``'s sample sort): every record whose first key equals a
splitter goes to the same rank, so equal first keys meet on one rank and the
later keys order them there. Many equal first keys make that rank's piece
large (the result is not rebalanced here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import dmesh.collectives as coll

__all__ = ["edges", "local_order", "sort_records"]


def local_order(keys: list[np.ndarray]) -> np.ndarray:
    """The stable order of records by ``keys[0]``, then ``keys[1]``... (lexsort, reversed)."""
    if len(keys) == 1:
        return np.argsort(keys[0], kind="stable")
    return np.lexsort(keys[::-1])


def sort_records(keys: list[np.ndarray], payload: list[np.ndarray], comm: Any
                 ) -> tuple[list[np.ndarray], list[np.ndarray]]:  # fmt: skip
    """This rank's piece of the records sorted over ``comm`` (None: sort the local records).

    ``keys`` and ``payload`` hold 1-D arrays of one length (this rank's
    records). Returns the sorted pieces, in rank order over ``comm``.
    Collective over ``comm``: one all-gather of samples, one all-to-all of
    the counts and one per key and payload array.
    """
    order = local_order(keys)
    keys = [k[order] for k in keys]
    payload = [x[order] for x in payload]
    if comm is None or comm.Get_size() == 1:
        return keys, payload
    p = comm.Get_size()
    primary = keys[0]
    n = primary.shape[0]
    if n:
        picks = np.linspace(0, n, p + 1)[1:-1].astype(np.int64)
        samples = primary[np.minimum(picks, n - 1)]
    else:
        samples = primary[:0]
    counts = coll.all_gather(
        np.array([samples.size], dtype=np.int64), 0, comm, sizes=[1] * comm.Get_size()
    )
    pool = np.sort(coll.all_gather(samples, 0, comm, sizes=counts.tolist()), kind="stable")
    if pool.size:
        chosen = np.linspace(0, pool.size, p + 1)[1:-1].astype(np.int64)
        splitters = pool[np.minimum(chosen, pool.size - 1)]
        cuts = np.searchsorted(primary, splitters, side="right").tolist()
        bounds = [0, *cuts, n]
    else:  # every rank is empty: nothing moves
        bounds = [0] * p + [n]
    sizes = [bounds[i + 1] - bounds[i] for i in range(p)]
    incoming = coll.all_to_all(np.array(sizes, dtype=np.int64), 0, 0, comm,
                               split_sizes=[1] * p, concat_sizes=[1] * p).tolist()  # fmt: skip

    def send(x: np.ndarray) -> np.ndarray:
        return coll.all_to_all(x, 0, 0, comm, split_sizes=sizes, concat_sizes=incoming)  # type: ignore[no-any-return]

    keys = [send(k) for k in keys]
    payload = [send(x) for x in payload]
    merge = local_order(keys)  # stable: ties keep the senders' rank order
    return [k[merge] for k in keys], [x[merge] for x in payload]


def edges(block: np.ndarray, comm: Any) -> tuple[np.ndarray, np.ndarray]:
    """The last element of the nearest non-empty block before this rank's, and the first after.

    Each is a 0- or 1-element array (none there). Collective over ``comm``
    (one all-gather of two elements per rank); None: a single block.
    """
    if comm is None or comm.Get_size() == 1:
        return block[:0], block[:0]
    ends = np.concatenate([block[:1], block[-1:]])
    p, r = comm.Get_size(), comm.Get_rank()
    sizes = coll.all_gather(
        np.array([ends.size], dtype=np.int64), 0, comm, sizes=[1] * comm.Get_size()
    ).tolist()
    everything = coll.all_gather(ends, 0, comm, sizes=sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    before = [q for q in range(r) if sizes[q]]
    after = [q for q in range(r + 1, p) if sizes[q]]
    previous = everything[starts[before[-1]] + 1 : starts[before[-1]] + 2] if before else block[:0]
    following = everything[starts[after[0]] : starts[after[0]] + 1] if after else block[:0]
    return previous, following
