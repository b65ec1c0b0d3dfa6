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

_RNG = np.random.default_rng(14)
_M = _RNG.uniform(0.25, 0.75, (5, 4))
_H = np.array([[np.nan, -np.inf, np.inf, -0.0], [0.0, 2.5, -2.5, 1e300], [-7.9, 3.0, 127.6, -1.0]])

# np.empty_like: its values are unspecified, so only the shape and dtype can be compared
# (the suite needs to know that: see the report of issue 14's creation area).
SAMPLES[np.empty_like] = [((_M,), {}), ((_M,), {"dtype": np.int8}), ((_M,), {"shape": (2, 3)})]
SAMPLES[np.astype] = [
    ((_M, np.float32), {}),
    ((_M * 10, np.int16), {}),
    ((_M, np.float64), {"copy": False}),
    ((_M, np.complex128), {}),
]
HOSTILE[np.astype] = [((_H, np.float32), {}), ((_H, bool), {}), ((_H, np.complex64), {})]

# NEP 35: NumPy's creation functions with like=a, a DArray. The array to distribute is
# the ``like`` keyword's (the suite needs to distribute it: see the report).
_LIKE = {"like": _M}
SAMPLES[np.zeros] = [((5,), _LIKE), (((3, 4),), {"dtype": np.int32, **_LIKE})]
SAMPLES[np.ones] = [((7,), {"dtype": bool, **_LIKE})]
SAMPLES[np.empty] = [(((2, 3),), _LIKE)]
SAMPLES[np.full] = [(((4, 2), np.nan), _LIKE), ((6, -3), {"dtype": np.int8, **_LIKE})]
SAMPLES[np.arange] = [((10,), _LIKE), ((-3, 8, 3), _LIKE), ((0.5, 2.0, 0.25), _LIKE)]
SAMPLES[np.eye] = [((4,), _LIKE), ((3, 5, -1), {"dtype": int, **_LIKE})]
SAMPLES[np.identity] = [((3,), _LIKE)]
SAMPLES[np.tri] = [((4, 3, 1), _LIKE)]
SAMPLES[np.fromfunction] = [((np.add, (3, 4)), {"dtype": int, **_LIKE})]
for _f in (np.array, np.asarray, np.asanyarray, np.ascontiguousarray):
    SAMPLES[_f] = [(([[1.5, -0.0], [2.0, 3.0]],), _LIKE)]
