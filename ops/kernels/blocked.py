"""Blocked Cholesky and LU (partial pivoting) of a square matrix whose rows are on the ranks.

The ``n x n`` matrix is cut into row blocks, rank ``r`` of ``comm`` holding
rows ``[offsets[r], offsets[r + 1])`` whole (any lengths, empty blocks
included). Both factorizations are right-looking over panels of ``nb``
columns; no rank ever holds more than its block, one panel (``n x nb``) and
a few ``nb x nb`` or ``2 nb x n`` pieces:

**Cholesky** (``A = L L^H``), for each panel ``[k0, k1)``: the diagonal block
``A[k0:k1, k0:k1]`` is all-gathered from its owners and factored on every
rank (the same input, the same LAPACK call: the same bits, and a matrix that
is not positive definite fails on every rank at the same step); each rank
computes its rows of the panel below it, ``L[i, k] = A[i, k] L_kk^-H``; the
panel rows below ``k1`` are all-gathered (the broadcast of the panel) and
each rank updates its own rows of the trailing matrix,
``A[i, k1:] -= L[i, k] L[k1:, k]^H``. Communication: about ``n^2 / 2``
numbers received per rank in all, ``n / nb`` steps.

**LU** (``P A = L U``), for each panel: the panel ``A[k0:, k0:k1]`` is
all-gathered and every rank factors it the same way (unblocked, partial
pivoting on the largest modulus, the first on ties), so every rank knows the
pivots, ``U``'s diagonal block and the multipliers; the full rows that the
swaps touch (at most ``2 nb``) are all-gathered and each rank writes the
rows it owns after the swaps; ``U[k0:k1, k1:] = L_kk^-1 A[k0:k1, k1:]`` is
computed on every rank from those rows and each rank updates its rows of the
trailing matrix. ``lu_solve`` then permutes the right-hand side's rows (one
all-to-all) and substitutes forward and back by blocks of ``nb`` rows: the
solved block is all-gathered and the owners of the other rows update them.

Rounding differs from LAPACK's unblocked order (the sums are grouped by
panel), so results equal NumPy's to rounding, not bit for bit; every rank
computes every replicated quantity from the same bits in the same order, so
the replicated results (``det``) are the same bits on every rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

__all__ = ["PANEL", "RowBlocks", "blocked_cholesky", "blocked_lu", "lu_solve", "permute_rows"]

# Columns per panel (tests make it small to cross block boundaries).
PANEL = 128
# Rows per trailing update of Cholesky (each chunk stops at its diagonal).
_CHUNK = 256


@dataclass(frozen=True)
class RowBlocks:
    """Which rows each rank of ``comm`` holds: ``[offsets[r], offsets[r + 1])``."""

    comm: MPI.Comm
    offsets: tuple[int, ...]

    @classmethod
    def of(cls, comm: MPI.Comm, sizes: tuple[int, ...]) -> RowBlocks:
        """The blocks of ``sizes`` rows, in the rank order of ``comm``."""
        return cls(comm, tuple(int(x) for x in np.concatenate([[0], np.cumsum(sizes)])))

    @property
    def start(self) -> int:
        """This rank's first row."""
        return self.offsets[self.comm.Get_rank()]

    @property
    def stop(self) -> int:
        """One past this rank's last row."""
        return self.offsets[self.comm.Get_rank() + 1]

    def rows(self, local: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """Global rows ``[lo, hi)`` of the row-blocked array whose block is ``local`` (collective).

        Each rank sends its part of the range; every rank gets all of it.
        """
        s, t = max(lo, self.start), min(hi, self.stop)
        mine = local[s - self.start : t - self.start] if s < t else local[:0]
        counts = [max(0, min(hi, b) - max(lo, a)) for a, b in zip(self.offsets, self.offsets[1:])]
        return _all_gather_rows(self.comm, mine, counts)

    def owned(self, lo: int, hi: int) -> tuple[int, int]:
        """This rank's rows of ``[lo, hi)`` as a local ``(start, stop)`` (empty: equal)."""
        s, t = max(lo, self.start), min(hi, self.stop)
        return (s - self.start, t - self.start) if s < t else (0, 0)


def _lower_solve(l_kk: np.ndarray, b: np.ndarray, unit: bool) -> np.ndarray:
    """``L^-1 b`` for the lower triangle ``L`` of ``l_kk`` (unit diagonal if ``unit``).

    LAPACK's solve of the triangle (its pivoting keeps a unit ``L`` from LU
    with partial pivoting as it is: no multiplier exceeds 1 in modulus).
    """
    low = np.tril(l_kk, -1) + np.eye(len(l_kk), dtype=l_kk.dtype) if unit else np.tril(l_kk)
    x: np.ndarray = np.linalg.solve(low, b)
    return x


def _upper_solve(u_kk: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``U^-1 b`` for the upper triangle ``U`` of ``u_kk``."""
    x: np.ndarray = np.linalg.solve(np.triu(u_kk), b)
    return x


def blocked_cholesky(
    local: np.ndarray, blocks: RowBlocks, nb: int = 0, overwrite: bool = False
) -> np.ndarray:
    """This rank's rows of ``L`` (lower, ``A = L L^H``) from its rows of ``A`` (collective).

    Raises ``np.linalg.LinAlgError`` on every rank when ``A`` is not positive
    definite. ``overwrite``: ``local`` may be used as the workspace.
    """
    nb = nb or PANEL
    a: np.ndarray = local if overwrite else local.copy()
    n = a.shape[1]
    for k0 in range(0, n, nb):
        k1 = min(k0 + nb, n)
        l_kk = np.linalg.cholesky(blocks.rows(a[:, k0:k1], k0, k1))  # every rank alike
        s, t = blocks.owned(k0, k1)
        a[s:t, k0:k1] = l_kk[blocks.start + s - k0 : blocks.start + t - k0]
        below, end = blocks.owned(k1, n)
        if below < end:  # L[i, k] = A[i, k] L_kk^-H
            a[below:end, k0:k1] = _lower_solve(l_kk, a[below:end, k0:k1].conj().T, False).conj().T
        panel = blocks.rows(a[:, k0:k1], k1, n)
        # Only the lower triangle is read again (LAPACK's Cholesky ignores the upper one),
        # so each chunk of rows is updated up to its last row's column: about half the
        # arithmetic of whole rows on the rank holding the last rows, the critical one.
        for c0 in range(below, end, _CHUNK):
            c1 = min(c0 + _CHUNK, end)
            last = blocks.start + c1  # one past the chunk's last global row
            a[c0:c1, k1:last] -= a[c0:c1, k0:k1] @ panel[: last - k1].conj().T
    rows = np.arange(blocks.start, blocks.stop)[:, None]
    a[np.arange(n)[None, :] > rows] = 0
    return a


def _panel_lu(panel: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """LU with partial pivoting of a tall panel: (factors, row order, singular).

    Recursive over halves of the columns (as LAPACK's ``getrf2``), so nearly all
    the arithmetic is two GEMMs and triangular solves instead of one outer
    product per column: at n = 2048, 2 ranks, the unblocked loop took as long
    as the whole trailing update. The panel is factored transposed (the
    ``factors`` returned are a view of the transpose): a column, searched for
    its pivot and scaled, is then a contiguous row (a third faster at 2048 x 128).
    """
    t = np.ascontiguousarray(panel.T)
    order, singular = _recursive_lu(t)
    return t.T, order, singular


def _recursive_lu(t: np.ndarray) -> tuple[np.ndarray, bool]:
    """Factor the transposed ``w x m`` panel ``t`` in place (``m >= w``): (row order, singular)."""
    w = t.shape[0]
    if w <= _BASE:
        return _unblocked_lu(t)
    h = w // 2
    order, singular = _recursive_lu(t[:h])
    t[h:] = t[h:, order]  # the left half's row swaps, on the right half
    for j in range(1, h):  # U12 = L11^-1 A12 by rows: h <= nb / 2, cheaper than a LAPACK call
        t[h:, j] -= t[h:, :j] @ t[:j, j]
    t[h:, h:] -= t[h:, :h] @ t[:h, h:]
    below, zero = _recursive_lu(t[h:, h:])
    t[:h, h:] = t[:h, h:][:, below]
    order[h:] = order[h:][below]
    return order, singular or zero


# Columns factored one at a time at the bottom of the recursion.
_BASE = 8


def _unblocked_lu(t: np.ndarray) -> tuple[np.ndarray, bool]:
    """Unblocked LU of the transposed panel ``t`` in place: (row order, singular)."""
    w, m = t.shape
    order = np.arange(m)
    singular = False
    for j in range(min(m, w)):
        pivot = j + int(np.argmax(np.abs(t[j, j:])))  # the first of equal moduli
        if pivot != j:
            t[:, [j, pivot]] = t[:, [pivot, j]]
            order[[j, pivot]] = order[[pivot, j]]
        if t[j, j] == 0:
            singular = True  # as LAPACK: nothing to eliminate, go on
            continue
        t[j, j + 1 :] /= t[j, j]
        t[j + 1 :, j + 1 :] -= np.multiply.outer(t[j + 1 :, j], t[j, j + 1 :])
    return order, singular


def blocked_lu(
    local: np.ndarray, blocks: RowBlocks, nb: int = 0, overwrite: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """``P A = L U`` of the row-blocked ``A`` (collective).

    Returns this rank's rows of the factors (``L`` below the diagonal, unit
    diagonal implied, ``U`` on and above it), the permutation ``perm``
    (row ``i`` of ``P A`` is row ``perm[i]`` of ``A``), ``U``'s diagonal and
    whether it holds a zero; all but the first the same on every rank.
    ``overwrite``: ``local`` may be used as the workspace.
    """
    nb = nb or PANEL
    a = local if overwrite else local.copy()
    n = a.shape[1]
    perm = np.arange(n)
    diagonal = np.empty(n, a.dtype)
    singular = False
    for k0 in range(0, n, nb):
        k1 = min(k0 + nb, n)
        factors, order, zero = _panel_lu(blocks.rows(a[:, k0:k1], k0, n))
        singular |= zero
        diagonal[k0:k1] = np.diagonal(factors)[: k1 - k0]
        source = order + k0  # row k0 + i of the swapped matrix was row source[i]
        moved = sorted({*range(k0, k1), *source[: k1 - k0].tolist()})
        old = _gather_rows(blocks, a, moved)
        where = {r: i for i, r in enumerate(moved)}
        # The rows [k0, k1) after the swaps, and the displaced ones, whole:
        changed = np.nonzero(source != np.arange(k0, n))[0]  # at most 2 nb rows: no loop over n
        swapped = {k0 + int(i): old[where[int(source[i])]] for i in changed}
        for i, row in swapped.items():
            if blocks.start <= i < blocks.stop:
                a[i - blocks.start] = row
        perm[k0:] = perm[k0:][order]
        s, t = blocks.owned(k0, n)
        a[s:t, k0:k1] = factors[blocks.start + s - k0 : blocks.start + t - k0]
        if k1 < n:
            top = np.stack([swapped.get(i, old[where[i]]) for i in range(k0, k1)])
            u12 = _lower_solve(factors[: k1 - k0], top[:, k1:], True)
            s, t = blocks.owned(k0, k1)
            a[s:t, k1:] = u12[blocks.start + s - k0 : blocks.start + t - k0]
            below, end = blocks.owned(k1, n)
            if below < end:
                a[below:end, k1:] -= a[below:end, k0:k1] @ u12
    return a, perm, diagonal, singular


def _gather_rows(blocks: RowBlocks, local: np.ndarray, wanted: list[int]) -> np.ndarray:
    """The global rows ``wanted`` (sorted) of the row-blocked array, on every rank (collective)."""
    mine = [r for r in wanted if blocks.start <= r < blocks.stop]
    bounds = np.searchsorted(wanted, blocks.offsets)
    return _all_gather_rows(blocks.comm, local[[r - blocks.start for r in mine]], np.diff(bounds))


def _all_gather_rows(comm: MPI.Comm, mine: np.ndarray, counts: Any) -> np.ndarray:
    """Every rank's ``mine`` (``counts[r]`` rows from rank ``r``) stacked in rank order, on
    every rank: one ``Allgatherv`` of the raw rows (no pickling; the counts every rank knows)."""
    width = math.prod(mine.shape[1:])
    out = np.empty((int(sum(counts)), *mine.shape[1:]), mine.dtype)
    comm.Allgatherv(np.ascontiguousarray(mine), [out, [int(c) * width for c in counts]])
    return out


def permute_rows(local: np.ndarray, perm: np.ndarray, blocks: RowBlocks) -> np.ndarray:
    """This rank's rows of ``P b`` (row ``i`` is ``b``'s row ``perm[i]``): one all-to-all."""
    size = blocks.comm.Get_size()
    owner = np.searchsorted(np.asarray(blocks.offsets[1:]), perm, side="right")
    outgoing = []
    for r in range(size):
        lo, hi = blocks.offsets[r], blocks.offsets[r + 1]
        wanted = perm[lo:hi]  # the rows rank r needs, in its order
        mine = np.nonzero(owner[lo:hi] == blocks.comm.Get_rank())[0]
        outgoing.append((mine, local[wanted[mine] - blocks.start]))
    incoming = blocks.comm.alltoall(outgoing)
    out = np.empty_like(local)
    for positions, rows in incoming:
        out[positions] = rows
    return out


def lu_solve(
    factors: np.ndarray, perm: np.ndarray, b: np.ndarray, blocks: RowBlocks, nb: int = 0
) -> np.ndarray:
    """This rank's rows of ``x`` with ``A x = b`` from :func:`blocked_lu`'s factors (collective).

    ``b`` is this rank's rows of a 2-D right-hand side, blocked like ``A``.
    """
    nb = nb or PANEL
    n = factors.shape[1]
    x = permute_rows(b, perm, blocks).astype(np.result_type(factors, b))
    for k0 in range(0, n, nb):  # L y = P b
        k1 = min(k0 + nb, n)
        l_kk = blocks.rows(factors[:, k0:k1], k0, k1)
        y = _lower_solve(l_kk, blocks.rows(x, k0, k1), True)
        s, t = blocks.owned(k0, k1)
        x[s:t] = y[blocks.start + s - k0 : blocks.start + t - k0]
        below, end = blocks.owned(k1, n)
        if below < end:
            x[below:end] -= factors[below:end, k0:k1] @ y
    for k1 in range(n, 0, -nb):  # U x = y, from the last block
        k0 = max(k1 - nb, 0)
        u_kk = blocks.rows(factors[:, k0:k1], k0, k1)
        z = _upper_solve(u_kk, blocks.rows(x, k0, k1))
        s, t = blocks.owned(k0, k1)
        x[s:t] = z[blocks.start + s - k0 : blocks.start + t - k0]
        above, end = blocks.owned(0, k0)
        if above < end:
            x[above:end] -= factors[above:end, k0:k1] @ z
    return x
