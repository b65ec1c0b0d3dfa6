"""``np.linalg`` on DArrays: TSQR for tall matrices with sharded rows, local solves.

**TSQR** (``qr``, ``lstsq``, ``svd``) for a tall ``m x n`` matrix whose rows are
sharded: see :mod:`dmesh.ops.kernels.tsqr` (the algorithm, its cost and the
signs that make ``Q`` and ``R`` equal NumPy's).

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

**Square-matrix functions** (``solve``, ``inv``, ``det``, ``cholesky``...):
:mod:`dmesh.ops.kernels.solvers` (replicated below a gather threshold,
blocked LU or Cholesky above it) on :mod:`dmesh.ops.kernels.linalg_local`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from dmesh.collectives.device import array_module, to_host
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.core.layout import sharding_mesh_dims
from dmesh.core.placement import Replicate
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels import solvers  # registers solve, inv, det, cholesky...
from dmesh.ops.kernels.linalg_local import LOCAL_ONLY, REPLICATED_MATRIX, compute_locally, stand_in
from dmesh.ops.kernels.linalg_operands import (
    by_rows,
    is_sharded,
    linalg_dtypes,
    matrix,
    operands,
    replicated,
    rows_layout,
    stack_error,
)
from dmesh.ops.kernels.tsqr import PIECE_BYTES, tsqr
from dmesh.ops.registry import decompose

__all__ = ["COMBINE", "LOCAL_ONLY", "REPLICATED_MATRIX", "QRResult", "SVDResult"]

# How TSQR combines the R factors of the blocks: "tree" (butterfly) or "gather"
# (read at each call, so that a benchmark or a test may switch it).
COMBINE = "tree"
# Bytes per piece of a rank's block in its local QR (tests make it small).
_PIECE_BYTES = PIECE_BYTES


class QRResult(NamedTuple):
    """``np.linalg.qr``'s result: ``Q`` row-sharded like the matrix, ``R`` replicated."""

    Q: DArray
    R: DArray


class SVDResult(NamedTuple):
    """``np.linalg.svd``'s result: ``U`` row-sharded like the matrix, ``S``, ``Vh`` replicated."""

    U: DArray
    S: DArray
    Vh: DArray


# -- qr, svd, lstsq ----------------------------------------------------------------------
_QR_MODES = ("reduced", "complete", "r", "raw")


@decompose(np.linalg.qr)
def qr(a: Any, mode: str = "reduced") -> Any:
    """``np.linalg.qr`` of a DArray; TSQR where the rows are sharded (collective).

    Returns ``QRResult(Q, R)`` (``R`` alone for ``mode="r"``): ``Q`` has the
    rows' layout (``m x k``, ``k = min(m, n)``), ``R`` is replicated, and both
    equal NumPy's to rounding for a matrix of full column rank (see the module
    docstring). Stacks sharded along their stack dims are factored by each
    rank; ``mode="complete"`` (``Q`` is ``m x m``), ``mode="raw"`` and stacks
    sharded along a matrix dim are computed replicated below the gather
    threshold (``Q`` then goes back to the input's layout) and raise
    ``UnsupportedError`` above it.
    """
    if mode not in _QR_MODES:
        raise ArgumentError(f"Unrecognized mode {mode!r}; use one of {_QR_MODES}")
    a = matrix("qr", a)
    m, n = a.shape[-2:]
    tsqr_fits = a.ndim == 2 and mode != "raw" and not (mode == "complete" and m > n)
    result = _without_tsqr(np.linalg.qr, "qr", a, {"mode": mode}, tsqr_fits, m * m)
    if result is not None:
        return QRResult(*result) if mode in ("reduced", "complete") else result
    if a.ndim > 2:
        raise stack_error("qr", a)
    if not tsqr_fits:
        raise UnsupportedError(
            f"np.linalg.qr(mode={mode!r}) of a sharded {m} x {n} matrix above the gather "
            f"threshold ({solvers.GATHER_THRESHOLD} elements) is not supported: "
            + (f"Q would be m x m ({m} x {m}), larger than the matrix itself; use "
               f"mode='reduced' (Q is {m} x {n})" if mode == "complete" else "TSQR has no "
               "single set of Householder reflectors to return; use mode='reduced' or 'r'")
        )  # fmt: skip
    a = by_rows(a.reduce_partials())
    compute, result = linalg_dtypes(a.dtype)
    k = min(m, n)
    want_q = mode != "r"
    q_spec = DArraySpec(a.mesh, rows_layout(a, (m, k)), result)
    if not a.mesh.is_member:
        r = replicated(np.empty((k, n), result), a.mesh)
        return QRResult(DArray(np.empty(q_spec.local_shape(), result), q_spec), r) if want_q else r
    r, times = _factor(a, compute, want_q, normalize=True)
    r_out = replicated(r.astype(result, copy=False), a.mesh)
    if times is None:
        return r_out
    q = times(array_module(r).eye(k, dtype=compute)).astype(result, copy=False)
    return QRResult(DArray(q, q_spec), r_out)


def _without_tsqr(
    func: Any, name: str, a: DArray, kwargs: dict[str, Any], tsqr_fits: bool, square: int
) -> Any:
    """``func(a)`` where TSQR is not the way, else None (collective).

    Replicated: computed on every rank. Sharded along stack dims only: each
    rank factors its own matrices. Sharded along a matrix dim where TSQR
    does not apply (a stack, ``mode="complete"``...): replicated on every rank
    and computed there if the matrix and the ``m x m`` factor (``square``
    elements per matrix) fit under the gather threshold; the first factor
    (``Q``, ``U``) then goes back to ``a``'s layout.
    """
    if not is_sharded(a):
        return compute_locally(func, name, (a.reduce_partials(),), kwargs)
    a = a.reduce_partials()
    if not solvers.matrix_sharded(a):
        return solvers.by_stack(func, a, kwargs)
    stack = a.size // max(a.shape[-1] * a.shape[-2], 1)
    if tsqr_fits or max(a.size, stack * square) > solvers.GATHER_THRESHOLD:
        return None
    result = compute_locally(
        func, name, (a.redistribute(a.mesh, [Replicate()] * a.mesh.ndim),), kwargs
    )
    if isinstance(result, tuple) and result[0].shape == a.shape[:-2] + (a.shape[-2],) * 2:
        return (solvers.back_to(result[0], a), *result[1:])
    return result


def _factor(
    a: DArray, compute: np.dtype, want_q: bool, normalize: bool, extra: Any = None
) -> tuple[Any, Callable[[Any], Any] | None]:
    """TSQR of the row-sharded ``a`` (with ``extra`` columns appended to each block)."""
    block = a.local.astype(compute, copy=False)
    if extra is not None:
        block = array_module(block).concatenate([block, extra.astype(compute, copy=False)], axis=1)
    comm = a.mesh[sharding_mesh_dims(a.placements, 0)].comm()  # rank order is block order
    return tsqr(block, a.spec.layout.sizes(0), comm, want_q, normalize, COMBINE, _PIECE_BYTES)


@decompose(np.linalg.svd)
def svd(
    a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False
) -> Any:
    """``np.linalg.svd`` of a DArray; where the rows are sharded, TSQR and the SVD of ``R``.

    ``U = Q @ U_R`` has the rows' layout; ``S`` and ``Vh`` are replicated.
    Stacks sharded along their stack dims are computed by each rank;
    ``full_matrices=True`` (NumPy's default) of a tall sharded matrix,
    ``hermitian=True`` of a sharded one and stacks sharded along a matrix dim
    are computed replicated below the gather threshold and raise
    ``UnsupportedError`` above it. Collective.
    """
    a = matrix("svd", a)
    m, n = a.shape[-2:]
    kwargs = {"full_matrices": full_matrices, "compute_uv": compute_uv, "hermitian": hermitian}
    tsqr_fits = a.ndim == 2 and not (hermitian or (full_matrices and compute_uv and m > n))
    result = _without_tsqr(np.linalg.svd, "svd", a, kwargs, tsqr_fits, m * m)
    if result is not None:
        return SVDResult(*result) if compute_uv else result
    if a.ndim > 2:
        raise stack_error("svd", a)
    if not tsqr_fits:
        raise UnsupportedError(
            f"np.linalg.svd of a sharded {m} x {n} matrix above the gather threshold "
            f"({solvers.GATHER_THRESHOLD} elements) with "
            + ("hermitian=True is not supported" if hermitian else
               "full_matrices=True is not supported: U would be m x m; pass full_matrices=False")
        )  # fmt: skip
    a = by_rows(a.reduce_partials())
    compute, result = linalg_dtypes(a.dtype)
    real = np.dtype(result.char.lower())
    k = min(m, n)
    u_spec = DArraySpec(a.mesh, rows_layout(a, (m, k)), result)
    if not a.mesh.is_member:
        s = replicated(np.empty(k, real), a.mesh)
        if not compute_uv:
            return s
        vh = replicated(np.empty((n if full_matrices else k, n), result), a.mesh)
        return SVDResult(DArray(np.empty(u_spec.local_shape(), result), u_spec), s, vh)
    r, times = _factor(a, compute, compute_uv, normalize=compute_uv)
    xp = array_module(r)
    if times is None:
        return replicated(xp.linalg.svd(r, compute_uv=False).astype(real), a.mesh)
    u_r, s, vh = xp.linalg.svd(r, full_matrices=full_matrices)
    u = times(u_r).astype(result, copy=False)
    return SVDResult(
        DArray(u, u_spec),
        replicated(s.astype(real, copy=False), a.mesh),
        replicated(vh.astype(result, copy=False), a.mesh),
    )


@decompose(np.linalg.lstsq)
def lstsq(a: Any, b: Any, rcond: Any = None) -> tuple[DArray, DArray, Any, DArray]:
    """``np.linalg.lstsq``: ``(x, residuals, rank, s)`` as NumPy, ``x`` replicated (collective).

    Where ``a``'s rows are sharded, by TSQR of ``[a | b]`` (``b`` is moved to
    ``a``'s row blocks); the rank and the minimum-norm solution come from the
    SVD of the small ``R``. ``rank`` is a NumPy integer, the others replicated
    DArrays.
    """
    a, b = operands("lstsq", (a, b))
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
    compute, result = linalg_dtypes(a.dtype, b.dtype)
    if not is_sharded(a):
        a, b = a.reduce_partials(), b.reduce_partials()
        if is_sharded(b):  # b is no bigger than a, which every rank holds
            b = b.redistribute(b.mesh, [Replicate()] * b.mesh.ndim)
        blocks: list[Any] = [x.local if a.mesh.is_member else stand_in(x) for x in (a, b)]
        x, residuals, rank, s = np.linalg.lstsq(blocks[0], blocks[1], rcond=rcond)
        return replicated(x, a.mesh), replicated(residuals, a.mesh), rank, replicated(s, a.mesh)
    m, n = a.shape
    a = by_rows(a.reduce_partials())
    b = b.reduce_partials().with_layout(rows_layout(a, b.shape))
    cols = 1 if b.ndim == 1 else b.shape[1]
    real = np.dtype(result.char.lower())
    mesh = a.mesh
    if not mesh.is_member:
        x_shape = (n,) if b.ndim == 1 else (n, cols)
        empty = replicated(np.empty(0, real), mesh)
        return replicated(np.empty(x_shape, result), mesh), empty, 0, empty
    r_aug, _ = _factor(a, compute, False, False, b.local.reshape(b.local.shape[0], cols))
    x, residuals, rank, s = _small_lstsq(to_host(r_aug), m, n, rcond, compute)
    if b.ndim == 1:
        x = x[:, 0]
    return (
        replicated(x.astype(result), mesh),
        replicated(residuals.astype(real), mesh),
        np.int32(rank),
        replicated(s.astype(real), mesh),
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
