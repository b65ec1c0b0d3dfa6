"""NumPy's uniform-bin histogram count of one block, with fewer passes and no allocations.

``np.histogram`` with a number of bins takes a fast path: per block of 65536
elements it drops the values outside the range, computes each bin index as
``int((x - first) / (last - first) * n)`` and corrects it by one where it
falls on the wrong side of an edge, then ``np.bincount``. Its corrections use
gathers (``edges[indices]``, ``edges[indices + 1]``) and clamps the last
edge in integers; at 10^7 float64 that count is most of a distributed
histogram's time.

:func:`uniform_counts` computes the same estimate (the same float operations
in the same order) and skips the corrections where they provably do not
apply: the estimate is monotone in ``x``, so an estimate whose fraction is
far enough from the estimates of the edges themselves (:func:`_thresholds`)
puts ``x`` strictly inside its bin, where NumPy's corrections leave it. The
few values near an edge (and every value, where the edges' estimates stray
more than a quarter of a bin) take NumPy's steps (:func:`_numpy_indices`),
with less work: the clamp on the float, one gather of each bin's (lower,
upper) edge pair as a complex number, and the closed last bin as an infinite
upper edge (the values counted are finite: NumPy refuses a non-finite range).
The counts are NumPy's exactly; at 5 * 10^6 float64 and 100 bins the count
took 16 ms against NumPy's 31 ms. Only float blocks whose dtype is the edges' take
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


def _thresholds(edges: Any, first: Any, denom: Any, n: int) -> tuple[Any, Any] | None:
    """Bounds on an estimate's fraction that prove its bin, or None where none are safe.

    The estimate ``f(x) = ((x - first) / denom) * n`` is a monotone function of
    ``x`` (each rounded step is), so ``f(x) > f(edges[j])`` proves
    ``x > edges[j]`` and ``f(x) < f(edges[j + 1])`` proves ``x < edges[j + 1]``.
    With ``d[k] = f(edges[k]) - k``, an ``f`` of integer part ``j`` and fraction
    ``r`` has ``x`` strictly inside bin ``j`` when ``r > max(d[:n])`` and
    ``r < 1 + min(d[1:])``: NumPy's estimate is then ``j`` and neither of its
    corrections applies. The two bounds, rounded inwards, in the edges' dtype.
    """
    dtype = edges.dtype
    fe = np.multiply(np.divide(np.subtract(edges, first), denom), n)  # the loop's operations
    d = fe.astype(np.float64) - np.arange(n + 1, dtype=np.float64)
    # Within a quarter of k, fe[k] - k is exact (Sterbenz; fe[0] - 0 always is).
    if not bool(np.all(np.abs(d) <= 0.25)):
        return None
    low, high_gap = np.float64(d[:n].max()), np.float64(d[1:].min())
    high = np.float64(1.0) + high_gap
    if high - 1.0 > high_gap:  # rounded up: one step down (high - 1 is exact)
        high = np.nextafter(high, -np.inf)
    low_t, high_t = dtype.type(low), dtype.type(high)
    if low_t < low:
        low_t = np.nextafter(low_t, dtype.type(np.inf))
    if high_t > high:
        high_t = np.nextafter(high_t, dtype.type(-np.inf))
    return low_t, high_t


def _numpy_indices(x: Any, bounds: Any, first: Any, denom: Any, n: int) -> Any:
    """NumPy's bin indices of ``x`` (all in range): its estimate and both corrections."""
    f = np.subtract(x, first)  # NumPy's estimate, operation for operation
    np.divide(f, denom, out=f)
    np.multiply(f, n, out=f)
    # At most n in range (n on the last edge), where NumPy takes n - 1: the
    # same as clamping the float before the truncation.
    np.minimum(f, n - 1, out=f)
    index = f.astype(np.intp)
    # NumPy's corrections: indices[x < edges[i]] -= 1, then, with the new index,
    # indices[(x >= edges[i + 1]) & (i != n - 1)] += 1. After a decrement the
    # increment cannot apply (x < edges[i]), so both test the first index's bin.
    pair = bounds[index]
    below = x < pair.real
    above = x >= pair.imag
    index[below] -= 1
    index[above] += 1
    return index


def uniform_counts(block: Any, edges: Any, first: Any, last: Any, trim: bool) -> Any:
    """NumPy's ``np.histogram`` counts (intp) of ``block`` in ``len(edges) - 1`` equal bins.

    ``edges`` are NumPy's edges from ``first`` to ``last`` (its ``linspace``);
    ``trim`` drops the values outside ``[first, last]`` (and NaNs) first, as
    NumPy does for an explicit range; without it, every value must lie in the
    range (the range came from the data's own extremes).
    """
    data = np.ravel(block)  # a view for the contiguous local blocks
    n = len(edges) - 1
    dtype = edges.dtype
    counts = np.zeros(n, np.intp)
    denom = np.subtract(last, first, dtype=dtype)  # NumPy's _unsigned_subtract for floats
    # Bin i's lower and upper edges side by side (real, imaginary), so one gather
    # fetches both; the last bin is closed: no upper edge.
    bounds = np.empty(n, np.complex64 if dtype == np.float32 else np.complex128)
    bounds.real = edges[:-1]
    bounds.imag = edges[1:]
    bounds.imag[-1] = np.inf
    limits = _thresholds(edges, first, denom, n)
    size = min(CHUNK, data.size)
    f, whole = np.empty(size, dtype), np.empty(size, dtype)
    sure, below = np.empty(size, np.bool_), np.empty(size, np.bool_)
    index = np.empty(size, np.intp)
    for start in range(0, data.size, CHUNK):
        x = data[start : start + CHUNK]
        if trim:
            keep = x >= first
            keep &= x <= last
            if not np.logical_and.reduce(keep):
                x = x[keep]
        if limits is None:
            counts += np.bincount(_numpy_indices(x, bounds, first, denom, n), minlength=n)
            continue
        m = x.size
        fm, wm, sm, bm, im = f[:m], whole[:m], sure[:m], below[:m], index[:m]
        np.subtract(x, first, out=fm)  # NumPy's estimate (see _thresholds)
        np.divide(fm, denom, out=fm)
        np.multiply(fm, n, out=fm)
        np.trunc(fm, out=wm)
        np.subtract(fm, wm, out=fm)  # the fraction, exactly
        np.greater(fm, limits[0], out=sm)
        np.less(fm, limits[1], out=bm)
        np.logical_and(sm, bm, out=sm)
        np.copyto(im, wm, casting="unsafe")
        if not np.logical_and.reduce(sm):  # near an edge: NumPy's own steps
            unsure = np.flatnonzero(~sm)
            im[unsure] = _numpy_indices(x[unsure], bounds, first, denom, n)
        counts += np.bincount(im, minlength=n)
    return counts
