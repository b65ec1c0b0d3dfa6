"""Consistency-suite samples of the issue-14 ops in this area (merged into tests/samples.py).

``SAMPLES`` and ``HOSTILE`` map a registry or decomposition key to (args, kwargs)
calls with NumPy arrays, as in tests/samples.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Sample = tuple[tuple[Any, ...], dict[str, Any]]

SAMPLES: dict[Any, list[Sample]] = {}
HOSTILE: dict[Any, list[Sample]] = {}

_rng = np.random.default_rng(14)
_V = _rng.standard_normal(13)  # odd length: the median is one value
_M = _rng.standard_normal((6, 5))
_H = np.array([np.nan, 1.0, -np.inf, np.inf, -0.0, 0.0, -3.0, 2.5])  # hostile values
_HM = _H.reshape(2, 4)

# Quantiles: along the sharded first axis (selection) and along an unsharded one (local).
SAMPLES[np.median] = [((_V,), {}), ((_M,), {"axis": 0}), ((_M,), {"axis": 1, "keepdims": True})]
SAMPLES[np.nanmedian] = [((_V,), {}), ((_M,), {"axis": 0})]
SAMPLES[np.percentile] = [((_V, [1, 50, 99]), {}), ((_M, 30), {"axis": 0, "method": "lower"})]
SAMPLES[np.quantile] = [((_V, 0.25), {}), ((_M, [0.1, 0.9]), {"axis": 1, "method": "midpoint"})]
SAMPLES[np.nanpercentile] = [((_V, [5, 95]), {}), ((_M, 50), {"axis": 0})]
SAMPLES[np.nanquantile] = [((_V, 0.5), {"method": "nearest"}), ((_M, 0.75), {"axis": 1})]
for _key in (np.median, np.nanmedian):
    HOSTILE[_key] = [((_H,), {}), ((_HM,), {"axis": 0}), ((_H[1:],), {})]
for _key in (np.percentile, np.nanpercentile):
    HOSTILE[_key] = [((_H, [0, 50, 100]), {}), ((_H[1:], [10, 90]), {})]
for _key in (np.quantile, np.nanquantile):
    HOSTILE[_key] = [((_HM, 0.5), {"axis": 1}), ((_H[1:], [0.0, 0.3, 1.0]), {})]

# Histograms: counts per block and one all-reduce; the edges from the global extremes.
_I = _rng.integers(0, 9, 14)
_W = np.linspace(0.25, 2.0, 13)
SAMPLES[np.histogram] = [((_V,), {}), ((_V,), {"bins": [-2, 0, 0.5, 3], "weights": _W}),
                         ((_M,), {"bins": 4, "range": (-1, 1), "density": True})]  # fmt: skip
SAMPLES[np.histogram_bin_edges] = [((_V,), {"bins": 5}), ((_M,), {"range": (0, 2)})]
SAMPLES[np.histogram2d] = [((_V, _V[::-1]), {"bins": 3}), ((_V, _W), {"bins": (2, 4)})]
SAMPLES[np.histogramdd] = [((_M[:, :3],), {"bins": 2}), ((_M[:, :2],), {"bins": (3, 2)})]
SAMPLES[np.bincount] = [((_I,), {}), ((_I,), {"minlength": 12})]
HOSTILE[np.histogram] = [
    ((_H,), {"bins": [-np.inf, -1, 0, 1, np.inf]}),
    ((_H,), {"range": (-3, 3)}),
]
HOSTILE[np.bincount] = [((np.array([0, 0, 2, 2**20]),), {})]

# Averages and covariances: dispatched reductions and products; cov's matrix is small.
SAMPLES[np.average] = [
    ((_M,), {}),
    ((_M,), {"axis": 0, "weights": _M * _M + 0.5}),
    ((_M,), {"axis": 1, "weights": np.arange(1.0, 6.0), "returned": True}),
]
SAMPLES[np.ptp] = [((_M,), {}), ((_M,), {"axis": 0, "keepdims": True})]
SAMPLES[np.cov] = [((_M,), {}), ((_M,), {"rowvar": False, "bias": True})]
SAMPLES[np.corrcoef] = [((_M,), {}), ((_M,), {"rowvar": False})]
HOSTILE[np.ptp] = [((_HM,), {"axis": 1}), ((np.array([-(2**62), 2**62]),), {})]

# Scans: a local scan and the block totals before; no axis flattens in C order.
SAMPLES[np.nancumsum] = [((_M,), {}), ((_M,), {"axis": 0})]
SAMPLES[np.nancumprod] = [((_M,), {"axis": 1}), ((_V,), {})]
SAMPLES[np.cumulative_sum] = [((_V,), {"include_initial": True}), ((_M,), {"axis": 0})]
SAMPLES[np.cumulative_prod] = [((_V,), {}), ((_M,), {"axis": 1, "include_initial": True})]
HOSTILE[np.nancumsum] = [((_HM,), {"axis": 0}), ((_H,), {})]
HOSTILE[np.nancumprod] = [((_HM,), {"axis": 1})]

# nanargmax/nanargmin: NaNs as -inf/+inf, then the distributed argmax/argmin.
for _key in (np.nanargmax, np.nanargmin):
    SAMPLES[_key] = [((_V,), {}), ((_M,), {"axis": 0}), ((_M,), {"axis": 1, "keepdims": True})]
    HOSTILE[_key] = [((_H,), {}), ((_HM,), {"axis": 1})]
SAMPLES[np.histogram] += [((_V,), {"bins": "auto"}), ((_M,), {"bins": "sturges", "range": (-1, 1)})]
