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

# -- issue 14, item 1: two-output ufuncs, real_if_close, ufunc.outer/at/reduceat ----------
_Z = _M + 1j * _RNG.uniform(-1e-17, 1e-17, (5, 4))
SAMPLES[np.real_if_close] = [((_Z,), {}), ((_M + 1j * _M,), {}), ((_M,), {})]
SAMPLES[np.divmod] = [((_M * 10 - 5, 1.5), {}), ((_M * 10 - 5, _M[0] + 0.5), {})]
SAMPLES[np.frexp] = [((_M * 100 - 50,), {})]
SAMPLES[np.modf] = [((_M * 10 - 5,), {})]
for _u in (np.divmod, np.frexp, np.modf):
    HOSTILE[_u] = [((_H,) if _u.nin == 1 else (_H, 2.5), {})]


def _kinds(ufunc: np.ufunc) -> str:
    """The input type codes of the first float64, int64 or bool loop (as tests/samples.py)."""
    for preferred in ("d", "l", "?"):
        for loop in ufunc.types:
            inputs = loop.split("->")[0]
            if preferred in inputs and set(inputs) <= {"d", "l", "?"}:
                return inputs
    raise AssertionError(f"no sample dtype for {ufunc.__name__}")


def _array(kind: str, shape: tuple[int, ...]) -> np.ndarray:
    if kind == "d":
        return _RNG.uniform(0.25, 0.75, shape)
    if kind == "l":
        return _RNG.integers(1, 6, shape)
    return _RNG.random(shape) < 0.5


def _ufunc_method_samples() -> None:
    from dmesh.ops.rules.ufunc_methods import ACCUMULATING, ASSOCIATIVE, BINARY

    for ufunc in BINARY:
        first, second = _kinds(ufunc)
        SAMPLES[(ufunc, "outer")] = [((_array(first, (4, 2)), _array(second, (3,))), {})]
    for ufunc in ACCUMULATING:
        first, second = _kinds(ufunc)
        x = _array(first, (7, 3))
        if ufunc in ASSOCIATIVE:
            reduceat = [((x, [0, 4, 1, 5, 6]), {}), ((x, [0, 2, 1]), {"axis": 1})]
            SAMPLES[(ufunc, "reduceat")] = reduceat
        # in place: the suite compares the result, None (see the area's report)
        SAMPLES[(ufunc, "at")] = [((x, [0, 0, 6, 3], x[0, 0].item()), {})]


_ufunc_method_samples()
