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

_rng = np.random.default_rng(1414)
_V3 = _rng.uniform(0.25, 0.75, (6, 3))  # six 3-vectors
_W3 = _rng.uniform(0.25, 0.75, (6, 3))
_M = _rng.uniform(0.25, 0.75, (6, 4))
_T = _rng.uniform(0.25, 0.75, (4, 6, 4))  # a stack of 6 x 4 matrices
_S = _rng.uniform(0.25, 0.75, (5, 5)) + 2 * np.eye(5)  # square, well conditioned
_I = _rng.integers(-3, 4, (6, 3))
_H = np.array([[np.inf, -0.0, 1.0], [np.nan, 2.0, -np.inf], [0.0, -1.0, 3.0]])

SAMPLES[np.vecdot] = [((_V3, _W3), {}), ((_M, _M[0]), {}), ((_V3 + 1j * _W3, _W3), {})]
SAMPLES[np.linalg.vecdot] = [((_V3, _W3), {}), ((_M.T.copy(), _M.T.copy()), {"axis": 0})]
SAMPLES[np.matvec] = [((_M, _M[0]), {}), ((_T, _M[0]), {})]
SAMPLES[np.vecmat] = [((_M[:, 0].copy(), _M), {}), ((_T[:, :, 0].copy(), _T), {})]
SAMPLES[np.linalg.matmul] = [((_M, _M.T.copy()), {}), ((_T, _M.T.copy()), {})]
SAMPLES[np.cross] = [((_V3, _W3), {}), ((_I, _V3), {}), ((_V3.T.copy(), _W3), {"axisa": 0})]
SAMPLES[np.linalg.cross] = [((_V3, _W3), {})]
SAMPLES[np.kron] = [((_M, _V3), {}), ((_M[:, 0].copy(), _I), {})]
SAMPLES[np.linalg.multi_dot] = [
    (([_M, _M.T.copy(), _M],), {}),
    (([_M[:, 0].copy(), _M, _M.T.copy(), _M, _M[0]],), {}),
]
SAMPLES[np.linalg.matrix_power] = [
    ((_S, 0), {}),
    ((_S, 2), {}),
    ((_S, 5), {}),
    ((_T[:, :4], 3), {}),
]
SAMPLES[np.linalg.outer] = [((_M[:, 0].copy(), _V3[0]), {})]
SAMPLES[np.linalg.tensordot] = [((_T, _M), {"axes": ([1], [0])}), ((_M, _M), {"axes": 2})]
SAMPLES[np.linalg.trace] = [((_M,), {}), ((_T,), {"offset": 1}), ((_I,), {"offset": -2})]
SAMPLES[np.linalg.vector_norm] = [
    ((_M,), {}), ((_M,), {"ord": 1, "axis": 0}), ((_T,), {"axis": (0, 2), "keepdims": True}),
    ((_M,), {"ord": np.inf}),
]  # fmt: skip
SAMPLES[np.linalg.matrix_norm] = [((_M,), {}), ((_T,), {"ord": 1}), ((_M,), {"ord": -np.inf})]
SAMPLES[np.linalg.svdvals] = [((_M,), {})]
_E = (np.eye(6) * 3 + _rng.uniform(0.25, 0.75, (6, 6))).reshape(2, 3, 6)
SAMPLES[np.linalg.tensorsolve] = [
    ((_E, _M[:2, :3].copy()), {}),
    ((_E.transpose(2, 0, 1).copy(), _M[:2, :3].copy()), {"axes": (0,)}),
]

HOSTILE[np.cross] = [((_H, _H[::-1].copy()), {})]
HOSTILE[np.kron] = [((_H, _H[:2, :2].copy()), {})]
HOSTILE[np.linalg.vector_norm] = [((_H,), {"ord": np.inf}), ((_H,), {"ord": 1, "axis": 1})]
