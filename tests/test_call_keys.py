"""One key scheme (``dmesh._call_keys``): every door finds the steps stored under its keys.

The hottest doors build their keys inline (DArray operators, ``np.add(a, b)`` and
``np.sqrt(a)`` through the ufunc hook, ``np.where(c, a, b)``, ``np.add(a, b, out=o)``).
Each call is made once (it decides and is remembered), then again with the
pipeline's planning replaced by a failure: the second call must be served from
the cache, with NumPy's values, for every kind of operand the scheme keys (a
DArray, Python and NumPy scalars, numeric 0-d arrays), at every rank count, with
uneven and empty blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Shard, _call_keys, _hooks
from dmesh.core.scalars import PYTHON_SCALARS
from dmesh.ops import dispatch, pipeline
from helpers import assert_all, assert_equal_all

OTHERS: list[Any] = [
    2.5, 3, True, 1 - 2j, np.float64(-0.0), np.float32(np.inf), np.int8(-128),
    np.array(2.0), np.array(np.int16(-7)),
]  # fmt: skip
CALLS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("x + s", lambda x, s: x + s),
    ("s * x", lambda x, s: s * x),
    ("np.subtract(x, s)", lambda x, s: np.subtract(x, s)),
    ("np.maximum(s, x)", lambda x, s: np.maximum(s, x)),
    ("x + x", lambda x, s: x + x),
    ("np.sqrt(x)", lambda x, s: np.sqrt(x)),
    ("np.where(x > 0, x, -x)", lambda x, s: np.where(x > 0, x, -x)),
    ("np.clip(x, s, 4)", lambda x, s: np.clip(x, s, 4)),
]


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("planned again: the cache was missed")


@pytest.mark.parametrize("other", range(len(OTHERS)), ids=lambda i: repr(OTHERS[i]))
@pytest.mark.parametrize("call", range(len(CALLS)), ids=lambda i: CALLS[i][0])
@pytest.mark.parametrize("n", [7, 1])
def test_each_door_finds_its_key(
    comm: MPI.Intracomm,
    mesh: dmesh.DeviceMesh,
    monkeypatch: pytest.MonkeyPatch,
    call: int,
    other: int,
    n: int,
) -> None:
    name, fn = CALLS[call]
    s = OTHERS[other]
    if "clip" in name and np.iscomplexobj(s):
        pytest.skip("np.clip of complex bounds: NumPy's ordering of complex numbers")
    full = np.linspace(-3.0, 3.0, n * max(1, comm.size - 1))
    full[0] = np.nan
    x = dmesh.distribute(full, mesh, [Shard(0)] + [dmesh.Replicate()] * (mesh.ndim - 1))
    with np.errstate(all="ignore"):
        want = fn(full, s)
        fn(x, s)  # decides and remembers
        monkeypatch.setattr(dispatch, "prepare", _refuse)
        monkeypatch.setattr(pipeline, "prepare", _refuse)
        if name in ("x + s", "x + x") or (name == "s * x" and type(s) in PYTHON_SCALARS):
            # The operators' own inline lookup must serve: not even the dispatcher runs.
            monkeypatch.setattr(_hooks, "dispatch_operator", _refuse)
        got = fn(x, s)  # must hit the cache
    assert_equal_all(comm, got.full_array(), want)
    assert_all(comm, got.dtype == want.dtype, f"{got.dtype} != {want.dtype}")


@pytest.mark.parametrize("other", range(len(OTHERS)), ids=lambda i: repr(OTHERS[i]))
def test_out_calls_find_their_key(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, other: int) -> None:
    s = OTHERS[other]
    full = np.linspace(-3.0, 3.0, 3 * comm.size + 1).astype(np.complex128)
    x = dmesh.distribute(full, mesh, [Shard(0)] + [dmesh.Replicate()] * (mesh.ndim - 1))
    out = dmesh.distribute(np.zeros_like(full), mesh, x.placements)
    np.multiply(x, s, out=out)  # decides (into a temporary)
    np.multiply(x, s, out=out)  # cached: straight into out, remembered as direct
    key = _call_keys.out_key(np.multiply, out, (x, s))
    assert_all(comm, None not in key[2:], f"{key[2:]}: no key")
    from dmesh.ops import ufunc_keywords

    assert_all(comm, key in ufunc_keywords._direct, "not remembered under out_key")
    np.multiply(x, s, out=out)  # the direct path
    assert_equal_all(comm, out.full_array(), full * s)


def test_keys_of_what_has_none(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(np.arange(4.0 * comm.size), mesh, [Shard(0)] * mesh.ndim)
    keys = [
        _call_keys.call_key(np.add, (x, [1.0]), {}),  # a list
        _call_keys.call_key(np.add, (x, np.ones(2)), {}),  # an n-d array
        _call_keys.call_key(np.add, (x, np.array("a")), {}),  # a string 0-d array
        _call_keys.call_key(np.sum, (x,), {"axis": 1.0}),  # a float keyword
        _call_keys.argument_key(np.sum, (x, [0]), {}),  # a list argument
        _call_keys.parsed_key(np.add, (1.0, 2.0), ()),  # no DArray
        _call_keys.parsed_key(np.add, (x,), [0]),  # an unhashable static part
    ]
    assert_all(comm, all(k is None for k in keys), f"{keys}")
    assert_all(comm, _call_keys.call_key(np.sum, (x,), {"axis": 1}) != _call_keys.call_key(
        np.sum, (x,), {"axis": True}), "axis=1 and axis=True share a key")  # fmt: skip
    assert_all(comm, _call_keys.binary_key(np.add, x, 2.0) == _call_keys.call_key(
        np.add, (x, 2.0), {}), "the operators' key differs from the calls'")  # fmt: skip
