"""Distributed selection: the values of given ranks in the sorted order of data spread over ranks.

Used by ``median``/``percentile``/``quantile`` along a sharded axis. No rank
ever holds more than its own block and a few thousand candidates: each
*problem* (the values at one rank ``k``, or two neighbouring ranks ``k`` and
``k + 1`` as linear interpolation needs, of one slice of the data) narrows a
window of candidate values round by round.

One round, for every open problem at once:

1. each rank draws up to ``SAMPLES`` values from its candidates (a fixed
   seed: the draw never changes the answer, only the speed); the samples,
   with the rank's candidate count, are all-gathered;
2. from the samples, weighted by how many candidates each stands for, every
   rank picks the same two pivots ``a <= b`` around the wanted ranks;
3. each rank counts its candidates ``< a``, ``== a``, ``<= b`` and ``== b``
   (two passes over the candidates; the equalities on the few in ``[a, b]``);
   one all-reduce sums the counts;
4. the global counts place each wanted rank exactly: it is ``a`` or ``b``
   (known), or lies below ``a``, between them, or above ``b``, and every rank
   keeps only the candidates between the new bounds. A pair that keeps every
   candidate is split into two single ranks; a single rank always drops ``a``
   or ``b`` (both candidates), so selection ends on any data, duplicates too,
   and typically each round keeps a few percent.

A problem with at most ``SMALL`` candidates left is finished by all-gathering
them and ``np.partition`` on every rank (the same input in the same order: the
same bits everywhere). The values returned are elements of the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import dmesh.collectives as coll

SAMPLES = 4096  # values each rank draws per open problem per round
SMALL = 32768  # candidates few enough to all-gather and finish locally


@dataclass
class _Problem:
    """Wanted ranks ``low <= high`` (at most one apart) among ``total`` global candidates,
    of which this rank holds ``piece``; results go to ``slots`` of the output."""

    piece: Any
    low: int
    high: int
    total: int
    slots: tuple[int, int]


def select(pieces: list[Any], lows: Any, highs: Any, comm: Any) -> Any:
    """The values of global ranks ``lows[i]`` and ``highs[i]`` (0-based, ascending; ``highs[i]``
    is ``lows[i]`` or ``lows[i] + 1``) in the union over the ranks of ``pieces[i]``.

    ``pieces[i]`` is this rank's 1-D block of problem ``i`` (no NaNs; problems may
    share one array); ranks must be below the global count. Returns an array of
    shape ``(len(pieces), 2)``. Collective over ``comm``: every rank passes the
    same number of problems and the same ranks.
    """
    count = len(pieces)
    dtype = np.result_type(*[p.dtype for p in pieces]) if pieces else np.float64
    result = np.zeros((count, 2), dtype=dtype)
    if not count:
        return result
    sizes = np.array([p.size for p in pieces], dtype=np.int64)
    totals = coll.all_reduce(sizes, "sum", comm)
    problems = [
        _Problem(pieces[i], int(lows[i]), int(highs[i]), int(totals[i]), (2 * i, 2 * i + 1))
        for i in range(count)
    ]
    flat = result.reshape(-1)
    rng = np.random.default_rng(comm.Get_rank())
    while problems:
        small = [p for p in problems if p.total <= SMALL]
        if small:
            _finish(small, comm, flat)
        problems = [p for p in problems if p.total > SMALL]
        if problems:
            problems = _round(problems, rng, comm, flat)
    return result


def _round(problems: list[_Problem], rng: Any, comm: Any, flat: Any) -> list[_Problem]:
    """One round of pivots, counts and narrowing; returns the problems still open."""
    pivots = _pivots(problems, rng, comm)
    local = np.zeros((len(problems), 4), dtype=np.int64)
    insides = []
    for row, (p, (a, b)) in enumerate(zip(problems, pivots)):
        from_a = p.piece >= a
        to_b = p.piece <= b
        inside = p.piece[from_a & to_b]  # the few candidates in [a, b]
        insides.append(inside)
        local[row] = (
            p.piece.size - np.count_nonzero(from_a),
            np.count_nonzero(inside == a),
            np.count_nonzero(to_b),
            np.count_nonzero(inside == b),
        )
    counts = coll.all_reduce(local, "sum", comm)
    still: list[_Problem] = []
    for p, (a, b), inside, row in zip(problems, pivots, insides, counts):
        under_a, upto_a = int(row[0]), int(row[0] + row[1])
        upto_b, under_b = int(row[2]), int(row[2] - row[3])
        places = (under_a, upto_a, under_b, upto_b)
        known = [_known(k, a, b, places) for k in (p.low, p.high)]
        for slot, value in zip(p.slots, known):
            if value is not None:
                flat[slot] = value[0]
        wanted = [(k, s) for k, s, v in zip((p.low, p.high), p.slots, known) if v is None]
        if not wanted:
            continue
        low, high = wanted[0][0], wanted[-1][0]
        slots = (wanted[0][1], wanted[-1][1])
        lower, dropped = _lower(low, a, b, places)
        upper, kept = _upper(high, a, b, places, p.total)
        if kept - dropped == p.total and low != high:  # no progress: one rank at a time
            still += [_Problem(p.piece, k, k, p.total, (s, s)) for k, s in wanted]
            continue
        piece = _keep(p.piece, inside, lower, upper)
        still.append(_Problem(piece, low - dropped, high - dropped, kept - dropped, slots))
    return still


def _known(k: int, a: Any, b: Any, places: tuple[int, int, int, int]) -> tuple[Any] | None:
    """The value at rank ``k`` when it is a pivot's."""
    under_a, upto_a, under_b, upto_b = places
    if under_a <= k < upto_a:
        return (a,)
    if under_b <= k < upto_b:
        return (b,)
    return None


def _lower(k: int, a: Any, b: Any, places: tuple[int, int, int, int]) -> tuple[Any, int]:
    """The lower bound ``(value, closed)`` or None that keeps rank ``k``; candidates dropped."""
    under_a, upto_a, under_b, upto_b = places
    if k < under_a:
        return None, 0
    if k < upto_a:
        return (a, True), under_a
    if k < under_b:
        return (a, False), upto_a
    if k < upto_b:
        return (b, True), under_b
    return (b, False), upto_b


def _upper(
    k: int, a: Any, b: Any, places: tuple[int, int, int, int], total: int
) -> tuple[Any, int]:
    """The upper bound ``(value, closed)`` or None that keeps rank ``k``; candidates kept."""
    under_a, upto_a, under_b, upto_b = places
    if k < under_a:
        return (a, False), under_a
    if k < upto_a:
        return (a, True), upto_a
    if k < under_b:
        return (b, False), under_b
    if k < upto_b:
        return (b, True), upto_b
    return None, total


def _keep(piece: Any, inside: Any, lower: Any, upper: Any) -> Any:
    """The candidates within the bounds (from the few in ``[a, b]`` when both are pivots)."""
    source = inside if lower is not None and upper is not None else piece
    mask = np.ones(source.shape, dtype=bool)
    if lower is not None:
        mask &= source >= lower[0] if lower[1] else source > lower[0]
    if upper is not None:
        mask &= source <= upper[0] if upper[1] else source < upper[0]
    return source[mask]


def _pivots(problems: list[_Problem], rng: Any, comm: Any) -> list[tuple[Any, Any]]:
    """Two pivots per problem, the same on every rank, bracketing its wanted ranks."""
    drawn = []
    header = np.zeros((len(problems), 2), dtype=np.int64)  # (candidates, samples) per problem
    for row, p in enumerate(problems):
        take = min(p.piece.size, SAMPLES)
        header[row] = p.piece.size, take
        drawn.append(p.piece[rng.integers(0, p.piece.size, take)] if take else p.piece[:0])
    values = coll.all_gather(np.concatenate(drawn), 0, comm)
    headers = coll.all_gather(header[None], 0, comm)  # (ranks, problems, 2)
    ends = np.cumsum(headers[:, :, 1].reshape(-1))  # rank-major order, as gathered
    starts = ends - headers[:, :, 1].reshape(-1)
    chosen = []
    for row, p in enumerate(problems):
        parts, weights = [], []
        for r in range(headers.shape[0]):
            slot = r * len(problems) + row
            size, take = headers[r, row]
            if take:
                parts.append(values[starts[slot] : ends[slot]])
                weights.append(np.full(take, size / take))
        sample = np.concatenate(parts)
        order = np.argsort(sample, kind="stable")
        sample = sample[order]
        weight = np.concatenate(weights)[order]
        position = np.cumsum(weight) - weight / 2  # each sample's estimated rank
        spread = 1.5 * p.total / np.sqrt(sample.size) + 1
        low = int(np.clip(np.searchsorted(position, p.low - spread) - 1, 0, sample.size - 1))
        high = int(np.clip(np.searchsorted(position, p.high + spread), 0, sample.size - 1))
        chosen.append((sample[low], sample[max(low, high)]))
    return chosen


def _finish(small: list[_Problem], comm: Any, flat: Any) -> None:
    """All-gather the few candidates of each problem in ``small``; pick the values locally."""
    sizes = np.array([p.piece.size for p in small], dtype=np.int64)
    values = coll.all_gather(np.concatenate([p.piece for p in small]), 0, comm)
    headers = coll.all_gather(sizes[None], 0, comm).reshape(-1)  # rank-major
    ends = np.cumsum(headers)
    starts = ends - headers
    for row, p in enumerate(small):
        slots = [r * len(small) + row for r in range(comm.Get_size())]
        gathered = np.concatenate([values[starts[s] : ends[s]] for s in slots])
        chosen = np.partition(gathered, sorted({p.low, p.high}))
        flat[p.slots[0]], flat[p.slots[1]] = chosen[p.low], chosen[p.high]
