"""The consistency suite, generated from the registry: every registered op has sample
inputs here and agrees with NumPy on one process, for several placements and meshes.
Registering an op without samples makes ``test_every_registered_op_has_samples`` fail."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import UnsupportedError
from dmesh.ops.kernels.linalg import LOCAL_ONLY, REPLICATED_MATRIX
from dmesh.ops.kernels.scan import ACCUMULATING
from dmesh.ops.registry import _decompositions, registered
from dmesh.ops.rules.elementwise import UFUNCS
from helpers import Verdict, assert_raises_all

RNG = np.random.default_rng(11)


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
SAMPLES: dict[Any, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {}
for _u in UFUNCS:
    _kinds = _ufunc_kinds(_u)
    _args = tuple(_sample_array(k, (5, 3) if i == 0 else (3,), i) for i, k in enumerate(_kinds))
    if _u is np.arccosh:  # its domain starts at 1
        _args = (_args[0] + 1.0,)
    SAMPLES[_u] = [(_args, {})]
_M = _sample_array("d", (5, 4), 1)
_V = _sample_array("d", (4,), 2)
for _f in (np.sum, np.prod, np.max, np.min, np.mean, np.any, np.all, np.count_nonzero, np.nansum,
           np.nanprod):  # fmt: skip
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
SAMPLES[np.clip] = [((_M, 0.3, 0.6), {})]
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
_P = _sample_array("d", (4, 4), 8) + 2 * np.eye(4)  # replicated only (sharded: an error)
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


def _agrees(got: Any, expected: Any) -> bool:
    """One item of a tuple result against NumPy's: floats to 1e-12, others exactly (collective)."""
    if not isinstance(got, dmesh.DArray):  # e.g. lstsq's rank: the same value and type
        return type(got) is type(expected) and bool(got == expected)
    full = np.asarray(got.full_array())
    if full.shape != np.shape(expected) or full.dtype != np.asarray(expected).dtype:
        return False
    if full.dtype.kind in "fc":
        return bool(np.allclose(full, expected, rtol=1e-12, atol=1e-12, equal_nan=True))
    return bool(np.array_equal(full, expected))


@pytest.mark.pure  # reads the registry, no communication
def test_every_registered_op_has_samples() -> None:
    missing = [k for k in [*registered(), *_decompositions] if k not in SAMPLES]
    assert not missing, f"registered without samples: {missing}"


def _placements(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[Any]]:
    choices: list[Any] = [Replicate(), *(Shard(d) for d in range(ndim))]
    combos = [list(p) for p in itertools.product(choices, repeat=mesh.ndim)]
    if ndim:
        combos.append([Partial("sum")] + [Replicate()] * (mesh.ndim - 1))
    return combos


def _key_name(key: Any) -> str:
    if isinstance(key, tuple):
        return f"{key[0].__name__}.{key[1]}"
    return str(getattr(key, "__name__", key))


def _call(key: Any) -> Callable[..., Any]:
    return getattr(key[0], key[1]) if isinstance(key, tuple) else key


@pytest.mark.parametrize("key", list(SAMPLES), ids=_key_name)
def test_op_agrees_with_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, key: Any) -> None:
    func = _call(key)
    linear = key in (np.add, np.subtract, np.multiply, np.sum, np.matmul, np.dot, np.einsum,
                     np.transpose, np.swapaxes, np.moveaxis, np.broadcast_to)  # fmt: skip
    with Verdict(comm) as verdict:  # one agreement per test, not one per placement
        for args, kwargs in SAMPLES[key]:
            expected = func(*args, **kwargs)
            if isinstance(args[0], list):  # concatenate/stack: the arrays come in a list
                expected = func(*args, **kwargs)
                for first in _placements(mesh, args[0][0].ndim):
                    joined = [dmesh.distribute(x, mesh, first) for x in args[0]]
                    got = func(joined, *args[1:], **kwargs)
                    same = np.array_equal(np.asarray(got.full_array()), expected)
                    verdict.check(same, f"{_key_name(key)}{first}")
                continue
            arrays = [i for i, x in enumerate(args) if isinstance(x, np.ndarray)]
            for first in _placements(mesh, args[arrays[0]].ndim):
                if (first[0] == Partial("sum") and not linear) or (
                    first[0] == Partial("sum") and args[arrays[0]].dtype == bool
                ):
                    continue
                dist = list(args)
                for i in arrays:  # the first operand as chosen, the others replicated
                    p = first if i == arrays[0] else [Replicate()] * mesh.ndim
                    dist[i] = dmesh.distribute(args[i], mesh, p)
                if key in REPLICATED_MATRIX and any(isinstance(p, Shard) for p in first):
                    # np.linalg functions that need their matrix whole: every rank refuses it
                    assert_raises_all(comm, UnsupportedError, func, *dist, **kwargs)
                    continue
                got = func(*dist, **kwargs)
                if isinstance(got, (tuple, list)) and got and isinstance(got[0], dmesh.DArray):
                    same = all(_agrees(g, e) for g, e in zip(got, expected, strict=True))
                    verdict.check(same, f"{_key_name(key)}{first}")
                    continue
                if not isinstance(got, dmesh.DArray):  # a Python value every rank must agree on
                    verdict.check(type(got) is type(expected) and got == expected, repr(got))
                    continue
                full = np.asarray(got.full_array())
                ok = full.shape == np.shape(expected) and full.dtype == np.asarray(expected).dtype
                kind = full.dtype.kind
                ok = ok and (
                    np.allclose(full, expected, rtol=1e-12, atol=1e-12, equal_nan=True)
                    if kind in "fc"
                    else np.array_equal(full, expected)
                )
                verdict.check(ok, f"{_key_name(key)}{first}: {full!r} != {expected!r}")
