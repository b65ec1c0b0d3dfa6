"""Products written as NumPy calls on DArrays: ``kron``, ``cross``, ``multi_dot``, ``matrix_power``.

Each follows NumPy's own implementation step by step, with the DArray ops
that have rules (elementwise products, reshapes, ``np.dot``/``np.matmul``),
so the values are NumPy's: ``kron`` and ``cross`` are elementwise products
and differences in the promoted dtype (bit for bit); ``multi_dot`` chooses
NumPy's order of products from the shapes alone (every rank the same) and
``matmul``/``dot`` run by the contraction rules; ``matrix_power`` squares
and multiplies in NumPy's order. The ``np.linalg`` aliases of NumPy 2
(``outer``, ``tensordot``, ``cross``, ``trace``) check what NumPy checks and
forward. Every check reads shapes and dtypes, so errors are raised on every
rank before any message.
"""

from __future__ import annotations

import math
import operator
import string
import warnings
from typing import Any

import numpy as np

from dmesh.collectives.blocks import normalize_axis
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.core.placement import Replicate, Shard
from dmesh.creation import eye
from dmesh.darray import DArray
from dmesh.ops.registry import decompose
from dmesh.ops.rules.contractions import ndim_of, shape_of, take_diagonal

__all__ = ["chain_order", "cross", "kron", "matrix_power", "multi_dot", "tensorsolve"]


def _dtype_of(x: Any) -> np.dtype:
    return x.dtype if isinstance(x, DArray) else np.asarray(x).dtype


@decompose(np.kron)
def kron(a: Any, b: Any) -> Any:
    """``np.kron``: the outer product with each pair of dims interleaved, then merged.

    As NumPy: the operand with fewer dims gets leading length-1 dims,
    ``a``'s dims are spread to even positions and ``b``'s to odd ones, the
    broadcast product is taken and each pair ``(a dim, b dim)`` merged.
    """
    nda, ndb = ndim_of(a), ndim_of(b)
    if nda == 0 or ndb == 0:
        return np.multiply(a, b)
    nd = max(nda, ndb)
    as_ = (1,) * (nd - nda) + shape_of(a)
    bs = (1,) * (nd - ndb) + shape_of(b)
    a_arr = np.reshape(a, tuple(x for n in as_ for x in (n, 1)))
    b_arr = np.reshape(b, tuple(x for n in bs for x in (1, n)))
    product = np.multiply(a_arr, b_arr)
    return np.reshape(product, tuple(p * q for p, q in zip(as_, bs)))


@decompose(np.cross)
def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: Any = None) -> Any:  # fmt: skip
    """``np.cross``: NumPy's component formulas on DArrays, in the promoted dtype.

    Vectors of 2 and 3 components along ``axisa``/``axisb`` (``axis``
    overrides the three); the result's vector axis is ``axisc``. Collective
    where a vector axis is sharded (its components are taken by indexing).
    """
    if axis is not None:
        axisa, axisb, axisc = (axis,) * 3
    if ndim_of(a) < 1 or ndim_of(b) < 1:
        raise ValueError("At least one array has zero dimension")
    axisa = normalize_axis(operator.index(axisa), ndim_of(a), "axisa")
    axisb = normalize_axis(operator.index(axisb), ndim_of(b), "axisb")
    na, nb = shape_of(a)[axisa], shape_of(b)[axisb]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")
    if na == 2 or nb == 2:
        warnings.warn(
            "Arrays of 2-dimensional vectors are deprecated. Use arrays of "
            "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
            DeprecationWarning,
            stacklevel=2,
        )
    loops = np.broadcast_shapes(
        tuple(n for d, n in enumerate(shape_of(a)) if d != axisa),
        tuple(n for d, n in enumerate(shape_of(b)) if d != axisb),
    )
    if na == 3 or nb == 3:
        axisc = normalize_axis(operator.index(axisc), len(loops) + 1, "axisc")
    dtype = np.promote_types(_dtype_of(a), _dtype_of(b))
    if dtype == np.bool_:  # NumPy subtracts (or negates) in the promoted dtype
        raise TypeError(
            "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
            "the `^` operator, or the logical_xor function instead."
        )
    a = np.moveaxis(a, axisa, -1).astype(dtype)
    b = np.moveaxis(b, axisb, -1).astype(dtype)
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    if na == 2 and nb == 2:
        return a0 * b1 - a1 * b0
    if na == 2:  # a2 = 0
        b2 = b[..., 2]
        parts = [a1 * b2, np.negative(a0 * b2), a0 * b1 - a1 * b0]
    elif nb == 2:  # b2 = 0
        a2 = a[..., 2]
        parts = [np.negative(a2 * b1), a2 * b0, a0 * b1 - a1 * b0]
    else:
        a2, b2 = a[..., 2], b[..., 2]
        parts = [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0]
    return np.moveaxis(np.stack(parts, axis=-1), -1, axisc)


def chain_order(shapes: list[tuple[int, int]]) -> list[list[int]]:
    """NumPy's split table for a chain of matrices of these shapes (its dynamic program).

    ``s[i][j]`` is where the product of matrices ``i..j`` splits; costs tie
    as in NumPy (the first ``k`` with the least cost).
    """
    n = len(shapes)
    p = [shapes[0][0]] + [s[1] for s in shapes]
    m = [[0.0] * n for _ in range(n)]
    s = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            m[i][j] = math.inf
            for k in range(i, j):
                cost = m[i][k] + m[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if cost < m[i][j]:
                    m[i][j], s[i][j] = cost, k
    return s


@decompose(np.linalg.multi_dot)
def multi_dot(arrays: Any, *, out: Any = None) -> Any:
    """``np.linalg.multi_dot``: ``np.dot`` in NumPy's cheapest order of the chain.

    The order depends on the shapes only (a first 1-D operand counts as a row,
    a last one as a column, as in NumPy), so every rank makes the same products.
    """
    if out is not None:
        raise UnsupportedError("np.linalg.multi_dot on DArrays does not take out=")
    arrays = list(arrays)
    n = len(arrays)
    if n < 2:
        raise ValueError("Expecting at least two arrays.")
    if n == 2:
        return np.dot(arrays[0], arrays[1])
    shapes = [shape_of(x) for x in arrays]
    if len(shapes[0]) == 1:
        shapes[0] = (1, shapes[0][0])
    if len(shapes[-1]) == 1:
        shapes[-1] = (shapes[-1][0], 1)
    for shape in shapes:
        if len(shape) != 2:
            raise np.linalg.LinAlgError(
                f"{len(shape)}-dimensional array given. Array must be two-dimensional"
            )
    dims = [(s[0], s[1]) for s in shapes]
    if n == 3:  # NumPy's _multi_dot_three
        (a0, a1b0), (b1c0, c1) = dims[0], dims[2]
        if a0 * b1c0 * (a1b0 + c1) < a1b0 * c1 * (a0 + b1c0):
            return np.dot(np.dot(arrays[0], arrays[1]), arrays[2])
        return np.dot(arrays[0], np.dot(arrays[1], arrays[2]))
    split = chain_order(dims)

    def product(i: int, j: int) -> Any:
        if i == j:
            return arrays[i]
        return np.dot(product(i, split[i][j]), product(split[i][j] + 1, j))

    return product(0, n - 1)


def _identity_like(a: DArray) -> Any:
    """Identity matrices of ``a``'s shape and dtype, in a layout near ``a``'s (no messages)."""
    size, nd = a.shape[-1], a.ndim
    placements = [
        Shard(p.dim - (nd - 2)) if isinstance(p, Shard) and p.dim >= nd - 2 else Replicate()
        for p in a.placements
    ]
    one = eye(size, mesh=a.mesh, placements=placements, dtype=a.dtype)
    return one if nd == 2 else np.broadcast_to(one, a.shape)


@decompose(np.linalg.matrix_power)
def matrix_power(a: Any, n: Any) -> Any:
    """``np.linalg.matrix_power``: NumPy's repeated squaring by ``np.matmul`` (``inv``, n < 0)."""
    if not isinstance(a, DArray):
        raise ArgumentTypeError(f"np.linalg.matrix_power: expected a DArray, got {type(a)}")
    if a.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{a.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    if a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    try:
        n = operator.index(n)
    except TypeError as exc:
        raise TypeError("exponent must be an integer") from exc
    if a.dtype == object:
        raise UnsupportedError("np.linalg.matrix_power of an object DArray is not supported")
    if n == 0:
        return _identity_like(a)
    if n < 0:
        a = np.linalg.inv(a)
        n = -n
    if n == 1:
        return a
    if n == 2:
        return np.matmul(a, a)
    if n == 3:
        return np.matmul(np.matmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else np.matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else np.matmul(result, z)
    return result


@decompose(np.linalg.outer)
def linalg_outer(x1: Any, x2: Any, /) -> Any:
    """``np.linalg.outer``: ``np.outer`` of two 1-D operands (NumPy refuses others)."""
    if ndim_of(x1) != 1 or ndim_of(x2) != 1:
        raise ValueError(
            "Input arrays must be one-dimensional, but they are "
            f"x1.ndim={ndim_of(x1)} and x2.ndim={ndim_of(x2)}."
        )
    return np.outer(x1, x2)


@decompose(np.linalg.tensordot)
def linalg_tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    """``np.linalg.tensordot``: ``np.tensordot`` (axes by keyword)."""
    return np.tensordot(x1, x2, axes=axes)


@decompose(np.linalg.cross)
def linalg_cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """``np.linalg.cross``: ``np.cross`` of 3-component vectors only."""
    n1 = shape_of(x1)[axis] if ndim_of(x1) else 0
    n2 = shape_of(x2)[axis] if ndim_of(x2) else 0
    if n1 != 3 or n2 != 3:
        raise ValueError(
            "Both input arrays must be (arrays of) 3-dimensional vectors, "
            f"but they are {n1} and {n2} dimensional instead."
        )
    return np.cross(x1, x2, axis=axis)


@decompose(np.linalg.trace)
def linalg_trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """``np.linalg.trace``: the sum of diagonal ``offset`` of the last two axes.

    The diagonal of the ``k x k`` window that holds it is taken by each rank
    from its block (:func:`take_diagonal`, which replicates one of the two
    axes if both are sharded), then summed with ``np.sum(dtype=)``.
    """
    if not isinstance(x, DArray):
        raise ArgumentTypeError(f"np.linalg.trace: expected a DArray, got {type(x)}")
    if x.ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    offset = operator.index(offset)
    rows, cols = x.shape[-2:]
    if offset >= 0:
        k = max(0, min(rows, cols - offset))
        window = x[..., :k, offset : offset + k]
    else:
        k = max(0, min(rows + offset, cols))
        window = x[..., -offset : -offset + k, :k]
    batch = string.ascii_letters[: x.ndim - 2]
    diagonal, _ = take_diagonal(window, batch + "zz")
    if diagonal.ndim != x.ndim - 1:  # pragma: no cover (take_diagonal keeps one z)
        raise ArgumentError("np.linalg.trace: unexpected diagonal shape")
    return np.sum(diagonal, axis=-1, dtype=dtype)


@decompose(np.linalg.tensorsolve)
def tensorsolve(a: Any, b: Any, axes: Any = None) -> Any:
    """``np.linalg.tensorsolve``: NumPy's steps (``axes`` moved last, reshape, ``solve``)."""
    an, bn = ndim_of(a), ndim_of(b)
    if axes is not None:
        order = list(range(an))
        for k in axes:
            order.remove(k)
            order.insert(an, k)
        a = np.transpose(a, order)
    old_shape = shape_of(a)[-(an - bn) :]
    prod = math.prod(old_shape)
    if math.prod(shape_of(a)) != prod**2:
        raise np.linalg.LinAlgError(
            "Input arrays must satisfy the requirement "
            "prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])"
        )
    result = np.linalg.solve(np.reshape(a, (prod, prod)), np.ravel(b))
    return np.reshape(result, old_shape)
