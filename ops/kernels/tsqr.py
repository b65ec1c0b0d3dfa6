"""TSQR on blocks: the QR factorization of a tall matrix whose row blocks are on the ranks.

**TSQR** (``qr``, ``lstsq``, ``svd``). A tall ``m x n`` matrix whose rows are
sharded (``Shard(0)`` over one or more mesh dims, blocks in mesh order; any
block lengths, empty blocks and blocks shorter than ``n`` included) is
factored without any rank holding more than its block and a few ``n x n``
matrices:

1. each rank factors its block ``A_i = Q_i R_i`` by pieces of a few thousand
   rows (about 1 MiB each) whose ``R`` factors are stacked and factored again.
   LAPACK's Householder QR of a tall block with few columns streams the whole
   block from memory once per column: NumPy's ``qr`` of a 10^6 x 32 block
   takes 7.4 s on one thread, by pieces of 4096 rows 0.8 s (``mode="r"``:
   1.25 s and 0.3 s);
2. the ``R_i`` (at most ``n x n`` each) are combined by a butterfly over the
   ranks that shard the rows (recursive pairing): at each of ``log2 p``
   levels partners swap their ``R`` and both factor the same stack
   ``[R_low; R_high]``; ranks beyond the largest power of two first fold
   into a partner and get the result back at the end. Every rank ends with
   the same ``R`` and with ``P_i``, the product of the slices of the small
   ``Q`` factors on its path: ``log2 p`` messages of at most ``n^2``
   numbers, O(n^3 log p) flops and O(n^2) memory per rank. The alternative,
   one all-gather of every ``R_i`` and a ``pn x n`` QR on every rank, is kept
   as ``combine="gather"`` (``dmesh.ops.kernels.linalg.COMBINE``) for
   comparison: it costs p n^2 memory and
   2 p n^3 flops on every rank. Measured on a 16-core node (a whole
   ``qr(mode="r")`` of a ``2n x n`` block per rank): for n = 32 both take
   0.4-1.9 ms at 1-16 ranks (the gather up to 15% less); for n = 256, at 8
   and 16 ranks, the tree 61 and 84 ms, the gather 91 and 202 ms;
3. the rows of ``Q`` on rank i are ``Q_i P_i`` (one pass over the block,
   fused with the product by ``U`` of the small SVD for ``svd``): ``Q`` is
   row-sharded like ``A``, ``R`` replicated.

**Signs.** The QR factorization of a matrix of full column rank is unique up
to the sign of each column of ``Q`` (row of ``R``). LAPACK's Householder QR
(NumPy's) makes ``Q - I`` have an LU factorization without pivoting whose
pivots are ``-tau_j`` (``Re tau_j`` in [1, 2]; Ballard et al., "Reconstructing
Householder vectors from tall-skinny QR", 2015). So the signs ``d`` that turn
any ``Q`` into LAPACK's follow from its first ``k = min(m, n)`` rows alone:
eliminating ``Q - diag(d)`` column by column, ``d_j = -sign(Re c_j)`` where
``c_j`` is the pivot before ``d_j`` is subtracted. Those rows are all-gathered
(k^2 numbers) and the factors scaled, so for a full-rank matrix ``Q`` and
``R`` equal NumPy's to rounding, and so do ``svd``'s ``U`` and ``Vh`` when
NumPy's SVD also starts with a QR (``m >= 11 n / 6``: LAPACK's gesdd).
Where LAPACK reflects nothing (``tau_j = 0``: the column is already zero
below its diagonal) the pivot is 0 instead; that is followed for the last
row of a square or wide matrix (nothing below it, a real entry), not for
exact zeros elsewhere (a triangular input, say). Rank-deficient matrices
have a ``Q`` that is not unique beyond signs. ``Q @ R == A`` and
``Q^H Q == I`` always hold.

:mod:`dmesh.ops.kernels.linalg` checks the arguments and lays out the results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.device import array_module, to_host

__all__ = ["PIECE_BYTES", "tsqr"]

# Bytes per local piece by default (about 1 MiB), at least twice the columns in rows.
PIECE_BYTES = 1 << 20


def _piece_rows(n: int, itemsize: int, piece_bytes: int) -> int:
    return max(2 * n, piece_bytes // max(n * itemsize, 1))


def _local_qr(
    block: Any, want_q: bool, head: int, piece_bytes: int
) -> tuple[Any, Any, Callable[[Any], Any] | None]:
    """``R``, the first ``head`` rows of ``Q`` and ``m -> Q @ m`` (with ``want_q``) of a block.

    The block is factored by pieces of rows that fit in cache, whose stacked
    ``R`` factors are factored again (recursively); ``Q`` is never formed
    unless asked, and then only as the product with ``m``, in one pass.
    """
    xp = array_module(block)
    rows, n = block.shape
    size = _piece_rows(n, block.itemsize, piece_bytes)
    if rows <= size:
        if not (want_q or head):
            return xp.linalg.qr(block, mode="r"), block[:0, : min(rows, n)], None
        q, r = xp.linalg.qr(block)
        return r, q[:head], (lambda m: q @ m) if want_q else None
    starts = range(0, rows, size)
    factors: list[Any] = [
        xp.linalg.qr(block[s : s + size]) if want_q or (head and s == 0)
        else (None, xp.linalg.qr(block[s : s + size], mode="r"))
        for s in starts
    ]  # fmt: skip
    counts = [f[1].shape[0] for f in factors]
    offsets = np.concatenate([[0], np.cumsum(counts)]).tolist()
    stacked = xp.concatenate([f[1] for f in factors])
    r, top, times = _local_qr(stacked, want_q, counts[0] if head else 0, piece_bytes)
    top = factors[0][0][:head] @ top if head else top[:0]

    def product(m: Any) -> Any:
        assert times is not None  # only built with want_q
        small = times(m)
        out = xp.empty((rows, m.shape[1]), dtype=np.result_type(block.dtype, m.dtype))
        for (q, _), s, lo, hi in zip(factors, starts, offsets, offsets[1:]):
            xp.matmul(q, small[lo:hi], out=out[s : s + size])
        return out

    return r, top, product if want_q else None


def _combine_tree(r: Any, ks: list[int], comm: Any) -> tuple[Any, Any]:
    """The butterfly: (this rank's path product ``P_i``, the common ``R``)."""
    xp = array_module(r)
    p, me = comm.Get_size(), comm.Get_rank()
    n = r.shape[1]
    path = xp.eye(ks[me], dtype=r.dtype)
    half = 1 << (p.bit_length() - 1)  # the largest power of two <= p
    folds = [(e, e - half) for e in range(half, p)]
    folded: Any = None  # on a rank a fold went to: the extra rank's slice of the stacked Q
    if folds:
        got = coll.permute(r, folds, comm, recv_shape=(ks[me + half] if me + half < p else 0, n))
        if me + half < p:
            q2, r = xp.linalg.qr(xp.concatenate([r, got]))
            path, folded = path @ q2[: ks[me]], q2[ks[me] :]
        for extra, low in folds:
            ks[low] = min(ks[low] + ks[extra], n)
    bit = 1
    while bit < half:
        partner = me ^ bit
        pairs = [(i, i ^ bit) for i in range(half)]
        got = coll.permute(r, pairs, comm, recv_shape=(ks[partner] if me < half else 0, n))
        if me < half:
            # Both partners factor the same stack (the lower rank's R first): the same R.
            low = me < partner
            q2, r = xp.linalg.qr(xp.concatenate([r, got] if low else [got, r]))
            mine = q2[: ks[me]] if low else q2[ks[partner] :]
            path = path @ mine
            folded = None if folded is None else folded @ mine
        ks[:half] = [min(ks[i] + ks[i ^ bit], n) for i in range(half)]
        bit <<= 1
    if folds:  # the extra ranks get R and their path (packed in one message)
        k = ks[0]
        sizes = [(ks[e] * k + k * n) for e, _ in folds]
        if me + half < p:
            payload = xp.concatenate([folded.reshape(-1), r.reshape(-1)])
        else:
            payload = xp.empty(0, dtype=r.dtype)
        back = [(low, extra) for extra, low in folds]
        got = coll.permute(payload, back, comm, recv_shape=(sizes[me - half] if me >= half else 0,))
        if me >= half:
            path = got[: ks[me] * k].reshape(ks[me], k)
            r = got[ks[me] * k :].reshape(k, n)
    return path, r


def _combine_gather(r: Any, ks: list[int], comm: Any) -> tuple[Any, Any]:
    """One all-gather of every ``R_i`` and a QR of the stack on every rank."""
    xp = array_module(r)
    me = comm.Get_rank()
    stacked = coll.all_gather(xp.ascontiguousarray(r), 0, comm, sizes=ks)
    q2, r = xp.linalg.qr(stacked)
    start = sum(ks[:me])
    return q2[start : start + ks[me]], r


def _lapack_signs(top: np.ndarray, diagonal: np.ndarray, square: bool) -> np.ndarray:
    """The ``+-1`` per column of ``Q`` (row of ``R``) that gives LAPACK's factors.

    ``top`` holds the first ``k`` rows of ``Q`` (``square``: all of them).
    Gaussian elimination of ``top - diag(d)``, choosing each ``d_j`` so that
    the pivot is ``-tau_j`` with ``Re tau_j`` in [1, 2] (module docstring).
    Where LAPACK reflects nothing (``tau_j = 0``) the pivot is 0 instead: in
    the last row of a matrix with no rows below it, when its entry is real.
    An entry with no sign (LAPACK's ``alpha_j`` is 0) gets ``beta_j < 0``.
    """
    work = np.array(top, dtype=np.result_type(top.dtype, np.float64), copy=True)
    k = work.shape[1]
    signs = np.ones(k)
    tiny = 16 * np.finfo(np.float64).eps * max(k, 1)
    for j in range(k):
        c = work[j, j]
        if square and j == k - 1 and abs(c.imag) <= tiny:
            signs[j] = 1.0 if c.real >= 0 else -1.0  # Q's entry is d_j itself
            break
        if abs(c.real) > tiny:
            signs[j] = -1.0 if c.real > 0 else 1.0
        else:
            signs[j] = -1.0 if diagonal[j].real > 0 else 1.0
        pivot = c - signs[j]  # |pivot| >= 1: never a division by zero
        work[j + 1 :, j + 1 :] -= np.outer(work[j + 1 :, j] / pivot, work[j, j + 1 :])
    return signs


def tsqr(
    block: Any,
    rows: tuple[int, ...],
    comm: Any,
    want_q: bool,
    normalize: bool,
    combine: str = "tree",
    piece_bytes: int = PIECE_BYTES,
) -> tuple[Any, Callable[[Any], Any] | None]:
    """``R`` of the matrix whose row blocks (lengths ``rows``, rank order) are on ``comm``,
    and ``m -> (this rank's rows of Q) @ m`` with ``want_q``. Collective over ``comm``.

    With ``normalize``, the signs are LAPACK's (see the module docstring).
    ``combine`` is ``"tree"`` (the butterfly) or ``"gather"``; each rank
    factors its block by pieces of about ``piece_bytes``.
    """
    xp = array_module(block)
    p, me = comm.Get_size(), comm.Get_rank()
    n = block.shape[1]
    k = min(sum(rows), n)
    starts = np.concatenate([[0], np.cumsum(rows)]).tolist()
    heads = [max(0, min(starts[i + 1], k) - starts[i]) for i in range(p)]  # rows of Q[:k]
    r, top, times = _local_qr(block, want_q, heads[me] if normalize else 0, piece_bytes)
    combiner = _combine_gather if combine == "gather" else _combine_tree
    path, r = combiner(r, [min(s, n) for s in rows], comm)
    if normalize:
        tops = coll.all_gather(xp.ascontiguousarray(top @ path), 0, comm, sizes=heads)
        signs = _lapack_signs(to_host(tops), to_host(xp.diagonal(r)), k == sum(rows))
        # triu: a row's sign flip would make the zeros below the diagonal -0.0
        r = xp.triu(xp.asarray(signs)[:, None] * r)
        path = path * xp.asarray(signs)
    if times is None:
        return r, None
    return r, lambda m: times(path @ m)
