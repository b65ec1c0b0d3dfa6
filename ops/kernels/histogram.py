"""``np.histogram``, ``histogram_bin_edges``, ``histogram2d``, ``histogramdd`` and ``bincount``
of DArrays: a local count per block and one all-reduce of the counts.

The bin edges are NumPy's own: where they depend on the data (an integer
``bins`` without ``range``), the global minimum and maximum come from two
reductions, and NumPy computes the edges (and makes every check and raises
every error) from a two-element stand-in holding them, on every rank alike.
Each rank then counts its block with NumPy, with the edges fixed (for
``histogram`` as the same ``bins``/``range`` NumPy's uniform fast path takes),
so each element falls in the bin NumPy puts it in, and one all-reduce over
the mesh dims that shard the data (replicas count once) sums the counts. The
results are small and replicated. String ``bins`` (NumPy's width estimators but
``'stone'``) take the data's size, extremes, quartiles or moments from
dispatched reductions (see :func:`_estimated`). Integer counts are exact; weighted sums
of floats are added per block, then across blocks, so they can differ from
NumPy's sequential sums in the last bits (the same bits on every rank).
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.core.layout import Layout
from dmesh.core.placement import Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels.histogram_count import fast_path_applies, uniform_counts
from dmesh.ops.registry import decompose

_hist: Any = importlib.import_module("numpy.lib._histograms_impl")  # NumPy's own helpers


def replicated(value: Any, mesh: Any) -> DArray:
    """``value`` (the same on every rank) as a replicated DArray on ``mesh``."""
    value = np.asarray(value)
    layout = Layout.balanced(mesh.shape, (Replicate(),) * mesh.ndim, value.shape)
    return DArray(value, DArraySpec(mesh, layout, value.dtype))


def summed(local: Any, a: DArray) -> Any:
    """The sum of ``local`` over the distinct blocks of ``a`` (replicas count once)."""
    dims = tuple(
        m for m, p in enumerate(a.placements) if isinstance(p, Shard) and a.mesh.shape[m] > 1
    )
    if not dims or a.mesh.coordinate is None:
        return local
    return coll.all_reduce(np.ascontiguousarray(local), "sum", a.mesh[dims].comm())


def extremes(a: DArray, axis: Any = None) -> tuple[Any, Any]:
    """NumPy scalars (or arrays along ``axis``) of the global min and max of ``a``."""
    low = np.asarray(np.min(a, axis=axis).full_array())
    high = np.asarray(np.max(a, axis=axis).full_array())
    return (low[()], high[()]) if axis is None else (low, high)


def _block_weights(weights: Any, a: DArray, name: str) -> Any:
    """This rank's weights of ``a``'s block: a DArray moved to ``a``'s layout or an array sliced."""
    if weights is None:
        return None
    if tuple(np.shape(weights)) != a.shape:
        raise ArgumentError(f"np.{name}: weights should have the same shape as a.")
    if isinstance(weights, DArray):
        return np.asarray(weights.reduce_partials().with_layout(a.spec.layout).local)
    if a.mesh.coordinate is None:
        return np.asarray(weights)[:0]
    return np.asarray(weights)[a.spec.layout.slices(a.mesh.coordinate)]


def _prepared(a: Any, name: str) -> DArray:
    if not isinstance(a, DArray):
        raise UnsupportedError(
            f"np.{name}: the data must be the DArray (a DArray as bins, range or weights of a "
            "NumPy array is not supported); gather the small argument with .full_array()"
        )
    data: DArray = a.reduce_partials()
    if data.dtype == np.bool_:  # NumPy's conversion, and its warning
        warnings.warn(
            f"Converting input from {data.dtype} to {np.uint8} for compatibility.",
            RuntimeWarning,
            stacklevel=4,
        )
        data = data.astype(np.uint8)
    return data


def _edges(a: DArray, bins: Any, range: Any, name: str, weighted: bool = False) -> tuple[Any, Any]:
    """NumPy's bin edges, and the ``(bins, range)`` each rank's count uses."""
    if isinstance(bins, str):
        if bins in _hist._hist_bin_selectors and weighted:
            raise ArgumentTypeError(
                "Automated estimation of the number of bins is not supported for weighted data"
            )
        bins, range = _estimated(a, bins, range, name)
    if isinstance(bins, DArray) or isinstance(range, DArray):
        raise UnsupportedError(f"np.{name}: bins and range must be NumPy values, not DArrays")
    stand_in = np.zeros(0, a.dtype)
    if np.ndim(bins) == 0 and range is None and a.size:
        stand_in = np.array(extremes(a), dtype=a.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            edges = np.histogram_bin_edges(stand_in, bins, range)
        except ValueError as exc:
            raise ArgumentError(str(exc)) from exc
        except TypeError as exc:
            raise ArgumentTypeError(str(exc)) from exc
    if np.ndim(bins) == 0 and a.size:
        return edges, (bins, range if range is not None else (stand_in[0], stand_in[1]))
    return edges, (bins, range)


def _estimated(a: DArray, name: str, range: Any, func: str) -> tuple[int, Any]:
    """NumPy's ``bins=<estimator>``: the number of bins and the range it makes.

    As ``numpy.lib._histograms_impl._get_bin_edges``: the data is trimmed to
    ``range``, and the width comes from the trimmed data's size, min and max
    (``sqrt``, ``sturges``, ``rice``), quartiles (``fd``, ``auto``: exact, by
    selection) or moments (``scott``, ``doane``: distributed sums, so a
    width on a bin count's edge may round the other way than NumPy's).
    """
    if name not in _hist._hist_bin_selectors:
        raise ArgumentError(f"{name!r} is not a valid estimator for `bins`")
    if name == "stone":
        raise UnsupportedError(
            f"np.{func}(bins='stone') on DArrays is not supported (it scores a hundred "
            "histograms); give another estimator, a number of bins or the edges"
        )
    stand_in = np.array(extremes(a), dtype=a.dtype) if a.size else np.zeros(0, a.dtype)
    try:
        first, last = _hist._get_outer_edges(stand_in, range)
    except ValueError as exc:
        raise ArgumentError(str(exc)) from exc
    x: Any = np.ravel(a)
    if range is not None:
        keep = (x >= first) & (x <= last)
        if not bool(np.all(keep)):
            x = x[keep]
    if x.size == 0:
        return 1, (first, last)
    width = _width(x, name)
    if width:
        if np.issubdtype(x.dtype, np.integer) and width < 1:
            width = 1
        delta = _hist._unsigned_subtract(last, first)
        return int(np.ceil(delta / width)), (first, last)
    return 1, (first, last)


def _width(x: Any, name: str) -> Any:
    """NumPy's bin width estimators, each data statistic one dispatched reduction."""
    low, high = extremes(x)
    ptp = _hist._unsigned_subtract(high, low)
    size = x.size

    def scalar(value: Any) -> Any:
        return np.asarray(value.full_array())[()]

    def fd() -> Any:
        iqr = np.subtract(*np.asarray(np.percentile(x, [75, 25]).full_array()))
        return 2.0 * iqr * size ** (-1.0 / 3.0)

    sqrt = ptp / np.sqrt(size)
    sturges = ptp / (np.log2(size) + 1.0)
    if name == "sqrt":
        return sqrt
    if name == "sturges":
        return sturges
    if name == "rice":
        return ptp / (2.0 * size ** (1.0 / 3))
    if name == "fd":
        return fd()
    if name == "auto":
        return min(max(fd(), sqrt / 2), sturges)
    if name == "scott":
        return (24.0 * np.pi**0.5 / size) ** (1.0 / 3.0) * scalar(np.std(x))
    if size > 2:  # doane
        sg1 = np.sqrt(6.0 * (size - 2) / ((size + 1.0) * (size + 3)))
        sigma = scalar(np.std(x))
        if sigma > 0.0:
            g1 = scalar(np.mean(np.power((x - scalar(np.mean(x))) / sigma, 3)))
            return ptp / (1.0 + np.log2(size) + np.log2(1.0 + np.absolute(g1) / sg1))
    return 0.0


@decompose(np.histogram_bin_edges)
def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None, weights: Any = None) -> DArray:
    """``np.histogram_bin_edges`` of a DArray: NumPy's edges, replicated."""
    a = _prepared(a, "histogram_bin_edges")
    _block_weights(weights, a, "histogram_bin_edges")
    edges, _ = _edges(a, bins, range, "histogram_bin_edges", weights is not None)
    return replicated(edges, a.mesh)


def _local_counts(block: Any, bins: Any, range: Any, weights: Any, trim: bool) -> Any:
    """NumPy's ``np.histogram(block, bins, range, weights=weights)`` counts.

    Unweighted float blocks in equal bins take :func:`uniform_counts` (the same
    counts, faster); ``trim`` says whether values may lie outside ``range``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if weights is None and np.ndim(bins) == 0 and block.size:
            # The edges and range NumPy's call below would count with (an empty
            # stand-in: they depend on the block only through its dtype).
            edges, uniform = _hist._get_bin_edges(block.reshape(-1)[:0], bins, range, None)
            if uniform is not None:
                first, last, _ = uniform
                if fast_path_applies(block, edges, first, last, weights):
                    return uniform_counts(block, edges, first, last, trim)
        counts, _ = np.histogram(block, bins, range, weights=weights)
    return counts


@decompose(np.histogram)
def histogram(a: Any, bins: Any = 10, range: Any = None, density: Any = None,
              weights: Any = None) -> tuple[DArray, DArray]:  # fmt: skip
    """``np.histogram`` of a DArray: counts per block, one all-reduce; replicated results."""
    a = _prepared(a, "histogram")
    local_weights = _block_weights(weights, a, "histogram")
    edges, (count_bins, count_range) = _edges(a, bins, range, "histogram", weights is not None)
    trim = range is not None or isinstance(bins, str)  # else the range is the data's extremes
    counts = _local_counts(np.asarray(a.local), count_bins, count_range, local_weights, trim)
    counts = summed(counts, a)
    if density:
        widths = np.array(np.diff(edges), float)
        counts = counts / widths / counts.sum()
    return replicated(counts, a.mesh), replicated(edges, a.mesh)


def _sample(sample: Any) -> tuple[DArray, Any]:
    """The (N, D) DArray of ``sample`` (rows sharded only) and its local (n, D) block."""
    if isinstance(sample, DArray):
        if sample.ndim == 1:
            sample = [sample]
        elif sample.ndim != 2:
            raise UnsupportedError("np.histogramdd of DArrays takes an (N, D) sample")
        else:
            sample = sample.reduce_partials()
            if any(p.is_shard(1) for p in sample.placements):  # cut rows, not coordinates
                placements = [Shard(0) if p.is_shard(1) else p for p in sample.placements]
                sample = sample.redistribute(sample.mesh, placements)
            return sample, np.asarray(sample.local)
    columns = list(sample)
    if not columns or not all(isinstance(c, DArray) and c.ndim == 1 for c in columns):
        raise UnsupportedError(
            "np.histogramdd/histogram2d of DArrays take 1-D DArrays of one length (or an "
            "(N, D) DArray)"
        )
    first = columns[0].reduce_partials()
    if any(c.shape != first.shape for c in columns):
        raise ArgumentError(
            f"np.histogramdd: the coordinates have different lengths {[c.shape for c in columns]}"
        )
    aligned = [first] + [c.reduce_partials().with_layout(first.spec.layout) for c in columns[1:]]
    block = np.stack([np.asarray(c.local) for c in aligned], axis=1)
    return first, block


def _histogramdd(sample: Any, bins: Any, range: Any, density: Any, weights: Any) -> Any:
    data, block = _sample(sample)
    columns = block.shape[1]
    rows = data.shape[0]
    stand_in = np.zeros((0, columns), block.dtype)
    if rows:
        if data.ndim == 2:
            low, high = extremes(data, axis=0)
        else:
            pairs = [extremes(c) for c in (sample if not isinstance(sample, DArray) else [sample])]
            low, high = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
        stand_in = np.stack([low, high]).astype(block.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            _, edges = np.histogramdd(stand_in, bins, range)
        except ValueError as exc:
            raise ArgumentError(str(exc)) from exc
        except TypeError as exc:
            raise ArgumentTypeError(str(exc)) from exc
    local_weights = _block_weights(weights, data if data.ndim == 1 else data[:, 0], "histogramdd")
    counts, _ = np.histogramdd(block, edges, weights=local_weights)
    hist = summed(counts, data)
    if density:  # as NumPy: divide by each dim's widths, then by the total
        total = hist.sum()
        for i, e in enumerate(edges):
            shape = np.ones(len(edges), int)
            shape[i] = len(e) - 1
            hist = hist / np.diff(e).reshape(shape)
        hist /= total
    return replicated(hist, data.mesh), [replicated(e, data.mesh) for e in edges]


@decompose(np.histogramdd)
def histogramdd(sample: Any, bins: Any = 10, range: Any = None, density: Any = None,
                weights: Any = None) -> tuple[DArray, list[DArray]]:  # fmt: skip
    """``np.histogramdd`` of an (N, D) DArray or of D 1-D DArrays: replicated results."""
    hist, edges = _histogramdd(sample, bins, range, density, weights)
    return hist, edges


@decompose(np.histogram2d)
def histogram2d(x: Any, y: Any, bins: Any = 10, range: Any = None, density: Any = None,
                weights: Any = None) -> tuple[DArray, DArray, DArray]:  # fmt: skip
    """``np.histogram2d`` of two 1-D DArrays: NumPy's ``histogramdd([x, y], ...)``."""
    try:
        count = len(bins)
    except TypeError:
        count = 1
    if count not in (1, 2):
        bins = [np.asarray(bins), np.asarray(bins)]
    hist, edges = _histogramdd([x, y], bins, range, density, weights)
    return hist, edges[0], edges[1]


@decompose(np.bincount)
def bincount(x: Any, weights: Any = None, minlength: Any = 0) -> DArray:
    """``np.bincount`` of a 1-D integer DArray: a count per block, one all-reduce."""
    if not isinstance(x, DArray):
        raise UnsupportedError("np.bincount: x must be the DArray (weights a DArray or array)")
    x = x.reduce_partials()
    if x.ndim != 1:
        raise ArgumentError("object too deep for desired array" if x.ndim else
                            "object of too small depth for desired array")  # fmt: skip
    if x.dtype.kind not in "biu" or x.dtype == np.uint64:
        raise ArgumentTypeError(
            f"Cannot cast array data from {x.dtype!r} to dtype('int64') according to the "
            "rule 'safe'"
        )
    minlength = int(minlength)
    if minlength < 0:
        raise ArgumentError("'minlength' must not be negative")
    length = minlength
    if x.size:
        low, high = extremes(x)
        if low < 0:
            raise ArgumentError("'list' argument must have no negative elements")
        length = max(int(high) + 1, minlength)
    local_weights = _block_weights(weights, x, "bincount")
    block = np.asarray(x.local)
    if block.dtype.kind == "u" and block.dtype.itemsize == 8:
        block = block.astype(np.int64)
    counts = np.bincount(block, local_weights, minlength=length)
    if local_weights is not None and x.size:  # an empty block's count is intp even then
        counts = counts.astype(np.float64)
    return replicated(summed(counts, x), x.mesh)
