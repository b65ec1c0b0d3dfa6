"""Square-matrix ``np.linalg`` of sharded DArrays: gathered when small, blocked when large.

``inv``, ``solve``, ``cholesky``, ``det``, ``slogdet``, ``eigh`` and the other
functions of :data:`~dmesh.ops.kernels.linalg_local.LOCAL_ONLY` take a
DArray in any layout:

* **replicated** (no ``Shard``): every rank computes NumPy's function on its
  copy (NumPy's bits);
* **sharded along stack dims only** (``(..., n, n)`` with a ``Shard`` of a
  leading dim) for ``inv``, ``det``, ``slogdet``, ``cholesky``, ``eigh`` and
  ``eigvalsh``: every rank computes its own matrices (NumPy's bits, no
  messages); the results keep the stack's sharding;
* **sharded along a matrix dim, at most** ``GATHER_THRESHOLD`` **elements**
  (``dmesh.ops.kernels.solvers.GATHER_THRESHOLD``, default ``2**22``: a
  2048 x 2048 matrix, 32 MiB of float64; change it with
  :func:`set_gather_threshold` or the :func:`gather_threshold` context
  manager): the matrix is replicated on every rank (one all-gather) and
  computed as above; ``inv`` and ``cholesky`` give their result in the
  matrix's placements again (a local slice);
* **larger** (one 2-D matrix): a blocked algorithm over the row blocks
  (:mod:`dmesh.ops.kernels.blocked`: no rank holds more than its rows and
  one panel): ``cholesky`` by blocked Cholesky; ``solve``, ``inv``, ``det``
  and ``slogdet`` by blocked LU with partial pivoting (the result of ``inv``
  and ``solve``'s ``x`` have the matrix's row blocks, ``det``/``slogdet``
  are replicated); ``eigh`` and ``eigvalsh`` by parallel block Jacobi
  (:mod:`dmesh.ops.kernels.jacobi_eigh`: no rank holds more than twice its
  rows; eigenvalues replicated, eigenvectors in the matrix's row blocks). A
  sharded column dim is moved to the rows first (one all-to-all). These
  equal NumPy's results to rounding, not bit for bit (the sums are grouped
  by panel; eigenvectors are unique only up to a unit factor, or a basis of
  each eigenspace), and replicated results are the same bits on every rank.
  The other functions (``eig``, ``pinv``...) and stacks raise
  ``UnsupportedError`` naming the threshold.

Every decision reads shapes, dtypes and placements only, so every rank takes
the same path and errors are raised on every rank before any message.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels import blocked
from dmesh.ops.kernels.jacobi_eigh import jacobi_eigh
from dmesh.ops.kernels.linalg_local import LOCAL_ONLY, compute_locally, solve_replicated
from dmesh.ops.kernels.linalg_operands import (
    by_rows,
    is_sharded,
    linalg_dtypes,
    matrix,
    operands,
    replicated,
    rows_layout,
)
from dmesh.ops.registry import decompose

__all__ = [
    "GATHER_THRESHOLD",
    "back_to",
    "by_stack",
    "gather_threshold",
    "matrix_sharded",
    "set_gather_threshold",
    "stack_sharded",
]

# A matrix (or stack) sharded along a matrix dim with at most this many elements is
# replicated on every rank and computed there; a larger one takes a blocked algorithm.
GATHER_THRESHOLD = 2**22

# Functions whose stack of matrices may be cut along its stack dims: their result's
# dtype and shape follow from the input's alone (not eig's, real or complex by value).
_BY_STACK = {"inv", "det", "slogdet", "cholesky", "eigh", "eigvalsh"}
_BLOCKED = ("cholesky", "solve", "inv", "det", "slogdet", "eigh", "eigvalsh")


def set_gather_threshold(elements: int) -> int:
    """Set ``GATHER_THRESHOLD`` (elements of the matrix) on this rank; returns the old value.

    Call it with the same value on every rank (the choice of algorithm must agree).
    """
    global GATHER_THRESHOLD
    if int(elements) < 0:
        raise ArgumentError(f"set_gather_threshold: a count of elements >= 0, got {elements}")
    old, GATHER_THRESHOLD = GATHER_THRESHOLD, int(elements)
    return old


@contextmanager
def gather_threshold(elements: int) -> Iterator[None]:
    """``GATHER_THRESHOLD`` set to ``elements`` inside the ``with`` block."""
    old = set_gather_threshold(elements)
    try:
        yield
    finally:
        set_gather_threshold(old)


def matrix_sharded(a: DArray) -> bool:
    """Whether one of the last two (matrix) dims of ``a`` is sharded."""
    return any(isinstance(p, Shard) and p.dim >= a.ndim - 2 for p in a.placements)


def stack_sharded(a: DArray) -> bool:
    """Whether one of the stack dims (all but the last two) of ``a`` is sharded."""
    return any(isinstance(p, Shard) and p.dim < a.ndim - 2 for p in a.placements)


def _square(a: DArray) -> None:
    if a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")


def _too_large(name: str, a: DArray) -> UnsupportedError:
    what = "for a stack of matrices" if a.ndim > 2 else f"for np.linalg.{name}"
    return UnsupportedError(
        f"np.linalg.{name} of a sharded {a.spec!r} ({a.size} elements, above the gather "
        f"threshold of {GATHER_THRESHOLD}): there is no distributed algorithm {what} "
        f"(blocked ones: {', '.join(_BLOCKED)} of one matrix). Raise the threshold to "
        "replicate it on every rank, dmesh.ops.kernels.solvers.set_gather_threshold(n), or "
        "replicate it yourself: x.redistribute(x.mesh, [Replicate()] * x.mesh.ndim)"
    )


def _replicate(a: DArray) -> DArray:
    return a.redistribute(a.mesh, [Replicate()] * a.mesh.ndim)


def back_to(result: DArray, a: DArray) -> DArray:
    """A replicated matrix result in ``a``'s placements (a local slice; Partial: Replicate)."""
    placements = [p if isinstance(p, Shard) else Replicate() for p in a.placements]
    if not any(isinstance(p, Shard) for p in placements):
        return result
    return result.redistribute(result.mesh, placements)


def by_stack(func: Any, a: DArray, kwargs: dict[str, Any]) -> Any:
    """``func`` of each rank's own matrices of a stack sharded along its stack dims only."""
    block = a.local if a.mesh.is_member else stand_in_block(a)
    result = func(block, **kwargs)
    stack = a.ndim - 2
    layout = a.spec.layout

    def wrap(x: Any) -> DArray:
        shape = (*a.shape[:stack], *x.shape[stack:])
        bounds = (*layout.bounds[:stack], *(None,) * (x.ndim - stack))
        placements: tuple[Placement, ...] = tuple(
            p if isinstance(p, Shard) and p.dim < stack else Replicate() for p in a.placements
        )
        spec = DArraySpec(a.mesh, Layout(layout.mesh_shape, placements, shape, bounds), x.dtype)
        local = x if a.mesh.is_member else np.empty(spec.local_shape(), x.dtype)
        return DArray(local, spec)

    if isinstance(result, tuple):
        items = [wrap(x) for x in result]
        return type(result)(*items) if hasattr(result, "_fields") else tuple(items)  # type: ignore[arg-type]
    return wrap(result)


def stand_in_block(a: DArray) -> Any:
    """Identity matrices in the shape of this rank's block (outside the mesh: no data)."""
    shape = a.spec.local_shape()
    return np.broadcast_to(np.eye(shape[-2], shape[-1], dtype=a.dtype), shape).copy()


def _local_or_gathered(func: Any, name: str, a: DArray, kwargs: dict[str, Any]) -> Any | None:
    """The result where no blocked algorithm is needed, else None (above the threshold)."""
    a = a.reduce_partials()
    if not matrix_sharded(a) and stack_sharded(a) and name in _BY_STACK:
        _square(a)
        return by_stack(func, a, kwargs)
    if not matrix_sharded(a) and not stack_sharded(a):
        return compute_locally(func, name, (a,), kwargs)
    if a.size <= GATHER_THRESHOLD:
        result = compute_locally(func, name, (_replicate(a),), kwargs)
        return back_to(result, a) if name in ("inv", "cholesky") and a.ndim == 2 else result
    return None


def _rows(a: DArray) -> tuple[DArray, blocked.RowBlocks | None]:
    """``a`` row-blocked (no Partial), and its row blocks (None outside the mesh)."""
    a = by_rows(a.reduce_partials())
    if not a.mesh.is_member:
        return a, None
    comm = a.mesh[sharding_mesh_dims(a.placements, 0)].comm()  # rank order is block order
    return a, blocked.RowBlocks.of(comm, a.spec.layout.sizes(0))


def _large(name: str, a: DArray) -> DArray:
    """``a`` checked for a blocked algorithm: one square matrix, else the threshold's error."""
    if a.ndim > 2 or name not in _BLOCKED:
        raise _too_large(name, a)
    _square(a)
    return a


def _local_only(func: Any) -> Callable[..., Any]:
    name = func.__name__

    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = [k for k, v in inspect.signature(func).parameters.items() if v.kind in kinds]

    def decomposition(*args: Any, **kwargs: Any) -> Any:
        if len(args) > len(parameters):
            raise TypeError(f"{name}() takes at most {len(parameters)} positional arguments")
        # Positional options (cond's p, eigh's UPLO) by name: the matrix is the first.
        kwargs = {**dict(zip(parameters[1:], args[1:])), **kwargs}
        first = operands(name, (args[0],))[0] if args else kwargs.pop(parameters[0])
        if any(isinstance(v, DArray) for v in kwargs.values()):  # e.g. pinv's rtol
            values = {k: v.reduce_partials() if isinstance(v, DArray) else v
                      for k, v in kwargs.items()}  # fmt: skip
            if any(isinstance(x, DArray) and x.mesh is not first.mesh for x in values.values()):
                raise UnsupportedError(f"np.linalg.{name}: DArray arguments on different meshes")
            if is_sharded(first) or any(is_sharded(x) for x in values.values()):
                raise UnsupportedError(
                    f"np.linalg.{name} with DArray arguments besides the matrix takes "
                    "replicated ones only; replicate them first"
                )
            return compute_locally(func, name, (first.reduce_partials(),), values)
        a = matrix(name, first)
        result = _local_or_gathered(func, name, a, kwargs)
        if result is not None:
            return result
        a = _large(name, a)
        return _LARGE[name](a, **kwargs)

    decomposition.__name__ = name
    decomposition.__doc__ = (
        f"``np.linalg.{name}`` of a DArray: replicated or stack-sharded ones computed locally, "
        "sharded ones gathered below ``GATHER_THRESHOLD`` elements"
        + (", blocked on the mesh above it." if name in _BLOCKED else ".")
    )
    return decomposition


def _cholesky(a: DArray, upper: bool = False) -> Any:
    compute, result = linalg_dtypes(a.dtype)
    a, blocks = _rows(a)
    spec = DArraySpec(a.mesh, rows_layout(a, a.shape), result)
    if blocks is None:
        low = DArray(np.empty(spec.local_shape(), result), spec)
    else:
        factor = blocked.blocked_cholesky(a.local.astype(compute), blocks, overwrite=True)
        low = DArray(factor.astype(result, copy=False), spec)
    return np.conj(low.T) if upper else low


def _lu(a: DArray) -> tuple[DArray, Any, np.dtype, np.dtype]:
    """Blocked LU of ``a``: (a row-blocked, (factors, perm, diagonal, singular, blocks) or
    None outside the mesh, compute dtype, result dtype)."""
    compute, result = linalg_dtypes(a.dtype)
    a, blocks = _rows(a)
    if blocks is None:
        return a, None, compute, result
    return (
        a,
        (*blocked.blocked_lu(a.local.astype(compute), blocks, overwrite=True), blocks),
        compute,
        result,
    )


def _sign_and_log(perm: np.ndarray, diagonal: np.ndarray, singular: bool) -> tuple[Any, Any]:
    """``slogdet`` from the LU's permutation and ``U``'s diagonal (the same on every rank)."""
    seen = np.zeros(len(perm), bool)
    cycles = 0
    for i in range(len(perm)):
        if not seen[i]:
            cycles += 1
            j = i
            while not seen[j]:
                seen[j] = True
                j = int(perm[j])
    parity = -1.0 if (len(perm) - cycles) % 2 else 1.0
    magnitude = np.abs(diagonal)
    if singular:
        return diagonal.dtype.type(0), np.float64(-np.inf)
    if diagonal.dtype.kind == "c":
        sign = diagonal.dtype.type(parity)
        for u, m in zip(diagonal, magnitude):
            sign = sign * (u / m)
    else:
        sign = diagonal.dtype.type(parity * (-1.0) ** int(np.count_nonzero(diagonal < 0)))
    return sign, np.sum(np.log(magnitude))


def _slogdet(a: DArray) -> Any:
    a, lu, _, result = _lu(a)
    real = np.dtype(result.char.lower())
    if lu is None:
        sign, log = np.ones((), result), np.zeros((), real)
    else:
        sign, log = _sign_and_log(lu[1], lu[2], lu[3])
    return np.linalg._linalg.SlogdetResult(
        replicated(np.asarray(sign, result), a.mesh), replicated(np.asarray(log, real), a.mesh)
    )


def _det(a: DArray) -> DArray:
    a, lu, _, result = _lu(a)
    if lu is None:
        return replicated(np.ones((), result), a.mesh)
    sign, log = _sign_and_log(lu[1], lu[2], lu[3])
    with np.errstate(over="ignore"):  # NumPy's det overflows to inf silently too
        value = np.asarray(sign * np.exp(log)).astype(result)
    return replicated(value, a.mesh)


def _solve_rows(a: DArray, b: DArray | None) -> DArray:
    """``x`` of ``a x = b`` by blocked LU (``b`` None: the identity, ``inv``)."""
    n = a.shape[0]
    a, lu, compute, result = _lu(a)
    if b is not None:
        b = b.reduce_partials().with_layout(rows_layout(a, b.shape))
        result = np.linalg.solve(np.eye(1, dtype=a.dtype), np.ones((1, 1), b.dtype)).dtype
    shape = (n, n) if b is None else b.shape
    spec = DArraySpec(a.mesh, rows_layout(a, shape), result)
    if lu is None:
        return DArray(np.empty(spec.local_shape(), result), spec)
    factors, perm, _, singular, blocks = lu
    if singular:
        raise np.linalg.LinAlgError("Singular matrix")
    if b is None:
        rhs = np.eye(n, dtype=compute)[blocks.start : blocks.stop]
    else:
        rhs = b.local.reshape(b.local.shape[0], 1 if b.ndim == 1 else b.shape[1])
    x = blocked.lu_solve(factors, perm, rhs, blocks)
    return DArray(x.reshape(spec.local_shape()).astype(result, copy=False), spec)


def _eigh(a: DArray, UPLO: str = "L", vectors: bool = True) -> Any:
    """``eigh`` by parallel block Jacobi: eigenvalues replicated, eigenvectors in ``a``'s rows."""
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    compute, result = linalg_dtypes(a.dtype)
    real = np.dtype(result.char.lower())
    a, blocks = _rows(a)
    n = a.shape[0]
    spec = DArraySpec(a.mesh, rows_layout(a, (n, n)), result)
    local: np.ndarray | None = None
    if blocks is None:
        values, local = np.empty(n, real), np.empty(spec.local_shape(), result)
    else:
        values, local = jacobi_eigh(a.local.astype(compute), blocks, UPLO == "L", vectors)
    w = replicated(values.astype(real, copy=False), a.mesh)
    if not vectors:
        return w
    v = DArray(np.asarray(local).astype(result, copy=False), spec)
    named: Any = np.linalg._linalg.EighResult  # typed for ndarrays
    return named(w, v)


_LARGE: dict[str, Callable[..., Any]] = {
    "eigh": _eigh,
    "eigvalsh": lambda a, UPLO="L": _eigh(a, UPLO, vectors=False),
    "cholesky": _cholesky,
    "det": _det,
    "slogdet": _slogdet,
    "inv": lambda a: _solve_rows(a, None),
}

for _func in LOCAL_ONLY:
    decompose(_func)(_local_only(_func))


@decompose(np.linalg.solve)
def solve(a: Any, b: Any) -> Any:
    """``np.linalg.solve`` of DArrays (collective).

    A replicated ``a`` (also one replicated here, below ``GATHER_THRESHOLD``
    elements): every rank solves its block of ``b``, which keeps its sharding
    along its columns (:func:`~dmesh.ops.kernels.linalg_local.solve_replicated`).
    A larger sharded matrix: blocked LU, ``b`` (1-D or 2-D) moved to the
    matrix's row blocks, ``x`` returned in them.
    """
    a, b = operands("solve", (a, b))
    a = matrix("solve", a)
    _square(a)
    if not matrix_sharded(a) and not stack_sharded(a):
        return solve_replicated(a.reduce_partials(), b)
    if a.size <= GATHER_THRESHOLD:
        return solve_replicated(_replicate(a.reduce_partials()), b)
    if a.ndim > 2 or not isinstance(b, DArray) or b.ndim > 2:
        raise _too_large("solve", a) if a.ndim > 2 else UnsupportedError(
            f"np.linalg.solve of a sharded {a.spec!r} above the gather threshold "
            f"({GATHER_THRESHOLD} elements) takes a DArray b of 1 or 2 dims, got "
            f"{type(b).__name__} of shape {np.shape(b)}"
        )  # fmt: skip
    if b.shape[0] != a.shape[0]:
        raise ArgumentError(
            f"np.linalg.solve: b has {b.shape[0]} rows, a is {a.shape[0]} x {a.shape[0]}"
        )
    return _solve_rows(a, b)
