"""The result dtype of a traced call, from NumPy on placeholder arrays (no real data)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from dmesh.darray import DArray
from dmesh.ops.compiler.signature import rebuild

__all__ = ["result_dtype"]

# A placeholder of a global shape is computed in full only up to this many elements.
PROBE_LIMIT = 1 << 16


def _darrays(obj: Any) -> list[DArray]:
    found: list[DArray] = []
    rebuild(obj, found.append)
    return found


def result_dtype(
    func: Any,
    args: tuple[Any, ...],
    kw: dict[str, Any],
    label: str,
    fail: Callable[[str], NoReturn],
) -> np.dtype:
    """The result dtype of ``func(*args, **kw)``: NumPy on placeholders of the operands' dtypes.

    Placeholders are ones of the global shape with each length cut to one
    (then of the full shape, if small) and never touch the real data, so the
    answer is the same on every rank. A call that fails on both calls ``fail``
    with the reason (the tracer's graph break).
    """
    error: Exception | None = None
    for cut in (True, False):
        if not cut and any(x.size > PROBE_LIMIT for x in _darrays((args, kw))):
            break

        def probe(x: Any, cut: bool = cut) -> Any:
            if not isinstance(x, DArray):
                return x
            shape = tuple(min(n, 1) for n in x.shape) if cut else x.shape
            return np.broadcast_to(np.ones((), x.dtype), shape)

        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = func(*rebuild(args, probe), **rebuild(kw, probe))
        except Exception as exc:
            error = exc
            continue
        if isinstance(result, (tuple, list)) or not hasattr(result, "dtype"):
            fail(f"{label}: a result that is not one array")
        dtype: np.dtype = np.dtype(result.dtype)
        return dtype
    fail(f"{label}: its result dtype is unknown ({type(error).__name__}: {error})")
