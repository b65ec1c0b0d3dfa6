"""Consistency-suite samples of the issue-14 ops in this area (merged into tests/samples.py).

``SAMPLES`` and ``HOSTILE`` map a registry or decomposition key to (args, kwargs)
calls with NumPy arrays, as in tests/samples.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Sample = tuple[tuple[Any, ...], dict[str, Any]]

_A = np.arange(24.0).reshape(6, 4) * 0.5 - 3
_F = np.array([[0.0, -0.0, np.nan, 3.0], [np.inf, -np.inf, 0.5, 0.0], [2.0, 0.0, -1.0, np.nan]])
_I = np.array([0, 23, 5, 17, 11, 6])
_BIG = np.array([0, np.iinfo(np.int64).max, -1, np.iinfo(np.int64).min, 7])


def _twice(t: Any) -> Any:
    return t * 2


SAMPLES: dict[Any, list[Sample]] = {
    np.argwhere: [((_A > 0,), {}), ((_A,), {})],
    np.flatnonzero: [((_A % 2,), {})],
    np.choose: [((np.array([0, 2, 1, 0]), [_A[0], _A[1], _A[2]]), {}),
                ((np.array([3, -1, 1, 0]), [_A[0], _A[1]]), {"mode": "wrap"})],
    np.select: [(([_A > 1, _A < -2], [_A, -_A]), {"default": 0.5})],
    np.piecewise: [((_A, [_A < 0, _A > 5], [_twice, -1.0, np.abs]), {})],
    np.compress: [((np.array([1, 0, 1, 1, 0, 1]) > 0, _A), {"axis": 0}),
                  ((np.array([0, 1, 1, 0]), _A), {"axis": 1})],
    np.extract: [((_A > 0, _A), {})],
    np.take_along_axis: [((_A, np.array([[3, -1], [0, 0], [1, 2], [2, 2], [0, 3], [1, 1]])),
                          {"axis": 1})],
    np.put_along_axis: [((_A.copy(), np.array([[3], [0], [1], [2], [0], [1]]), 9.0),
                         {"axis": 1})],
    np.unravel_index: [((_I, (6, 4)), {}), ((_I, (4, 6)), {"order": "F"})],
    np.ravel_multi_index: [(([np.array([0, 5, 3]), np.array([3, 0, 2])], (6, 4)), {})],
    np.put: [((_A.copy(), [0, -1, 13], [7.0, 8.0]), {})],
    np.place: [((_A.copy(), _A.copy() > 0, [1.0, 2.0]), {})],
    np.putmask: [((_A.copy(), _A.copy() > 0, [1.0, 2.0, 3.0]), {})],
    np.copyto: [((_A.copy(), np.arange(4.0)), {"where": np.array([True, False, True, True])})],
}  # fmt: skip
HOSTILE: dict[Any, list[Sample]] = {
    np.argwhere: [((_F,), {}), ((_BIG,), {})],
    np.flatnonzero: [((_F,), {})],
    np.extract: [((_F, _F), {})],
    np.select: [(([np.isnan(_F), _F > 0], [_F, -_F]), {"default": -0.0})],
    np.choose: [((np.array([0, 1, 1, 0]), [_F[0], _F[1]]), {})],
}  # fmt: skip
