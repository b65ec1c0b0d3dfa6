"""Inputs every rank can rebuild for any rank, and NumPy references on one process."""

from __future__ import annotations

from typing import Any

import numpy as np

DTYPES = [
    np.bool_, np.int8, np.uint16, np.int32, np.int64, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
]  # fmt: skip
DATA_MOVEMENT_DTYPES = [
    np.bool_,
    np.int8,
    np.uint32,
    np.int64,
    np.float16,
    np.float64,
    np.complex128,
]


def rank_array(shape: tuple[int, ...], dtype: Any, rank: int, seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s input: deterministic in (shape, dtype, rank, seed) on every rank."""
    rng = np.random.default_rng([seed, rank, len(shape), *shape])
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        # Small values so that products of 4 ranks stay in range of every width.
        low = 0 if dtype.kind == "u" else -3
        return rng.integers(low, 4, size=shape).astype(dtype)
    values = rng.standard_normal(shape) + 0.5
    if dtype.kind == "c":
        values = values + 1j * (rng.standard_normal(shape) - 0.25)
    return np.asarray(values).astype(dtype)


def reduce_reference(op: str, arrays: list[np.ndarray]) -> np.ndarray:
    """What reducing ``arrays`` (one per rank) with ``op`` gives, computed on one process."""
    stack = np.stack(arrays)
    dtype = stack.dtype
    if op == "avg":
        wide = np.float64 if dtype.kind in "biuf" else np.complex128
        mean = stack.astype(wide).sum(axis=0) / len(arrays)
        result_dtype = np.float64 if dtype.kind in "biu" else dtype
        return np.asarray(mean.astype(result_dtype))
    if dtype.kind == "b":
        logical = {
            "sum": np.logical_or, "max": np.logical_or, "bor": np.logical_or,
            "lor": np.logical_or, "prod": np.logical_and, "min": np.logical_and,
            "band": np.logical_and, "land": np.logical_and, "bxor": np.logical_xor,
            "lxor": np.logical_xor,
        }[op]  # fmt: skip
        return np.asarray(logical.reduce(stack, axis=0))
    if op in ("land", "lor", "lxor"):
        ufunc = {"land": np.logical_and, "lor": np.logical_or, "lxor": np.logical_xor}[op]
        return np.asarray(ufunc.reduce(stack, axis=0).astype(dtype))
    ufunc = {
        "sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
        "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor,
    }[op]  # fmt: skip
    return np.asarray(ufunc.reduce(stack, axis=0, dtype=dtype))


def valid_pair(op: str, dtype: Any) -> bool:
    """Whether ``op`` is defined for ``dtype`` (complex is unordered; bitwise needs integers)."""
    kind = np.dtype(dtype).kind
    if op in ("min", "max"):
        return kind != "c"
    if op in ("band", "bor", "bxor", "land", "lor", "lxor"):
        return kind in "biu"
    return True


def tolerance(op: str, dtype: Any) -> dict[str, float]:
    """Reduction order differs between MPI and NumPy: floats compare to a tolerance."""
    kind = np.dtype(dtype).kind
    if kind not in "fc" and op != "avg":
        return {}
    precision = np.finfo(np.dtype(dtype)).eps if kind in "fc" else 1e-15
    return {"rtol": float(64 * precision), "atol": float(64 * precision)}
