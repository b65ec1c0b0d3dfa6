"""Consistency-suite samples of the issue-14 ops in this area (merged into tests/samples.py).

``SAMPLES`` and ``HOSTILE`` map a registry or decomposition key to (args, kwargs)
calls with NumPy arrays, as in tests/samples.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Sample = tuple[tuple[Any, ...], dict[str, Any]]

_rng = np.random.default_rng(14)
_F = _rng.uniform(0.25, 0.75, size=(12, 5))  # 12 rows: balanced blocks of 3 at 4 ranks
_V = _rng.uniform(0.25, 0.75, size=16)  # 16 = 4 * 4: the four-step FFT at 2-4 blocks
_Z = _V + 1j * _rng.uniform(-1, 1, size=16)
_XP = np.linspace(0.2, 0.8, 7)
_FP = _rng.normal(size=7)
_COORDS = np.cumsum(_rng.uniform(0.5, 1.5, size=12))
_K = np.array([0.5, -1.0, 2.0])
_H = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -2.0, 3.5, np.nan, 4.0, -0.0, 2.0])

SAMPLES: dict[Any, list[Sample]] = {
    np.gradient: [
        ((_F,), {}),
        ((_F, _COORDS), {"axis": 0, "edge_order": 2}),
        ((_F, 0.5, 2.0), {"edge_order": 2}),
    ],
    np.ediff1d: [((_F[:, 0],), {"to_begin": np.array([1.0, 2.0]), "to_end": -1.0}), ((_F,), {})],
    np.trapezoid: [((_F,), {"axis": 0}), ((_F[:, 0], _COORDS), {}), ((_F,), {"dx": 0.5})],
    np.interp: [((_V, _XP, _FP), {}), ((_V, _XP, _FP), {"period": 0.5}), ((_V, _XP, _FP + 1j), {})],
    np.polyval: [(((1.0, -2.0, 0.5), _V), {}), (((3, 1), _F), {})],
    np.roots: [((np.array([1.0, -6.0, 11.0, -6.0, 0.0]),), {})],
    np.polyfit: [((_V, 2 * _V**2 - _V + 0.25, 2), {})],
    np.convolve: [((_F[:, 0], _K), {}), ((_F[:, 0], _K), {"mode": "same"})],
    np.correlate: [((_F[:, 0], _K), {}), ((_F[:, 0] + 1j, _K[:2] - 1j), {"mode": "full"})],
    np.fft.fftshift: [((_F,), {}), ((_F,), {"axes": 0})],
    np.fft.ifftshift: [((_F,), {"axes": (1, 0)})],
    # 1-D: the four-step FFT where sharded (n = 16, 25, 30 and 36 factor at 2-4 blocks).
    np.fft.hfft: [
        ((_F + 1j,), {"axis": 0}),
        ((_F + 0j,), {"n": 9, "norm": "ortho"}),
        ((_Z,), {}),
        ((_Z,), {"n": 25}),
    ],
    np.fft.ihfft: [((_F,), {"axis": 0}), ((_V,), {}), ((_V,), {"n": 36})],
    np.fft.fft: [((_Z,), {}), ((_V,), {"norm": "ortho"}), ((_Z,), {"n": 36})],
    np.fft.ifft: [((_Z,), {"norm": "forward"}), ((_Z,), {"n": 25})],
    np.fft.rfft: [((_V,), {}), ((_V,), {"n": 25, "norm": "ortho"})],
    np.fft.irfft: [((_Z,), {}), ((_Z,), {"n": 25, "norm": "forward"}), ((_Z,), {"n": 36})],
}
HOSTILE: dict[Any, list[Sample]] = {
    np.gradient: [((_H,), {}), ((_H,), {"edge_order": 2})],
    np.ediff1d: [((_H,), {"to_begin": -0.0})],
    np.convolve: [((_H, _K), {"mode": "full"})],
    np.correlate: [((_H, np.array([1.0, -0.0])), {"mode": "same"})],
    np.interp: [((_H, _XP, _FP), {})],
    np.polyval: [(((1.0, -0.0, 2.0), _H), {})],
    np.fft.fftshift: [((_H,), {})],
}
