"""NumPy's uniform-bin histogram count of one block, with fewer passes and no allocations.

``np.histogram`` with a number of bins takes a fast path: per block of 65536
elements it drops the values outside the range, computes each bin index as
``int((x - first) / (last - first) * n)`` and corrects it by one where it
falls on the wrong side of an edge, then ``np.bincount``. Its corrections use
gathers (``edges[indices]``, ``edges[indices + 1]``) and clamps the last
edge in integers; at 10^7 float64 that count is most of a distributed
histogram's time.

:func:`uniform_counts` does the same arithmetic (the same float operations in
the same order, so the same index estimate) and the same corrections, with
less work: the clamp on the float estimate, one gather of each bin's (lower,
upper) edge pair as a complex number, and the last bin's "no increment" rule
as an infinite upper edge (the values counted are finite: NumPy refuses a
non-finite range). The counts are NumPy's exactly. Only float blocks whose dtype is the edges' take
it (:func:`fast_path_applies`); the caller falls back to ``np.histogram``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Elements per chunk, NumPy's own block: measured at 5 * 10^6 float64, 65536
# was a little faster than 32768 and 131072, and 20% faster than 8192.
CHUNK = 65536


def fast_path_applies(block: Any, edges: Any, first: Any, last: Any, weights: Any) -> bool:
    """Whether :func:`uniform_counts` gives NumPy's counts for this block (unweighted floats)."""
    dtype = np.asarray(block).dtype
    if not (
        weights is None
        and dtype in (np.dtype(np.float64), np.dtype(np.float32))
        and edges.dtype == dtype
        and np.asarray(first).dtype == dtype
        and np.asarray(last).dtype == dtype
    ):
        return False
    # A finite width keeps every estimate of a value in range within [0, n]
    # (an overflowing last - first makes NumPy's estimates NaN: leave it to NumPy).
    # A float32 clamp to n - 1 must be exact: n below 2**24.
    with np.errstate(over="ignore"):
        finite = bool(np.isfinite(np.subtract(last, first, dtype=dtype)))
    return finite and len(edges) - 1 < 2**24


def uniform_counts(block: Any, edges: Any, first: Any, last: Any, trim: bool) -> Any:
    """NumPy's ``np.histogram`` counts (intp) of ``block`` in ``len(edges) - 1`` equal bins.

    ``edges`` are NumPy's edges from ``first`` to ``last`` (its ``linspace``);
    ``trim`` drops the values outside ``[first, last]`` (and NaNs) first, as
    NumPy does for an explicit range; without it, every value must lie in the
    range (the range came from the data's own extremes).
    """
    data = np.ravel(block)  # a view for the contiguous local blocks
    n = len(edges) - 1
    counts = np.zeros(n, np.intp)
    denom = np.subtract(last, first, dtype=edges.dtype)  # NumPy's _unsigned_subtract for floats
    # Bin i's lower and upper edges side by side (real, imaginary), so one gather
    # fetches both; the last bin is closed: no upper edge.
    bounds = np.empty(n, np.complex64 if edges.dtype == np.float32 else np.complex128)
    bounds.real = edges[:-1]
    bounds.imag = edges[1:]
    bounds.imag[-1] = np.inf
    f = np.empty(min(CHUNK, data.size), edges.dtype)
    for start in range(0, data.size, CHUNK):
        x = data[start : start + CHUNK]
        if trim:
            keep = x >= first
            keep &= x <= last
            if not np.logical_and.reduce(keep):
                x = x[keep]
        fm = f[: x.size]
        # NumPy's estimate, operation for operation: ((x - first) / denom) * n ...
        np.subtract(x, first, out=fm)
        np.divide(fm, denom, out=fm)
        np.multiply(fm, n, out=fm)
        # ... at most n in range (n exactly on the last edge), where NumPy takes
        # n - 1: clamping the float before the truncation is the same.
        np.minimum(fm, n - 1, out=fm)
        index = fm.astype(np.intp)
        # NumPy's corrections: indices[x < edges[i]] -= 1, then, with the new index,
        # indices[(x >= edges[i + 1]) & (i != n - 1)] += 1. After a decrement the
        # increment cannot apply (x < edges[i]), so both test the first index's bin.
        pair = bounds[index]
        below = x < pair.real
        above = x >= pair.imag
        index[below] -= 1
        index[above] += 1
        counts += np.bincount(index, minlength=n)
    return counts
