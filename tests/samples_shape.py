"""Consistency-suite samples of the issue-14 ops in this area (merged into tests/samples.py).

``SAMPLES`` and ``HOSTILE`` map a registry or decomposition key to (args, kwargs)
calls with NumPy arrays, as in tests/samples.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.ops.rules.joining import concatenate_blocks

Sample = tuple[tuple[Any, ...], dict[str, Any]]

_M = np.random.default_rng(21).uniform(0.25, 0.75, (5, 4))
_C = np.random.default_rng(22).uniform(0.25, 0.75, (3, 4))
_V = np.random.default_rng(23).uniform(0.25, 0.75, (6,))
_H = np.array(
    [[np.nan, -0.0, 0.0, np.inf], [-np.inf, 1.5, -np.nan, -2.0], [0.0, -0.0, 3.0, np.nan],
     [1e300, -1e-308, 7.0, -0.0], [2.0, np.inf, -1.0, 0.5]]
)  # fmt: skip
_I = np.array([[np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max]] * 5)

SAMPLES: dict[Any, list[Sample]] = {
    concatenate_blocks: [(([_M, _C],), {}), (([_M, _M[:, :2]],), {"axis": 1})],
    np.atleast_1d: [((_M,), {}), ((np.array(2.0),), {})],
    np.atleast_2d: [((_V,), {}), ((_M,), {})],
    np.atleast_3d: [((_V,), {}), ((_M,), {})],
    np.broadcast_arrays: [((_M, _M[:1]), {}), ((_V[:4], _M), {})],
    np.fliplr: [((_M,), {})],
    np.flipud: [((_M,), {}), ((_V,), {})],
    np.rot90: [((_M,), {}), ((_M, 2), {}), ((_M, 3, (1, 0)), {})],
    np.rollaxis: [((_M, 1), {}), ((_M[None], 0, 3), {})],
    np.matrix_transpose: [((_M,), {})],
    np.linalg.matrix_transpose: [((_M[None],), {})],
    np.unstack: [((_M,), {}), ((_M,), {"axis": 1})],
    np.tile: [((_M, 2), {}), ((_V, (2, 2)), {}), ((_M, (1, 3)), {})],
    np.append: [((_M, _M), {}), ((_M, _C), {"axis": 0}), ((_V, _V), {})],
    # Reshapes whose row boundaries miss the new rows at some rank counts (re-cut, no gather).
    np.reshape: [
        ((_M, (4, 5)), {}),
        ((_M, (2, 10)), {}),
        ((_V, (2, 3)), {}),
        ((_M.reshape(5, 2, 2), (2, 5, 2)), {}),
    ],
    np.block: [(([_M, _M],), {}), (([_V, _V[:2]],), {})],
    np.dstack: [(([_M, _M],), {}), (([_V, _V],), {})],
    np.column_stack: [(([_M, _M[:, :1]],), {}), (([_V, _V],), {})],
    np.hsplit: [((_M, 2), {}), ((_V, [1, 4]), {})],
    np.vsplit: [((_M, [2, 3]), {})],
    np.dsplit: [((_M[:, :, None].repeat(2, 2), 2), {})],
    np.insert: [
        ((_M, 2, 0.5), {"axis": 0}),
        ((_M, [1, 3], _M[:, :2]), {"axis": 1}),
        ((_V, [0, 6, 2], 9.0), {}),
    ],
    np.delete: [((_M, [0, 3]), {"axis": 0}), ((_M, 1), {"axis": 1}), ((_M, slice(2, 9, 3)), {})],
    np.repeat: [((_M, 2), {}), ((_M, [1, 0, 2, 3, 1]), {"axis": 0}), ((_M, 3), {"axis": 1})],
    np.tril: [((_M,), {}), ((_M, -2), {}), ((_V,), {"k": 1})],
    np.triu: [((_M,), {}), ((_M, 2), {}), ((_M[None],), {"k": -1})],
    np.diagonal: [((_M,), {}), ((_M, 1), {}), ((_M, -2, 1, 0), {})],
    np.linalg.diagonal: [((_M,), {"offset": 1}), ((_M[None],), {})],
    np.diag: [((_M,), {}), ((_M, -1), {}), ((_V,), {}), ((_V, 2), {})],
    np.trace: [((_M,), {}), ((_M, 1), {}), ((_M, -1, 1, 0), {"dtype": np.complex128})],
    np.tril_indices_from: [((_M,), {}), ((_M, -1), {})],
    np.triu_indices_from: [((_M,), {}), ((_M, 2), {})],
    np.pad: [
        ((_M, 2), {}),
        ((_M, ((1, 3), (2, 0))), {"mode": "reflect"}),
        ((_M, 3), {"mode": "wrap"}),
        ((_M, 1), {"mode": "maximum"}),
        ((_M, (2, 1)), {"mode": "edge"}),
        ((_M, 2), {"mode": "symmetric"}),
    ],
    np.roll: [((_M, 5), {}), ((_M, (1, 2)), {"axis": (0, 1)})],
    np.concatenate: [(([_M, _C],), {"axis": None}), (([_M, _C],), {"dtype": np.float32})],
}
HOSTILE: dict[Any, list[Sample]] = {
    np.repeat: [((_H, 2), {"axis": 0}), ((_I, [0, 1, 2, 1]), {"axis": 1})],
    np.tril: [((_H,), {}), ((_I, 1), {})],
    np.triu: [((_H, -1), {}), ((_I,), {})],
    np.diagonal: [((_H,), {}), ((_I, 1), {})],
    np.diag: [((_H, -1), {}), ((_H[:, 1],), {})],
    np.trace: [((_I,), {})],
    np.pad: [((_H, 2), {"mode": "reflect"}), ((_I, 1), {"mode": "edge"})],
    np.roll: [((_H, 3), {}), ((_I, 2), {"axis": 0})],
    np.append: [((_H, _H), {"axis": 0}), ((_I, _I), {})],
    np.tile: [((_H, (2, 1)), {})],
    np.insert: [((_H, [1, 4], -0.0), {"axis": 0}), ((_I, 2, 7), {"axis": 1})],
    np.delete: [((_H, [0, 2]), {"axis": 0}), ((_I, [1]), {"axis": 1})],
    np.rot90: [((_H,), {}), ((_I, 3), {})],
    np.unstack: [((_H,), {}), ((_I,), {"axis": 1})],
    concatenate_blocks: [(([_H, _H],), {}), (([_I, _I],), {"axis": 1})],
    np.reshape: [((_H, (4, 5)), {}), ((_I, (2, 10)), {}), ((_H[:, 1:], (3, 5)), {})],
    np.ravel: [((_H,), {}), ((_I,), {})],
}
