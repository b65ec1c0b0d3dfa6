"""The decomposition path (issue 14, item 11): NumPy's own implementation of a function
without a rule runs with DArrays flowing through it, each inner call by its own rule;
one that would need the whole array raises on every rank instead of gathering it.

``run_implementation`` is called directly, so that these functions take the path even
where dmesh also has a rule or a decomposition of its own for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard, debug
from dmesh.collectives.errors import UnsupportedError
from dmesh.ops.numpy_implementations import implementation_of, run_implementation
from helpers import BitVerdict, assert_all, assert_raises_all

RNG = np.random.default_rng(14)
M = RNG.uniform(-2, 2, (7, 5))
M[2, 3] = np.nan
V = RNG.uniform(-2, 2, 9)
V[4] = -0.0
Z = V[:6] + 1j * V[3:]

# (function, args as 'M'/'V'/'Z' for a distributed input or a value, kwargs). NumPy
# functions written in NumPy calls; none has a rule of its own in these calls.
WORKS: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
    (np.cov, ("M",), {}),
    (np.cov, ("M",), {"rowvar": False, "ddof": 0}),
    (np.atleast_2d, ("V",), {}),
    (np.atleast_3d, ("M",), {}),
    (np.trapezoid, ("M",), {"axis": 0}),
    (np.trapezoid, ("V",), {"dx": 0.5}),
    (np.fliplr, ("M",), {}),
    (np.flipud, ("M",), {}),
    (np.rot90, ("M",), {"k": 3}),
    (np.append, ("V", "V"), {}),
    (np.column_stack, (["V", "V"],), {}),
    (np.dstack, (["M", "M"],), {}),
    (np.hsplit, ("M", 5), {}),
    (np.polyval, ([1.0, -2.0, 3.0], "V"), {}),
    (np.sort_complex, ("Z",), {}),
    (np.iscomplexobj, ("Z",), {}),
    (np.isrealobj, ("M",), {}),
    (np.real_if_close, ("Z",), {}),
]
# What would need the whole array: an error, never a gather and never a wrong answer.
REFUSED: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
    (np.vander, ("V", 3), {}),  # fills np.empty(...) by assignment
    (np.array_equiv, ("V", "V"), {}),  # NumPy's code catches the refusal: still an error
    (np.apply_along_axis, (np.sum, 0, "M"), {}),
]


def _inputs(mesh: dmesh.DeviceMesh, placements: list[Any], uneven: bool) -> dict[str, Any]:
    arrays = {"M": M, "V": V, "Z": Z, "M3": M[:, :3].copy()}
    out: dict[str, Any] = {}
    for name, x in arrays.items():
        if uneven:  # a slice of a longer array: uneven blocks, the first rank's may be empty
            whole = np.concatenate([np.full_like(x[:3], np.inf), x])
            out[name] = dmesh.distribute(whole, mesh, placements)[3:]
        else:
            out[name] = dmesh.distribute(x, mesh, placements)
    return out


def _bind(args: Any, values: dict[str, Any]) -> Any:
    if isinstance(args, str) and args in values:
        return values[args]
    if isinstance(args, (list, tuple)):
        return type(args)(_bind(a, values) for a in args)
    return args


def _full(x: Any) -> Any:
    if isinstance(x, dmesh.DArray):
        return x.full_array()
    if isinstance(x, (list, tuple)):
        return [_full(v) for v in x]
    return x


@pytest.mark.parametrize("uneven", [False, True], ids=["balanced", "uneven"])
def test_numpy_code_runs_on_darrays(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, uneven: bool
) -> None:
    arrays = {"M": M, "V": V, "Z": Z, "M3": M[:, :3].copy()}
    with BitVerdict(comm) as verdict:
        for placements in ([Shard(0)] + [Replicate()] * (mesh.ndim - 1), [Replicate()] * mesh.ndim):
            values = _inputs(mesh, placements, uneven)
            for func, args, kwargs in WORKS:
                label = f"{func.__name__}{args} {placements}"
                got = _full(run_implementation(func, _bind(args, values), kwargs))
                want = func(*_bind(args, arrays), **kwargs)
                for g, w in zip(got if isinstance(got, list) else [got],
                                want if isinstance(want, list) else [want]):  # fmt: skip
                    g, w = np.asarray(g), np.asarray(w)
                    same = g.shape == w.shape and g.dtype == w.dtype
                    verdict.check(
                        same and np.allclose(g, w, rtol=1e-12, equal_nan=True),
                        f"{label}: {g!r} != {w!r}",
                    )
                    verdict.bits(label, g)


def test_no_gather_on_the_way(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """np.cov of a row-sharded matrix's columns moves small partial results, not the rows."""
    big = np.arange(64 * 8, dtype=np.float64).reshape(64, 8)
    a = dmesh.distribute(big, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    with debug.CommMode() as mode:
        result = run_implementation(np.cov, (a,), {"rowvar": False})
    sent = sum(received for _, received in mode.bytes().values())
    assert_all(comm, sent <= 4 * 8 * 8 * 8, f"received {sent} bytes: more than a few 8x8 results")
    want = np.cov(big, rowvar=False)
    assert_all(comm, np.allclose(result.full_array(), want, rtol=1e-12), "values")


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c[0].__name__)
def test_what_needs_the_whole_array_raises_everywhere(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, case: Any
) -> None:
    func, args, kwargs = case
    values = _inputs(mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1), False)
    assert_raises_all(
        comm, UnsupportedError, run_implementation, func, _bind(args, values), kwargs,
        match="whole",
    )  # fmt: skip


def test_functions_without_python_code_are_not_run(comm: MPI.Intracomm) -> None:
    """C functions and the wrappers of ndarray methods (they call a.method: a loop)."""
    for func in (np.empty_like, np.sum, np.ptp, np.clip):
        assert_all(comm, implementation_of(func) is None, f"{func.__name__} would be rebound")
    assert_all(comm, implementation_of(np.cov) is not None, "np.cov has Python code")
