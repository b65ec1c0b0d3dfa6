"""``eigh`` of a Hermitian matrix whose rows are on the ranks: parallel block Jacobi.

The ``n x n`` matrix ``A`` (row blocks as in :mod:`dmesh.ops.kernels.blocked`)
is diagonalized by two-sided block Jacobi, the method of choice when the
only fast kernels are GEMM and a small dense ``eigh``: no rank holds more
than ``2 (n / p) x n`` numbers, every step is local but one exchange of
blocks with the neighbouring ranks, and it is as robust as Jacobi is
(repeated, clustered, zero and graded eigenvalues alike).

The eigenvector matrix ``V`` (at first the identity) is cut into ``2p``
blocks of columns; with each block ``J`` goes ``H_J = A V_J``. Rank ``r``
holds two blocks, a *pair*, stored as rows (``V_J^T`` and ``H_J^T``, rows
contiguous). One *round*: every rank forms its pair's ``M = V_p^H A V_p =
V_p^H H_p`` (``2b x 2b``), diagonalizes it (``M = Q D Q^H``, LAPACK), and
rotates ``V_p <- V_p Q`` and ``H_p <- H_p Q`` (``H = A V`` holds for any
``V``: ``A`` itself is never needed again). Then the blocks move one step
along the round-robin tournament (the first block stays, the others move
around the ring of ``2p - 1`` places), so that in ``2p - 1`` rounds, a
*sweep*, every pair of blocks meets once. Sweeps repeat until none rotates:
every off-diagonal entry of every pair's ``M`` is negligible, below
``eps sqrt(|M_ii M_jj|)`` or ``sqrt(n) eps ||A||_F`` (the rounding of ``M``
itself). Then ``V^H A V`` is diagonal to rounding: the eigenvalues are its
diagonal (``Re(v_j^H h_j)``), sorted ascending, and ``V``'s columns in that
order are the eigenvectors, sent to the input's row blocks by one all-to-all.

Two details make it converge: ``Q``'s columns are reordered so that each
block keeps the directions closest to its own (the ones of largest weight in
its rows of ``Q``); LAPACK's ascending order would otherwise shuffle the
blocks every round and the iteration can stall. And the matrix is scaled by a
power of two near its largest modulus first (exact), so that neither tiny nor
huge entries underflow or overflow ``||A||_F``.

Cost per sweep and rank: about ``12 n^3 / p`` flops (three GEMMs per round),
5 to 15 sweeps, and ``2p - 1`` exchanges of ``4 n^2 / p`` numbers. Results
equal NumPy's to rounding (eigenvalues within a few ``eps ||A||``; the
eigenvectors are determined up to a unit factor per column, or a basis of
each eigenspace, as LAPACK's are), the eigenvalues are the same bits on every
rank, and a matrix holding NaN or inf gives NaN eigenvalues and eigenvectors.
"""

from __future__ import annotations

import math

import numpy as np
from mpi4py import MPI

import dmesh.collectives as coll
from dmesh.ops.kernels.blocked import RowBlocks

__all__ = ["MAX_SWEEPS", "jacobi_eigh"]

# Sweeps before np.linalg.LinAlgError (LAPACK's one-sided Jacobi allows 30;
# graded matrices at n = 512 take about 15 here).
MAX_SWEEPS = 60


def jacobi_eigh(
    local: np.ndarray, blocks: RowBlocks, lower: bool = True, vectors: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """(eigenvalues ascending, this rank's rows of the eigenvectors or None) (collective).

    ``local`` is this rank's rows of ``A`` (float64 or complex128); only its
    lower triangle (``lower``) or upper one is read, and the imaginary part
    of the diagonal is ignored, as LAPACK's ``heevd`` does. The eigenvalues
    are the same on every rank of ``blocks.comm``.
    """
    comm = blocks.comm
    n = local.shape[1]
    hermitian = _hermitian_rows(local, blocks, lower)
    largest = coll.all_reduce(np.array([_largest(hermitian)]), "max", comm)[0]
    real = np.dtype(local.dtype.char.lower())
    if largest == np.inf:  # NaN or inf somewhere: nothing is defined
        values = np.full(n, np.nan, real)
        return values, np.full_like(local, np.nan) if vectors else None
    scale = math.ldexp(1.0, math.frexp(largest)[1]) if largest > 0 else 1.0
    hermitian /= scale  # a power of two: exact
    pair = _Pair.start(hermitian, blocks)
    _sweep_until_diagonal(pair, _floor(hermitian, comm, n))
    own = np.real(np.einsum("ij,ij->i", pair.x.conj(), pair.h))
    everyone = np.concatenate(comm.allgather(own))  # rank order, each rank's rows in order
    order = np.argsort(everyone, kind="stable")
    values = (everyone[order] * scale).astype(real)
    if not vectors:
        return values, None
    sizes = np.diff(blocks.offsets)
    # A sweep brings every block home: rank r holds rows [offsets[r], offsets[r + 1]) of V^T.
    columns = coll.all_to_all(pair.x, 1, 0, comm, split_sizes=sizes, concat_sizes=sizes)
    return values, np.ascontiguousarray(columns[order].T)


def _hermitian_rows(local: np.ndarray, blocks: RowBlocks, lower: bool) -> np.ndarray:
    """This rank's rows of the Hermitian matrix whose ``lower`` (or upper) triangle ``A`` holds.

    The other triangle's rows are the conjugated columns of the given one:
    one all-to-all (the transpose).
    """
    n = local.shape[1]
    rows = np.arange(blocks.start, blocks.stop)[:, None]
    cols = np.arange(n)[None, :]
    strict = np.where(cols < rows if lower else cols > rows, local, 0)
    sizes = np.diff(blocks.offsets)
    mirrored = coll.all_to_all(strict, 1, 0, blocks.comm, split_sizes=sizes, concat_sizes=sizes)
    hermitian: np.ndarray = strict + mirrored.T.conj()
    own = np.arange(blocks.stop - blocks.start)
    hermitian[own, own + blocks.start] = np.real(local[own, own + blocks.start])
    return hermitian


def _largest(x: np.ndarray) -> float:
    """The largest modulus in ``x``: inf if any entry is NaN or inf (MPI's max of NaN
    depends on the order of the ranks; of inf it does not), 0 if empty."""
    if x.size == 0:
        return 0.0
    m = np.abs(x)
    return float(m.max()) if np.isfinite(m).all() else np.inf


def _floor(hermitian: np.ndarray, comm: MPI.Comm, n: int) -> float:
    """The modulus below which an entry of ``M`` is rounding: ``sqrt(n) eps ||A||_F``."""
    squares = coll.all_reduce(np.array([np.sum(np.abs(hermitian) ** 2)]), "sum", comm)[0]
    return math.sqrt(n) * float(np.finfo(np.float64).eps) * math.sqrt(squares)


class _Pair:
    """This rank's two blocks: rows ``[0, top)`` of ``x`` (``V^T``) and ``h`` (``H^T``), then
    the bottom block's; and where every block is (its id, by the tournament's places)."""

    def __init__(
        self, x: np.ndarray, h: np.ndarray, top: int, sizes: list[int], comm: MPI.Comm
    ) -> None:
        self.x, self.h, self.top, self.sizes, self.comm = x, h, top, sizes, comm
        p = comm.Get_size()
        self.tops, self.bottoms = list(range(0, 2 * p, 2)), list(range(1, 2 * p, 2))

    @classmethod
    def start(cls, hermitian: np.ndarray, blocks: RowBlocks) -> _Pair:
        """``V = I``, ``H = A``: the halves of each rank's rows are its blocks."""
        sizes = []
        for r in range(blocks.comm.Get_size()):
            b = blocks.offsets[r + 1] - blocks.offsets[r]
            sizes += [(b + 1) // 2, b // 2]
        n = hermitian.shape[1]
        x = np.eye(n, dtype=hermitian.dtype)[blocks.start : blocks.stop]
        # H_J^T = (A V_J)^T = (A[:, J])^T = conj(A[J, :]) for a Hermitian A.
        h = hermitian.conj()
        top = sizes[2 * blocks.comm.Get_rank()]
        return cls(x, h, top, sizes, blocks.comm)

    def rotate(self, floor: float) -> bool:
        """Diagonalize this pair's ``M`` unless it is diagonal to rounding; rotated?"""
        if len(self.x) == 0:
            return False
        m = self.x.conj() @ self.h.T
        m = (m + m.conj().T) / 2
        diagonal = np.abs(np.diagonal(m))
        off = np.abs(m - np.diag(np.diagonal(m)))
        eps = float(np.finfo(np.float64).eps)
        if np.all(off <= np.maximum(eps * np.sqrt(np.outer(diagonal, diagonal)), floor)):
            return False
        _, q = np.linalg.eigh(m)
        # Keep each block's own directions: the top block takes the columns of Q
        # with the most weight in its rows (each block's in their order).
        weight = np.sum(np.abs(q[: self.top]) ** 2, axis=0)
        ranked = np.argsort(-weight, kind="stable")
        q = q[:, np.concatenate([np.sort(ranked[: self.top]), np.sort(ranked[self.top :])])]
        self.x = q.T @ self.x
        self.h = q.T @ self.h
        return True

    def move(self) -> None:
        """One step of the tournament (collective): the first block stays, the others go
        round the ring ``tops[1] -> ... -> tops[p-1] -> bottoms[p-1] -> ... -> bottoms[0]
        -> tops[1]``."""
        p = self.comm.Get_size()
        if p == 1:
            return
        r = self.comm.Get_rank()
        top_rows, bottom_rows = slice(0, self.top), slice(self.top, len(self.x))
        tops = [self.tops[0], self.bottoms[0], *self.tops[1 : p - 1]]
        bottoms = [*self.bottoms[1:], self.tops[p - 1]]
        requests, incoming = [], {}
        # Rightwards: rank 0's bottom block, or rank r's top one (0 < r < p - 1).
        if r < p - 1:
            rows = bottom_rows if r == 0 else top_rows
            out = np.ascontiguousarray(np.stack([self.x[rows], self.h[rows]]))
            requests.append(self.comm.Isend(out, r + 1, 0))
        if r > 0:
            incoming["top"] = self._receive(tops[r], r - 1, 0, requests)
        # Leftwards: every bottom block but rank 0's.
        if r > 0:
            out = np.ascontiguousarray(np.stack([self.x[bottom_rows], self.h[bottom_rows]]))
            requests.append(self.comm.Isend(out, r - 1, 1))
        if r < p - 1:
            incoming["bottom"] = self._receive(bottoms[r], r + 1, 1, requests)
        MPI.Request.Waitall(requests)
        top = self._block(top_rows) if r == 0 else incoming["top"]
        bottom = self._block(top_rows) if r == p - 1 else incoming["bottom"]
        self.x = np.concatenate([top[0], bottom[0]])
        self.h = np.concatenate([top[1], bottom[1]])
        self.top = len(top[0])
        self.tops, self.bottoms = tops, bottoms

    def _block(self, rows: slice) -> np.ndarray:
        return np.stack([self.x[rows], self.h[rows]])

    def _receive(
        self, block: int, source: int, tag: int, requests: list[MPI.Request]
    ) -> np.ndarray:
        buffer = np.empty((2, self.sizes[block], self.x.shape[1]), self.x.dtype)
        requests.append(self.comm.Irecv(buffer, source, tag))
        return buffer


def _sweep_until_diagonal(pair: _Pair, floor: float) -> None:
    """Sweeps of ``2p - 1`` rounds until no pair rotates (collective)."""
    rounds = 2 * pair.comm.Get_size() - 1
    for _ in range(MAX_SWEEPS):
        rotated = 0
        for _ in range(rounds):
            rotated += pair.rotate(floor)
            pair.move()
        if coll.all_reduce(np.array([rotated]), "sum", pair.comm)[0] == 0:
            return
    raise np.linalg.LinAlgError("Eigenvalues did not converge")
