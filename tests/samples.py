"""Sample inputs of every registered op, for the consistency suite (test_consistency.py).

``SAMPLES`` is generated from the registry: values stay inside every ufunc's
domain. ``HOSTILE`` holds, for the ops whose NumPy answer is well defined on
them, the same calls on hostile values (NaN, both infinities, both zeros,
negatives, values outside domains, integer extremes) and a few calls made to
combine, across blocks, NaNs of both signs and zeros of both signs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import samples_creation
import samples_linalg
import samples_selection
import samples_sets
import samples_shape
import samples_signals
import samples_statistics

from dmesh.ops.kernels.linalg import LOCAL_ONLY
from dmesh.ops.kernels.scan import ACCUMULATING
from dmesh.ops.rules.elementwise import UFUNCS

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def key_name(key: Any) -> str:
    """``np.add`` -> ``add``, ``(np.add, "reduce")`` -> ``add.reduce``."""
    if isinstance(key, tuple):
        return f"{key[0].__name__}.{key[1]}"
    return str(getattr(key, "__name__", key))


def call(key: Any) -> Callable[..., Any]:
    """The NumPy callable of a registry key."""
    return getattr(key[0], key[1]) if isinstance(key, tuple) else key


def _sample_array(kind: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "d":
        return rng.uniform(0.25, 0.75, size=shape)  # inside every ufunc's domain
    if kind == "l":
        return rng.integers(1, 6, size=shape)
    return rng.random(shape) < 0.5


def _ufunc_kinds(ufunc: np.ufunc) -> str:
    """Input type codes of the first loop over float64, int64 and bool only (e.g. ldexp: 'dl')."""
    for preferred in ("d", "l", "?"):
        for loop in ufunc.types:
            inputs = loop.split("->")[0]
            if preferred in inputs and set(inputs) <= {"d", "l", "?"}:
                return inputs
    raise AssertionError(f"no sample dtype for {ufunc.__name__}: {ufunc.types}")


# key -> list of (args, kwargs) with numpy arrays; the test distributes the arrays.
SAMPLES: dict[Any, list[Sample]] = {}
for _u in UFUNCS:
    _kinds = _ufunc_kinds(_u)
    _args = tuple(_sample_array(k, (5, 3) if i == 0 else (3,), i) for i, k in enumerate(_kinds))
    if _u is np.arccosh:  # its domain starts at 1
        _args = (_args[0] + 1.0,)
    SAMPLES[_u] = [(_args, {})]
_M = _sample_array("d", (5, 4), 1)
_V = _sample_array("d", (4,), 2)
for _f in (np.sum, np.prod, np.max, np.min, np.mean, np.any, np.all, np.count_nonzero, np.nansum,
           np.nanprod, np.amax, np.amin):  # fmt: skip
    SAMPLES[_f] = [((_M,), {}), ((_M,), {"axis": 0}), ((_M,), {"axis": -1, "keepdims": True})]
for _u in (np.add, np.multiply, np.maximum, np.minimum, np.logical_or, np.logical_and):
    SAMPLES[(_u, "reduce")] = [((_M > 0.5 if _u.__name__.startswith("logical") else _M, 0), {})]
_I = (np.arange(20).reshape(5, 4) * 7919) % 13
for _u in ACCUMULATING:
    _x = (
        _I % 3 > 0
        if _u.__name__.startswith("logical")
        else _I
        if _u.__name__.startswith("bit")
        else _M
    )
    SAMPLES[(_u, "accumulate")] = [((_x,), {}), ((_x,), {"axis": 1})]
SAMPLES[(np.add, "accumulate")] += [((_I.astype(np.int8),), {"dtype": np.int64})]
SAMPLES[np.matmul] = [((_M, _V), {}), ((_M, _M.T.copy()), {}), ((_V, _V), {})]
SAMPLES[np.dot] = [((_M, _V), {}), ((_V, _V), {})]
SAMPLES[np.inner] = [((_M, _V), {})]
SAMPLES[np.outer] = [((_V, _V[:3]), {})]
SAMPLES[np.einsum] = [(("ij,j->i", _M, _V), {}), (("ij,kj->ik", _M, _M), {})]
SAMPLES[np.einsum] += [(("ii->i", _M[:4]), {}), (("ij,jj", _M, _M[:4]), {}), (("ii", _M[1:]), {})]
SAMPLES[np.outer] += [((_M, _V), {}), ((_V, _M.T.copy()), {})]
SAMPLES[np.tensordot] = [((_M, _M), {"axes": ([0], [0])}), ((_M, _V), {"axes": 1})]
SAMPLES[np.tensordot] += [((_V, _M), {"axes": 0}), ((_M, _M.T.copy()), {"axes": ([-1, 0], [0, 1])})]
SAMPLES[np.vdot] = [((_M, _M), {}), ((_V + 1j * _V[::-1], _V), {}), ((_M.T.copy(), _M), {})]
SAMPLES[np.transpose] = [((_M,), {}), ((_M3 := _sample_array("d", (2, 3, 4), 3), (1, 2, 0)), {})]
SAMPLES[np.swapaxes] = [((_M3, 0, 2), {})]
SAMPLES[np.moveaxis] = [((_M3, 0, -1), {})]
_C = _sample_array("d", (5, 4), 5)
SAMPLES[np.where] = [((_M > 0.5, _M, _C), {}), ((_M > 0.5, _M, 0.0), {})]
SAMPLES[np.clip] = [((_M, 0.3, 0.6), {}), ((_M, None, 0.6), {}), ((_I, 2, None), {})]
SAMPLES[np.clip] += [((_M,), {"min": 0.4}), ((_M, _C, None), {})]
SAMPLES[np.where] += [((_M > 0.5,), {})]
SAMPLES[np.isclose] = [((_M, _C), {"atol": 0.2})]
SAMPLES[np.nan_to_num] = [((np.where(_M > 0.5, np.nan, _M),), {"nan": -1.0})]
SAMPLES[np.allclose] = [((_M, _C), {"atol": 0.6}), ((_M, _M), {})]
SAMPLES[np.array_equal] = [((_M, _M), {}), ((_M, _C), {})]
SAMPLES[np.shape] = [((_M,), {})]
SAMPLES[np.ndim] = [((_M,), {})]
SAMPLES[np.size] = [((_M,), {}), ((_M,), {"axis": 1})]
_T = np.array([[3.0, 9, 1], [9, 2, 9], [0, 5, 7], [4, np.nan, 2], [1, 1, 1]])
for _f in (np.argmax, np.argmin):  # ties, and a NaN that wins
    SAMPLES[_f] = [((_M,), {}), ((_T,), {"axis": 0}), ((_T[:, [0, 2]],), {"axis": 1})]
SAMPLES[np.cumsum] = [((_M,), {"axis": 0}), ((_M,), {"axis": 1}), ((_V,), {})]
SAMPLES[np.cumprod] = [((_M,), {"axis": 0}), ((_M > 0.5,), {"axis": 1})]
SAMPLES[np.diff] = [((_M,), {}), ((_M,), {"axis": 0, "n": 2}), ((_V,), {})]
_N = np.where(_M > 0.6, np.nan, _M)
_N[:, 0] = np.nan  # an all-NaN column
for _f in (np.nanmax, np.nanmin, np.nanmean, np.nanvar, np.nanstd):
    SAMPLES[_f] = [((_N,), {"axis": 0}), ((_N,), {"axis": 1}), ((_M,), {})]
SAMPLES[np.reshape] = [
    ((_M, (20,)), {}),
    ((_M, (5, 2, 2)), {}),
    ((_M3, (6, 4)), {}),
    ((_M, -1), {}),
]
SAMPLES[np.ravel] = [((_M,), {}), ((_M3,), {})]
SAMPLES[np.squeeze] = [((_M[:, :1],), {}), ((_M3[:, :1],), {"axis": 1})]
SAMPLES[np.expand_dims] = [((_M, 1), {}), ((_M, (0, 3)), {})]
SAMPLES[np.concatenate] = [(([_M, _C],), {}), (([_M, _C[:, :2]],), {"axis": 1})]
SAMPLES[np.stack] = [(([_M, _C],), {}), (([_M, _C],), {"axis": 2})]
SAMPLES[np.broadcast_to] = [((_V, (3, 4)), {}), ((_M[:, :1], (5, 6)), {})]
SAMPLES[np.nonzero] = [((_M > 0.5,), {}), ((_V > 0.3,), {})]
SAMPLES[np.array_split] = [((_M, 3), {}), ((_M, [1, 3]), {"axis": 1})]
SAMPLES[np.split] = [((_M, 5), {}), ((_M, 2), {"axis": 1})]
SAMPLES[np.vstack] = [(([_M, _C],), {}), (([_V, _V],), {})]
SAMPLES[np.hstack] = [(([_M, _C],), {}), (([_V, _V],), {})]
SAMPLES[np.flip] = [((_M,), {"axis": 1}), ((_M,), {"axis": 0}), ((_M,), {}), ((_V,), {})]
SAMPLES[np.roll] = [((_M, 2), {"axis": 0}), ((_M, -1), {"axis": 1})]
_S = np.random.default_rng(8).integers(0, 9, 37).astype(np.float64)
_S[[3, 20]] = np.nan  # NaNs sort last; duplicates
SAMPLES[np.sort] = [((_S,), {}), ((_M,), {"axis": 0}), ((_M,), {"axis": None}), ((_M,), {})]
SAMPLES[np.argsort] = [  # dmesh's argsort is stable: compare with NumPy's stable one
    ((_S,), {"kind": "stable"}),
    ((_M,), {"axis": 0, "kind": "stable"}),
    ((_M,), {"kind": "stable"}),
]
SAMPLES[np.unique] = [
    ((_S,), {}),
    (((_M * 4).round(),), {}),
    ((_S,), {"equal_nan": False}),
    # Tuple results are compared without equal_nan: samples with return_* have no NaN.
    (((_M * 4).round(),), {"return_index": True, "return_inverse": True, "return_counts": True}),
    ((_S[~np.isnan(_S)].astype(np.int64),), {"return_inverse": True, "return_counts": True}),
]
SAMPLES[np.var] = [((_M,), {}), ((_M,), {"axis": 0, "ddof": 1})]
SAMPLES[np.std] = [((_M,), {"axis": 1})]
SAMPLES[np.linalg.norm] = [((_V,), {}), ((_M,), {})]
_A = _sample_array("d", (9, 3), 6)  # np.linalg: a tall matrix (TSQR when its rows are sharded)
SAMPLES[np.linalg.qr] = [((_A,), {}), ((_A,), {"mode": "r"}), ((_A + 1j * _A[::-1],), {})]
SAMPLES[np.linalg.svd] = [((_A,), {"full_matrices": False}), ((_A,), {"compute_uv": False})]
SAMPLES[np.linalg.lstsq] = [((_A, _A[:, 0] ** 2), {}), ((_A, _sample_array("d", (9, 2), 7)), {})]
_P = _sample_array("d", (4, 4), 8) + 2 * np.eye(4)  # square: sharded, replicated below a size
SAMPLES[np.linalg.solve] = [((_P, _A[:4]), {}), ((_P, _V), {})]
for _f in LOCAL_ONLY:  # symmetric positive definite: every function applies
    SAMPLES[_f] = [((_P @ _P.T,), {})]
SAMPLES[np.take] = [  # a list index is replicated; an ndarray one becomes a DArray index
    ((_M, [3, 0, -1, 3]), {"axis": 0}),
    ((_M, np.array([[1, 3], [0, 0]])), {"axis": 1}),
    ((_M, [19, 0, 7]), {}),
    ((_V, [5, -7]), {"mode": "wrap"}),
]
_Z = _M + 1j * _C  # np.fft: 2-D and 3-D inputs (a sharded 1-D array has no axis to transpose to)
for _f in (np.max, np.min):  # complex: NumPy's lexicographic order, not an MPI reduction
    SAMPLES[_f] += [((_Z,), {"axis": 0}), ((_Z,), {}), ((_Z,), {"axis": 1, "keepdims": True})]
SAMPLES[(np.maximum, "reduce")] += [((_Z, 0), {})]
for _f in (np.real, np.imag, np.iscomplex, np.isreal):  # complex parts: complex and real data
    SAMPLES[_f] = [((_Z,), {}), ((_M,), {}), ((_Z * (_M > 0.5),), {})]
SAMPLES[np.angle] = [((_Z,), {}), ((-_M,), {"deg": True}), ((_Z * (_M > 0.5),), {})]
for _f in (np.round, np.around):  # rounding: halves, decimals, negative decimals
    SAMPLES[_f] = [
        ((_M * 10 - 5,), {}),
        ((_M * 100,), {"decimals": 1}),
        ((_Z * 1e3,), {"decimals": -2}),
    ]
SAMPLES[np.fix] = [((_M * 10 - 5,), {})]
for _f in (np.zeros_like, np.ones_like):  # the argument's layout, its dtype or another
    SAMPLES[_f] = [((_M,), {}), ((_M,), {"dtype": np.int64}), ((_M,), {"shape": (3, 2)})]
SAMPLES[np.full_like] = [((_M, 2.5), {}), ((_M, -1), {"dtype": np.int8})]
SAMPLES[np.copy] = [((_M,), {}), ((_Z,), {})]
for _f in (np.isposinf, np.isneginf, np.sinc, np.i0):
    SAMPLES[_f] = [((_M * 4 - 2,), {})]
SAMPLES[np.meshgrid] = [((_V, _V[:3]), {}), ((_V[:2], _V), {"indexing": "ij", "sparse": True})]
SAMPLES[np.fill_diagonal] = [((_M, 7.0), {}), ((_M, _V[:3]), {"wrap": True})]  # in place
SAMPLES[np.apply_along_axis] = [((np.sum, 1, _M), {}), ((np.cumsum, 0, _M), {})]
SAMPLES[np.result_type] = [((_M, np.float32), {}), ((_I.astype(np.int8), _M), {})]
SAMPLES[np.can_cast] = [((_M, np.float32), {}), ((_I, np.float64), {"casting": "same_kind"})]
SAMPLES[np.min_scalar_type] = [((_M,), {}), ((_I,), {})]
SAMPLES[np.fft.fft] = [((_Z,), {}), ((_M,), {"axis": 0, "n": 7})]
SAMPLES[np.fft.ifft] = [((_Z,), {"axis": 0, "norm": "ortho"})]
SAMPLES[np.fft.rfft] = [((_M,), {"axis": 0}), ((_M3,), {"n": 5})]
SAMPLES[np.fft.irfft] = [((_Z,), {"axis": 0, "n": 9}), ((_Z,), {})]
SAMPLES[np.fft.fftn] = [((_M3,), {}), ((_Z,), {"s": (3, 6), "axes": (0, 1)})]
SAMPLES[np.fft.ifftn] = [((_M3,), {"norm": "forward"})]
SAMPLES[np.fft.rfftn] = [((_M3,), {}), ((_M,), {"s": (4, 5), "axes": (1, 0)})]
SAMPLES[np.fft.irfftn] = [((_Z,), {"s": (5, 7), "axes": (0, 1)}), ((_M3 + 0j,), {})]
SAMPLES[np.fft.fft2] = [((_M3,), {})]
SAMPLES[np.fft.ifft2] = [((_Z,), {})]
SAMPLES[np.fft.rfft2] = [((_M,), {})]
SAMPLES[np.fft.irfft2] = [((_Z,), {"norm": "ortho"})]

# -- hostile values ----------------------------------------------------------------------
# Every third element (at places drawn from a fixed seed) becomes one of these, and about
# two in five of the others change sign: sqrt, log, arcsin, arccosh... get values outside
# their domains, divisions get zeros of both signs, sums get infinities of both signs.
FLOAT_SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 2.0, -1.5, 0.0, 1.0, -np.inf, -0.5])
_INT64 = np.iinfo(np.int64)
INT_SPECIALS = [_INT64.min, _INT64.max, 0, -1, _INT64.min + 1, -7]


def hostile(x: np.ndarray, seed: int) -> np.ndarray:
    """``x`` with hostile values: float specials, or integer extremes (of ``x``'s dtype)."""
    rng = np.random.default_rng(seed)
    out = np.array(x, copy=True)
    flat = out.reshape(-1)  # a view: ``out`` is contiguous
    flat[rng.random(flat.size) < 0.4] *= -1
    where = rng.permutation(flat.size)[: max(1, flat.size // 3)]
    if out.dtype.kind == "f":
        flat[where] = FLOAT_SPECIALS[(np.arange(where.size) + seed) % FLOAT_SPECIALS.size]
    else:
        info = np.iinfo(out.dtype)
        specials = np.array([np.clip(v, info.min, info.max) for v in INT_SPECIALS], out.dtype)
        flat[where] = specials[(np.arange(where.size) + seed) % specials.size]
    return out


# Left out of the hostile suite, and why:
NOT_HOSTILE = {
    # their answer does not depend on the values
    np.shape, np.ndim, np.size,
    # LAPACK's answer on NaN or inf is unspecified (garbage, or LinAlgError); on other
    # values a decomposition is unique only up to signs, which rounding flips
    np.linalg.qr, np.linalg.svd, np.linalg.lstsq, np.linalg.solve, *LOCAL_ONLY,
    # which outputs are NaN rather than +-inf depends on the order of the butterflies
    # (pocketfft's factorization against dmesh's transposes): no answer to compare with
    np.fft.fft, np.fft.ifft, np.fft.rfft, np.fft.irfft, np.fft.fftn, np.fft.ifftn,
    np.fft.rfftn, np.fft.irfftn, np.fft.fft2, np.fft.ifft2, np.fft.rfft2, np.fft.irfft2,
}  # fmt: skip
# Ops in which each element of the result comes from one element of each operand
# (elementwise ufuncs and functions, moves and copies): values of different blocks never
# meet, so the hostile suite gives them one sharded layout and the Partial operands only.
ELEMENTWISE = {
    *UFUNCS, np.where, np.clip, np.isclose, np.nan_to_num,
    np.transpose, np.swapaxes, np.moveaxis, np.reshape, np.ravel, np.squeeze, np.expand_dims,
    np.concatenate, np.stack, np.vstack, np.hstack, np.broadcast_to, np.array_split, np.split,
    np.flip, np.roll, np.take,
}  # fmt: skip
# Arguments that are indices, not values: they stay as they are.
_INDEX_ARGS = {np.take: (1,)}


def _hostile_sample(key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sample | None:
    """The sample with its float and integer operands made hostile (None: complex operands:
    which parts of a complex product with an infinity are NaN depends on the formula)."""
    out: list[Any] = []
    for i, x in enumerate(args):
        if i == 0 and isinstance(x, list):  # concatenate, stack: a list of operands
            x = [hostile(a, 10 * i + j) for j, a in enumerate(x)]
        elif isinstance(x, np.ndarray) and x.dtype.kind == "c":
            return None
        elif isinstance(x, np.ndarray) and x.dtype.kind in "iuf":
            x = x if i in _INDEX_ARGS.get(key, ()) else hostile(x, i)
        out.append(x)
    return tuple(out), kwargs


HOSTILE: dict[Any, list[Sample]] = {}
for _key, _samples in SAMPLES.items():
    if _key not in NOT_HOSTILE:
        _made = (_hostile_sample(_key, a, k) for a, k in _samples)
        HOSTILE[_key] = [s for s in _made if s is not None]

# Integer extremes for the ops whose integer answer is exact, so wraps around as NumPy's
# does (np.mean, np.var and np.std are left out: they add the extremes in float64, where
# the rounding depends on the order of the terms).
_E = hostile(_I.astype(np.int64) - 6, 1)
_EXTREMES: list[Sample] = [((_E,), {}), ((_E,), {"axis": 0})]
for _key in (np.sum, np.prod, np.max, np.min, np.argmax, np.argmin, np.nansum, np.nanprod,
             np.any, np.all, np.count_nonzero, np.diff):  # fmt: skip
    HOSTILE[_key] += _EXTREMES
for _key in (np.cumsum, np.cumprod):  # (dmesh does not flatten for them: an axis)
    HOSTILE[_key] += [((_E,), {"axis": 0}), ((_E,), {"axis": 1})]
for _u in (np.add, np.multiply, np.maximum, np.minimum):
    HOSTILE[(_u, "reduce")] += [((_E, 0), {})]
    HOSTILE[(_u, "accumulate")] += [((_E,), {})]
HOSTILE[np.sort] += _EXTREMES
HOSTILE[np.argsort] += [((_E,), {"kind": "stable"}), ((_E,), {"axis": 0, "kind": "stable"})]
HOSTILE[np.unique] += [((_E,), {"return_index": True, "return_inverse": True})]
HOSTILE[np.matmul] += [((_E, _E.T.copy()), {}), ((_E, _E[0]), {})]
HOSTILE[np.einsum] += [(("ij,kj->ik", _E, _E), {})]

# Blocks along axis 0 that combine a NaN with one of the other sign (inf + -inf is
# -nan on x86, np.nan is +nan) in column 0, and maxima (column 1) and minima (column 2)
# that are zeros of both signs, on 2, 3 and 4 ranks: a reduction of the blocks whose
# result depends on the order of its operands shows here as ranks that differ.
_Q = np.array([[np.nan, -0.0, 0.0], [1, -1, 1], [np.inf, -2, 2],
               [-np.inf, 0.0, -0.0], [np.inf, -3, 3], [-np.inf, -4, 4]])  # fmt: skip
for _key in (np.sum, np.prod, np.max, np.min, np.mean, np.nansum, np.nanmax, np.nanmin,
             np.argmax, np.argmin):  # fmt: skip
    HOSTILE[_key] += [((_Q,), {"axis": 0}), ((_Q[:, 1:],), {})]
HOSTILE[np.cumsum] += [((_Q,), {"axis": 0})]
for _u in (np.add, np.maximum, np.minimum):
    HOSTILE[(_u, "reduce")] += [((_Q, 0), {})]

# -- issue 14's areas, one module each (kept apart so that they are written apart) ---------

for _area in (samples_creation, samples_linalg, samples_selection, samples_sets, samples_shape,
              samples_signals, samples_statistics):  # fmt: skip
    for _key, _calls in _area.SAMPLES.items():
        SAMPLES.setdefault(_key, []).extend(_calls)
    for _key, _calls in _area.HOSTILE.items():
        HOSTILE.setdefault(_key, []).extend(_calls)
