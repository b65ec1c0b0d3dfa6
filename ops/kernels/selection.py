"""Distributed selection: the values of given ranks in the sorted order of data spread over ranks.

Used by ``median``/``percentile``/``quantile`` along a sharded axis. No rank
ever holds more than its own block and a few thousand candidates: each
*problem* (one wanted rank ``k`` of one column of data) narrows a window of
candidate values round by round.

One round, for every open problem at once:

1. each rank draws up to ``SAMPLES`` values from its candidates (a fixed
   seed: the draw never changes the answer, only the speed); the samples,
   with the rank's candidate count, are all-gathered;
2. from the samples, weighted by how many candidates each stands for, every
   rank picks the same two pivots ``a <= b`` around the wanted rank;
3. each rank counts its candidates ``< a``, ``<= a``, ``< b`` and ``<= b``;
   one all-reduce sums the counts;
4. the global counts place the wanted rank exactly: it is ``a`` or ``b``
   (done), or lies below ``a``, between them, or above ``b``, and every rank
   keeps only the candidates there. ``a`` and ``b`` are candidates, so each
   round removes at least one (it terminates on any data, duplicates too) and
   typically all but a few percent.

A problem with at most ``SMALL`` candidates left is finished by all-gathering
them and taking the value with ``np.partition`` on every rank (the same
input in the same order: the same bits everywhere). The values returned are
elements of the data, never computed ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import dmesh.collectives as coll

SAMPLES = 4096  # values each rank draws per open problem per round
SMALL = 32768  # candidates few enough to all-gather and finish locally


def select(pieces: list[Any], ks: Any, comm: Any) -> Any:
    """The value of global rank ``ks[i]`` (0-based, ascending) in the union of ``pieces[i]``.

    ``pieces[i]`` is this rank's 1-D block of problem ``i`` (no NaNs; several
    problems may share one array); ``ks[i]`` must be below the global count
    of problem ``i`` (the caller knows it from an all-reduce). Collective over
    ``comm``: every rank passes the same number of problems and the same ``ks``.
    """
    ks = np.asarray(ks, dtype=np.int64)
    count = len(pieces)
    dtype = np.result_type(*[p.dtype for p in pieces]) if pieces else np.float64
    result = np.zeros(count, dtype=dtype)
    if not count:
        return result
    rank = comm.Get_rank()
    sizes = np.array([p.size for p in pieces], dtype=np.int64)
    totals = coll.all_reduce(sizes, "sum", comm)  # candidates of each problem, over the ranks
    below = np.zeros(count, dtype=np.int64)  # candidates dropped below each window
    open_ = list(range(count))
    rounds = 0
    while open_:
        small = [i for i in open_ if totals[i] <= SMALL]
        if small:
            _finish(pieces, ks, below, small, comm, result)
        open_ = [i for i in open_ if totals[i] > SMALL]
        if not open_:
            break
        rng = np.random.default_rng((rounds, rank))
        rounds += 1
        pivots = _pivots(pieces, ks - below, totals, open_, rng, comm)
        counts = np.array(
            [_counts(pieces[i], a, b) for i, (a, b) in zip(open_, pivots)], dtype=np.int64
        )
        counts = coll.all_reduce(counts.reshape(-1, 4), "sum", comm)
        still: list[int] = []
        for row, i, (a, b) in zip(counts, open_, pivots):
            k = int(ks[i] - below[i])
            under_a, upto_a, under_b, upto_b = (int(c) for c in row)
            piece = pieces[i]
            if under_a <= k < upto_a:
                result[i] = a
                continue
            if under_b <= k < upto_b:
                result[i] = b
                continue
            if k < under_a:
                pieces[i] = piece[piece < a]
                totals[i] = under_a
            elif k < under_b:
                pieces[i] = piece[(piece > a) & (piece < b)]
                below[i] += upto_a
                totals[i] = under_b - upto_a
            else:
                pieces[i] = piece[piece > b]
                below[i] += upto_b
                totals[i] -= upto_b
            still.append(i)
        open_ = still
    return result


def _counts(piece: Any, a: Any, b: Any) -> tuple[int, int, int, int]:
    """This rank's candidates ``< a``, ``<= a``, ``< b``, ``<= b``."""
    under_a = int(np.count_nonzero(piece < a))
    upto_a = under_a + int(np.count_nonzero(piece == a))
    if b == a:
        return under_a, upto_a, under_a, upto_a
    under_b = int(np.count_nonzero(piece < b))
    return under_a, upto_a, under_b, under_b + int(np.count_nonzero(piece == b))


def _pivots(
    pieces: list[Any], targets: Any, totals: Any, open_: list[int], rng: Any, comm: Any
) -> list[tuple[Any, Any]]:
    """Two pivots per open problem, the same on every rank, bracketing its wanted rank."""
    drawn = []
    header = np.zeros((len(open_), 2), dtype=np.int64)  # (candidates, samples) per problem
    for row, i in enumerate(open_):
        piece = pieces[i]
        take = min(piece.size, SAMPLES)
        header[row] = piece.size, take
        drawn.append(piece[rng.integers(0, piece.size, take)] if take else piece[:0])
    values = coll.all_gather(np.concatenate(drawn), 0, comm)
    headers = coll.all_gather(header[None], 0, comm)  # (ranks, problems, 2)
    ends = np.cumsum(headers[:, :, 1].reshape(-1))  # rank-major order, as gathered
    starts = ends - headers[:, :, 1].reshape(-1)
    chosen = []
    ranks = headers.shape[0]
    for row, i in enumerate(open_):
        parts, weights = [], []
        for r in range(ranks):
            slot = r * len(open_) + row
            size, take = headers[r, row]
            if take:
                parts.append(values[starts[slot] : ends[slot]])
                weights.append(np.full(take, size / take))
        sample = np.concatenate(parts)
        order = np.argsort(sample, kind="stable")
        sample = sample[order]
        weight = np.concatenate(weights)[order]
        position = np.cumsum(weight) - weight / 2  # each sample's estimated rank
        spread = 1.5 * float(totals[i]) / np.sqrt(sample.size) + 1
        target = float(targets[i])
        low = int(np.clip(np.searchsorted(position, target - spread) - 1, 0, sample.size - 1))
        high = int(np.clip(np.searchsorted(position, target + spread), 0, sample.size - 1))
        chosen.append((sample[low], sample[max(low, high)]))
    return chosen


def _finish(
    pieces: list[Any], ks: Any, below: Any, small: list[int], comm: Any, result: Any
) -> None:
    """All-gather the few candidates of each problem in ``small``; pick each value locally."""
    sizes = np.array([pieces[i].size for i in small], dtype=np.int64)
    values = coll.all_gather(np.concatenate([pieces[i] for i in small]), 0, comm)
    headers = coll.all_gather(sizes[None], 0, comm).reshape(-1)  # rank-major
    ends = np.cumsum(headers)
    starts = ends - headers
    ranks = comm.Get_size()
    for row, i in enumerate(small):
        slots = [r * len(small) + row for r in range(ranks)]
        gathered = np.concatenate([values[starts[s] : ends[s]] for s in slots])
        k = int(ks[i] - below[i])
        result[i] = np.partition(gathered, k)[k]
