"""``np.linalg`` on DArrays: TSQR for tall matrices with sharded rows, local solves.

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
   as :data:`COMBINE` ``= "gather"`` for comparison: it costs p n^2 memory and
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

**lstsq** factors ``[A | B]`` (B aligned to A's row blocks) with TSQR without
forming ``Q``: ``R_aug = [[R, C], [0, E]]`` with ``C = Q^H B``, so ``x`` is the
minimum-norm solution of the small ``R x = C`` (through the SVD of ``R``,
whose singular values are ``A``'s; the rank and cut-off follow NumPy's
``rcond``), and the residuals are the squared column norms of ``E``.

Layouts. A matrix sharded along its columns (``Shard(1)`` on some mesh dims)
is first redistributed so that those mesh dims shard its rows (one
all-to-all). ``Partial`` inputs are reduced first. Ranks outside the mesh
return empty blocks and never communicate. Every check uses shapes and specs
only, so errors are raised on every rank before any message.

**Local functions.** ``solve(a, b)`` needs a replicated ``a`` (it is small);
``b`` may stay sharded along its columns (or along its stack dims when ``a``
is one matrix): every rank solves its block. ``inv``, ``det``, ``eig`` and the
others in :data:`LOCAL_ONLY` run on replicated arguments only, where every
rank computes the result locally; sharded arguments raise an
``UnsupportedError`` naming what is supported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.device import array_module, to_host
from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    ShardingError,
    UnsupportedError,
)
from dmesh.context import implicit_replication_active
from dmesh.convert import distribute
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose

__all__ = ["COMBINE", "LOCAL_ONLY", "REPLICATED_MATRIX", "QRResult", "SVDResult"]

# How TSQR combines the R factors of the blocks: "tree" (butterfly) or "gather".
COMBINE = "tree"
# Rows per local piece: about 1 MiB of float64, at least twice the columns.
_PIECE_BYTES = 1 << 20

# Functions computed only from replicated arguments (every rank computes locally).
LOCAL_ONLY = (
    np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.eig, np.linalg.eigh,
    np.linalg.eigvals, np.linalg.eigvalsh, np.linalg.cholesky, np.linalg.pinv,
    np.linalg.matrix_rank, np.linalg.cond,
)  # fmt: skip
# Functions whose (first) matrix argument must not be sharded.
REPLICATED_MATRIX = (np.linalg.solve, *LOCAL_ONLY)

_SUPPORTED = (
    "on DArrays, np.linalg computes qr, lstsq and svd of a tall matrix with sharded rows "
    "(TSQR), solve with a replicated matrix (b may be sharded), and norm; the other "
    "functions (inv, det, eig, ...) only when every DArray argument is replicated"
)


class QRResult(NamedTuple):
    """``np.linalg.qr``'s result: ``Q`` row-sharded like the matrix, ``R`` replicated."""

    Q: DArray
    R: DArray


class SVDResult(NamedTuple):
    """``np.linalg.svd``'s result: ``U`` row-sharded like the matrix, ``S``, ``Vh`` replicated."""

    U: DArray
    S: DArray
    Vh: DArray


# -- the factorization (on blocks) ---------------------------------------------------------
def _piece_rows(n: int, itemsize: int) -> int:
    return max(2 * n, _PIECE_BYTES // max(n * itemsize, 1))


def _local_qr(block: Any, want_q: bool, head: int) -> tuple[Any, Any, Callable[[Any], Any] | None]:
    """``R``, the first ``head`` rows of ``Q`` and ``m -> Q @ m`` (with ``want_q``) of a block.

    The block is factored by pieces of rows that fit in cache, whose stacked
    ``R`` factors are factored again (recursively); ``Q`` is never formed
    unless asked, and then only as the product with ``m``, in one pass.
    """
    xp = array_module(block)
    rows, n = block.shape
    size = _piece_rows(n, block.itemsize)
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
    r, top, times = _local_qr(stacked, want_q, counts[0] if head else 0)
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


def _tsqr(
    block: Any, rows: tuple[int, ...], comm: Any, want_q: bool, normalize: bool
) -> tuple[Any, Callable[[Any], Any] | None]:
    """``R`` of the matrix whose row blocks (lengths ``rows``, rank order) are on ``comm``,
    and ``m -> (this rank's rows of Q) @ m`` with ``want_q``. Collective over ``comm``.

    With ``normalize``, the signs are LAPACK's (see the module docstring).
    """
    xp = array_module(block)
    p, me = comm.Get_size(), comm.Get_rank()
    n = block.shape[1]
    k = min(sum(rows), n)
    starts = np.concatenate([[0], np.cumsum(rows)]).tolist()
    heads = [max(0, min(starts[i + 1], k) - starts[i]) for i in range(p)]  # rows of Q[:k]
    r, top, times = _local_qr(block, want_q, heads[me] if normalize else 0)
    combine = _combine_gather if COMBINE == "gather" else _combine_tree
    path, r = combine(r, [min(s, n) for s in rows], comm)
    if normalize:
        tops = coll.all_gather(xp.ascontiguousarray(top @ path), 0, comm, sizes=heads)
        signs = _lapack_signs(to_host(tops), to_host(xp.diagonal(r)), k == sum(rows))
        r = xp.asarray(signs)[:, None] * r
        path = path * xp.asarray(signs)
    if times is None:
        return r, None
    return r, lambda m: times(path @ m)


# -- arguments and results -----------------------------------------------------------------
def _operands(name: str, args: tuple[Any, ...]) -> list[Any]:
    """The arguments with plain arrays made replicated DArrays (or refused, as dispatch does)."""
    mesh = next((x.mesh for x in args if isinstance(x, DArray)), None)
    if mesh is None:
        return list(args)
    out = []
    for i, x in enumerate(args):
        if isinstance(x, DArray):
            if x.mesh is not mesh:
                raise ShardingError(
                    f"np.linalg.{name}: operands 0 and {i} are on different meshes ({mesh!r} "
                    f"and {x.mesh!r}); redistribute one onto the other's mesh first"
                )
        elif isinstance(x, np.ndarray) and x.ndim:
            if not implicit_replication_active():
                raise ArgumentTypeError(
                    f"np.linalg.{name}: operand {i} is a {type(x).__name__} of shape {x.shape}, "
                    "mixed with DArrays; make it a DArray first, e.g. dmesh.distribute(x, mesh, "
                    "placements), or use it inside `with dmesh.implicit_replication():`"
                )
            x = distribute(x, mesh, [Replicate()] * mesh.ndim)
        out.append(x)
    return out


def _sharded(x: Any) -> bool:
    return isinstance(x, DArray) and any(isinstance(p, Shard) for p in x.placements)


def _sharded_error(name: str, x: DArray) -> UnsupportedError:
    return UnsupportedError(
        f"np.linalg.{name} of a sharded DArray ({x.spec!r}) is not supported: {_SUPPORTED}. "
        "Replicate a small matrix first: x.redistribute(x.mesh, [Replicate()] * x.mesh.ndim)"
    )


def _types(*dtypes: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(computation dtype, result dtype), chosen as NumPy's linalg does."""
    single, is_complex = True, False
    for dtype in dtypes:
        if dtype.kind in "fc":
            if dtype.itemsize not in ((4, 8) if dtype.kind == "f" else (8, 16)):
                raise ArgumentTypeError(f"array type {dtype} is unsupported in linalg")
            is_complex |= dtype.kind == "c"
            single &= dtype.itemsize == (4 if dtype.kind == "f" else 8)
        else:
            single = False
    compute = np.dtype(np.complex128 if is_complex else np.float64)
    result = np.dtype(np.complex64 if is_complex else np.float32) if single else compute
    return compute, result


def _replicated(value: Any, mesh: Any) -> DArray:
    """``value`` (the same on every rank) as a replicated DArray; empty outside the mesh."""
    value = value if hasattr(value, "shape") and not np.isscalar(value) else np.asarray(value)
    layout = Layout.balanced(mesh.shape, (Replicate(),) * mesh.ndim, tuple(value.shape))
    spec = DArraySpec(mesh, layout, np.dtype(value.dtype))
    if not mesh.is_member:
        value = np.empty(spec.local_shape(), value.dtype)
    return DArray(value, spec)


def _rows_layout(a: DArray, shape: tuple[int, ...]) -> Layout:
    """The layout of an array of ``shape`` whose dim 0 is cut like ``a``'s rows."""
    placements = tuple(Shard(0) if p == Shard(0) else Replicate() for p in a.placements)
    bounds = (a.spec.layout.bounds[0],) + (None,) * (len(shape) - 1)
    return Layout(a.mesh.shape, placements, shape, bounds)


def _by_rows(a: DArray) -> DArray:
    """``a`` (2-D, no Partial) with every sharding mesh dim on its rows."""
    if any(p == Shard(1) for p in a.placements):  # an all-to-all moves them to the rows
        return a.redistribute(a.mesh, [Shard(0) if p == Shard(1) else p for p in a.placements])
    return a


def _matrix(name: str, a: Any) -> DArray:
    """``a`` checked as NumPy checks a matrix argument (on its spec: every rank agrees)."""
    if not isinstance(a, DArray):
        raise ArgumentTypeError(f"np.linalg.{name}: expected a DArray matrix, got {type(a)}")
    if a.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{a.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    _types(a.dtype)
    return a


def _stack_error(name: str, a: DArray) -> UnsupportedError:
    return UnsupportedError(
        f"np.linalg.{name} of a sharded stack of matrices ({a.spec!r}) is not supported; "
        f"{_SUPPORTED}"
    )


# -- qr, svd, lstsq ----------------------------------------------------------------------
_QR_MODES = ("reduced", "complete", "r", "raw")


@decompose(np.linalg.qr)
def qr(a: Any, mode: str = "reduced") -> Any:
    """``np.linalg.qr`` of a DArray; TSQR where the rows are sharded (collective).

    Returns ``QRResult(Q, R)`` (``R`` alone for ``mode="r"``): ``Q`` has the
    rows' layout (``m x k``, ``k = min(m, n)``), ``R`` is replicated, and both
    equal NumPy's to rounding for a matrix of full column rank (see the module
    docstring). ``mode="complete"`` of a tall sharded matrix (``Q`` would be
    ``m x m``) and ``mode="raw"`` raise ``UnsupportedError``.
    """
    if mode not in _QR_MODES:
        raise ArgumentError(f"Unrecognized mode {mode!r}; use one of {_QR_MODES}")
    a = _matrix("qr", a)
    if not _sharded(a):
        result = _local(np.linalg.qr, "qr", (a.reduce_partials(),), {"mode": mode})
        return QRResult(*result) if mode in ("reduced", "complete") else result
    if a.ndim > 2:
        raise _stack_error("qr", a)
    m, n = a.shape
    if mode == "raw" or (mode == "complete" and m > n):
        raise UnsupportedError(
            f"np.linalg.qr(mode={mode!r}) of a sharded {m} x {n} matrix is not supported: "
            + (f"Q would be m x m ({m} x {m}), larger than the matrix itself; use "
               f"mode='reduced' (Q is {m} x {n})" if mode == "complete" else "TSQR has no "
               "single set of Householder reflectors to return; use mode='reduced' or 'r'")
        )  # fmt: skip
    a = _by_rows(a.reduce_partials())
    compute, result = _types(a.dtype)
    k = min(m, n)
    want_q = mode != "r"
    q_spec = DArraySpec(a.mesh, _rows_layout(a, (m, k)), result)
    if not a.mesh.is_member:
        r = _replicated(np.empty((k, n), result), a.mesh)
        return QRResult(DArray(np.empty(q_spec.local_shape(), result), q_spec), r) if want_q else r
    r, times = _factor(a, compute, want_q, normalize=True)
    r_out = _replicated(r.astype(result, copy=False), a.mesh)
    if times is None:
        return r_out
    q = times(array_module(r).eye(k, dtype=compute)).astype(result, copy=False)
    return QRResult(DArray(q, q_spec), r_out)


def _factor(
    a: DArray, compute: np.dtype, want_q: bool, normalize: bool, extra: Any = None
) -> tuple[Any, Callable[[Any], Any] | None]:
    """TSQR of the row-sharded ``a`` (with ``extra`` columns appended to each block)."""
    block = a.local.astype(compute, copy=False)
    if extra is not None:
        block = array_module(block).concatenate([block, extra.astype(compute, copy=False)], axis=1)
    comm = a.mesh[sharding_mesh_dims(a.placements, 0)].comm()  # rank order is block order
    return _tsqr(block, a.spec.layout.sizes(0), comm, want_q, normalize)


@decompose(np.linalg.svd)
def svd(
    a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False
) -> Any:
    """``np.linalg.svd`` of a DArray; where the rows are sharded, TSQR and the SVD of ``R``.

    ``U = Q @ U_R`` has the rows' layout; ``S`` and ``Vh`` are replicated.
    ``full_matrices=True`` (NumPy's default) of a tall sharded matrix and
    ``hermitian=True`` of a sharded one raise ``UnsupportedError``. Collective.
    """
    a = _matrix("svd", a)
    if not _sharded(a):
        kwargs = {"full_matrices": full_matrices, "compute_uv": compute_uv, "hermitian": hermitian}
        result = _local(np.linalg.svd, "svd", (a.reduce_partials(),), kwargs)
        return SVDResult(*result) if compute_uv else result
    if a.ndim > 2:
        raise _stack_error("svd", a)
    m, n = a.shape
    if hermitian or (full_matrices and compute_uv and m > n):
        raise UnsupportedError(
            f"np.linalg.svd of a sharded {m} x {n} matrix with "
            + ("hermitian=True is not supported" if hermitian else
               "full_matrices=True is not supported: U would be m x m; pass full_matrices=False")
        )  # fmt: skip
    a = _by_rows(a.reduce_partials())
    compute, result = _types(a.dtype)
    real = np.dtype(result.char.lower())
    k = min(m, n)
    u_spec = DArraySpec(a.mesh, _rows_layout(a, (m, k)), result)
    if not a.mesh.is_member:
        s = _replicated(np.empty(k, real), a.mesh)
        if not compute_uv:
            return s
        vh = _replicated(np.empty((n if full_matrices else k, n), result), a.mesh)
        return SVDResult(DArray(np.empty(u_spec.local_shape(), result), u_spec), s, vh)
    r, times = _factor(a, compute, compute_uv, normalize=compute_uv)
    xp = array_module(r)
    if times is None:
        return _replicated(xp.linalg.svd(r, compute_uv=False).astype(real), a.mesh)
    u_r, s, vh = xp.linalg.svd(r, full_matrices=full_matrices)
    u = times(u_r).astype(result, copy=False)
    return SVDResult(
        DArray(u, u_spec),
        _replicated(s.astype(real, copy=False), a.mesh),
        _replicated(vh.astype(result, copy=False), a.mesh),
    )


@decompose(np.linalg.lstsq)
def lstsq(a: Any, b: Any, rcond: Any = None) -> tuple[DArray, DArray, Any, DArray]:
    """``np.linalg.lstsq``: ``(x, residuals, rank, s)`` as NumPy, ``x`` replicated (collective).

    Where ``a``'s rows are sharded, by TSQR of ``[a | b]`` (``b`` is moved to
    ``a``'s row blocks); the rank and the minimum-norm solution come from the
    SVD of the small ``R``. ``rank`` is a NumPy integer, the others replicated
    DArrays.
    """
    a, b = _operands("lstsq", (a, b))
    if not isinstance(a, DArray) or not isinstance(b, DArray):
        raise ArgumentTypeError(
            "np.linalg.lstsq: a and b must be DArrays (or NumPy arrays inside "
            f"dmesh.implicit_replication()), got {type(a).__name__} and {type(b).__name__}"
        )
    if a.ndim != 2 or b.ndim not in (1, 2):
        bad = a.ndim if a.ndim != 2 else b.ndim
        raise np.linalg.LinAlgError(f"{bad}-dimensional array given. Array must be two-dimensional")
    if a.shape[0] != b.shape[0]:
        raise np.linalg.LinAlgError("Incompatible dimensions")
    compute, result = _types(a.dtype, b.dtype)
    if not _sharded(a):
        a, b = a.reduce_partials(), b.reduce_partials()
        if _sharded(b):  # b is no bigger than a, which every rank holds
            b = b.redistribute(b.mesh, [Replicate()] * b.mesh.ndim)
        blocks: list[Any] = [x.local if a.mesh.is_member else _stand_in(x) for x in (a, b)]
        x, residuals, rank, s = np.linalg.lstsq(blocks[0], blocks[1], rcond=rcond)
        return _replicated(x, a.mesh), _replicated(residuals, a.mesh), rank, _replicated(s, a.mesh)
    m, n = a.shape
    a = _by_rows(a.reduce_partials())
    b = b.reduce_partials().with_layout(_rows_layout(a, b.shape))
    cols = 1 if b.ndim == 1 else b.shape[1]
    real = np.dtype(result.char.lower())
    mesh = a.mesh
    if not mesh.is_member:
        x_shape = (n,) if b.ndim == 1 else (n, cols)
        empty = _replicated(np.empty(0, real), mesh)
        return _replicated(np.empty(x_shape, result), mesh), empty, 0, empty
    r_aug, _ = _factor(a, compute, False, False, b.local.reshape(b.local.shape[0], cols))
    x, residuals, rank, s = _small_lstsq(to_host(r_aug), m, n, rcond, compute)
    if b.ndim == 1:
        x = x[:, 0]
    return (
        _replicated(x.astype(result), mesh),
        _replicated(residuals.astype(real), mesh),
        np.int32(rank),
        _replicated(s.astype(real), mesh),
    )


def _small_lstsq(
    r_aug: np.ndarray, m: int, n: int, rcond: Any, compute: np.dtype
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Minimum-norm ``x`` of ``R x = C`` from ``R_aug = [R, C]`` (rows of ``[A | B]``'s R)."""
    r, c = r_aug[:, :n], r_aug[:, n:]
    u, s, vh = np.linalg.svd(r, full_matrices=False)
    eps = float(np.finfo(compute).eps)
    cut = eps * max(m, n) if rcond is None else (eps if rcond < 0 else float(rcond))
    rank = int(np.count_nonzero(s > cut * s[0])) if s.size else 0
    x = vh[:rank].conj().T @ ((u[:, :rank].conj().T @ c) / s[:rank, None])
    if rank == n and m > n:  # E's rows: A x - b is their image under Q
        residuals = np.sum(np.abs(c[n:]) ** 2, axis=0)
    else:
        residuals = np.empty(0, dtype=s.dtype)
    return x, residuals, rank, s


# -- solve and the local functions ----------------------------------------------------------
@decompose(np.linalg.solve)
def solve(a: Any, b: Any) -> Any:
    """``np.linalg.solve`` with a replicated matrix ``a``: every rank solves its block of ``b``.

    ``b`` keeps its sharding along its columns (and along stack dims when
    ``a`` is one matrix); a sharded system axis is replicated first (it is
    as long as ``a`` is wide). A sharded ``a`` raises ``UnsupportedError``.
    """
    a, b = _operands("solve", (a, b))
    if _sharded(a):
        raise _sharded_error("solve", a)
    if not isinstance(b, DArray):
        return _local(np.linalg.solve, "solve", (a.reduce_partials(), b), {})
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    size = a.shape[-1]
    system = 0 if b.ndim == 1 else b.ndim - 2
    if b.shape[system] != size:
        raise ArgumentError(
            f"np.linalg.solve: b has {b.shape[system]} rows along its axis {system}, a is "
            f"{size} x {size}"
        )
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if b.ndim > 1 else a.shape[:-2]
    # Axes whose blocks solve apart: b's columns, and its stack dims when a is one matrix.
    kept: set[int] = set()
    if b.ndim > 1:
        kept = {b.ndim - 1} | (set(range(b.ndim - 2)) if a.ndim == 2 else set())
    a, b = a.reduce_partials(), b.reduce_partials()
    if not _sharded(b):
        return _local(np.linalg.solve, "solve", (a, b), {})
    placements = tuple(
        p if not isinstance(p, Shard) or p.dim in kept else Replicate() for p in b.placements
    )
    bounds = tuple(
        b.spec.layout.bounds[d] if sharding_mesh_dims(placements, d) else None
        for d in range(b.ndim)
    )
    b = b.with_layout(Layout(b.mesh.shape, placements, b.shape, bounds))
    shape = (*batch, *b.shape[system:])
    shift = len(shape) - b.ndim
    out_placements: tuple[Placement, ...] = tuple(
        Shard(p.dim + shift) if isinstance(p, Shard) else p for p in placements
    )
    layout = Layout(b.mesh.shape, out_placements, shape, (None,) * shift + bounds)
    dtype = np.linalg.solve(np.eye(1, dtype=a.dtype), np.ones((1, 1), b.dtype)).dtype
    spec = DArraySpec(b.mesh, layout, dtype)
    if not b.mesh.is_member:
        return DArray(np.empty(spec.local_shape(), dtype), spec)
    if b.local.size == 0:  # solve nothing, but a singular a raises here as on the other ranks
        np.linalg.solve(a.local, np.ones((*a.shape[:-1], 1), b.dtype))
    x = np.linalg.solve(a.local, b.local).astype(dtype, copy=False)
    return DArray(x.reshape(spec.local_shape()), spec)


def _local(func: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func`` on replicated DArray arguments: computed on every rank, results replicated."""
    mesh = next(x.mesh for x in (*args, *kwargs.values()) if isinstance(x, DArray))

    def block(x: Any) -> Any:
        if not isinstance(x, DArray):
            return x
        # Outside the mesh there is no data: stand-ins of the same shapes give the specs.
        return x.local if mesh.is_member else _stand_in(x)

    result = func(*[block(x) for x in args], **{k: block(v) for k, v in kwargs.items()})
    return _wrap(result, mesh)


def _stand_in(x: DArray) -> Any:
    if x.ndim < 2:
        return np.ones(x.shape, x.dtype)
    return np.broadcast_to(np.eye(x.shape[-2], x.shape[-1], dtype=x.dtype), x.shape).copy()


def _wrap(result: Any, mesh: Any) -> Any:
    if isinstance(result, tuple):
        items = [_wrap(item, mesh) for item in result]
        return type(result)(*items) if hasattr(result, "_fields") else tuple(items)
    return _replicated(result, mesh)


def _replicated_only(func: Any) -> Callable[..., Any]:
    name = func.__name__

    def local_only(*args: Any, **kwargs: Any) -> Any:
        for x in (*args, *kwargs.values()):
            if _sharded(x):
                raise _sharded_error(name, x)
        operands = [
            x.reduce_partials() if isinstance(x, DArray) else x for x in _operands(name, args)
        ]
        values = {k: v.reduce_partials() if isinstance(v, DArray) else v for k, v in kwargs.items()}
        return _local(func, name, tuple(operands), values)

    local_only.__name__ = name
    local_only.__doc__ = (
        f"``np.linalg.{name}`` of replicated DArrays: every rank computes it locally; "
        "sharded arguments raise ``UnsupportedError``."
    )
    return local_only


for _func in LOCAL_ONLY:
    decompose(_func)(_replicated_only(_func))
