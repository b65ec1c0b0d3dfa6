"""Consistency-suite samples of the issue-14 ops in this area (merged into tests/samples.py).

``SAMPLES`` and ``HOSTILE`` map a registry or decomposition key to (args, kwargs)
calls with NumPy arrays, as in tests/samples.py.

np.partition/np.argpartition take 2-D samples only: a 1-D array sharded along its
axis comes back sorted (a valid partition, not NumPy's arrangement; see
ops/kernels/partition.py and tests/test_partition.py). np.unique_values samples are
floats (NumPy leaves integers in hash order), np.unique_inverse's have no NaN (NumPy
numbers separate NaNs by an unstable sort).
"""

from __future__ import annotations

from typing import Any

import numpy as np

Sample = tuple[tuple[Any, ...], dict[str, Any]]

_R = np.random.default_rng(61)
_S = np.sort(_R.integers(0, 9, 23).astype(np.float64))  # sorted, with repeats
_Q = _R.integers(-1, 11, 14).astype(np.float64)
_A = _R.integers(0, 12, 19).astype(np.float64)
_B = _R.integers(6, 18, 11).astype(np.float64)
_I = _R.integers(0, 6, 15)
_M = _R.normal(size=(6, 5))
_K = np.stack([_I.astype(np.float64), (_I * 7) % 4])
_E = np.array([np.nan, -np.inf, -0.0, 0.0, np.inf, 3.0, -1.0, np.nan, 3.0, 2.0])
_ES = np.sort(_E)
_BIG = np.array([np.iinfo(np.int64).min, -1, 0, 5, np.iinfo(np.int64).max], dtype=np.int64)

SAMPLES: dict[Any, list[Sample]] = {
    np.searchsorted: [
        ((_S, _Q), {}),
        ((_S, _Q), {"side": "right"}),
        ((_A, _Q), {"sorter": np.argsort(_A, kind="stable")}),
    ],
    np.digitize: [((_Q, _S), {}), ((_Q, _S[::-1].copy()), {"right": True})],
    np.isin: [
        ((_A, _B), {}),
        ((_A.reshape(1, 19), _B), {"invert": True}),
        ((_I, _I[:4]), {"kind": "table"}),
    ],
    np.union1d: [((_A, _B), {}), ((_I, _B), {})],
    np.intersect1d: [
        ((_A, _B), {}),
        ((_A, _B), {"return_indices": True}),
        ((_A, _A[::-1].copy()), {"assume_unique": True, "return_indices": True}),
    ],
    np.setdiff1d: [((_A, _B), {}), ((_A, _B), {"assume_unique": True})],
    np.setxor1d: [((_A, _B), {}), ((np.unique(_A), np.unique(_B)), {"assume_unique": True})],
    np.lexsort: [((_K,), {}), ((_M,), {"axis": 0})],
    np.partition: [((_M, 2), {}), ((_M, [0, 3]), {"axis": 0})],
    np.argpartition: [((_M, 1), {}), ((_M, -1), {"axis": 0})],
    np.unique_values: [((_A,), {}), ((_M.round(),), {})],
    np.unique_counts: [((_A,), {}), ((_I,), {})],
    np.unique_inverse: [((_A,), {}), ((_I.reshape(3, 5),), {})],
    np.unique_all: [((_A,), {}), ((_I,), {})],
}
HOSTILE: dict[Any, list[Sample]] = {
    np.searchsorted: [((_ES, _E), {}), ((_ES, _E), {"side": "right"}), ((_BIG, _BIG[::-1]), {})],
    np.digitize: [((_E, np.array([-np.inf, -0.0, 2.0, np.inf])), {})],
    np.isin: [((_E, _E[::-3].copy()), {}), ((_BIG, _BIG[:2]), {"invert": True})],
    np.union1d: [((_E, _E[:4]), {}), ((_BIG, _BIG), {})],
    np.intersect1d: [((_E, _E[2:]), {}), ((_BIG, _BIG[1:]), {"return_indices": True})],
    np.setdiff1d: [((_E, _E[::2].copy()), {}), ((_BIG, _BIG[:1]), {})],
    np.setxor1d: [((_E, _E[:5]), {}), ((_BIG, _BIG[2:]), {})],
    np.unique_counts: [((_E,), {}), ((_BIG,), {})],
}
