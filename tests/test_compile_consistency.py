"""Every op of the consistency suite runs compiled with the eager result's bits.

For each registered op and its first sample (tests/samples.py), the call is
made eagerly and through ``dmesh.compile`` twice (the tracing call, then a
replay), on the first array operand sharded along axis 0 (evenly, and as a
slice that leaves one rank's block empty), the others replicated. Compiled
and eager must give the same specs and block bytes, or raise the same class
of error, on every rank; a call the tracer cannot record runs eagerly, which
this checks too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI
from samples import SAMPLES, call, key_name
from test_compile import _same
from test_consistency import VALUES_UNSPECIFIED, _copies, _in_place, sliced

import dmesh
from dmesh import Replicate, Shard
from dmesh.ops.compiler import compile
from helpers import BitVerdict


def _darrays(args: tuple[Any, ...], mesh: dmesh.DeviceMesh, layout: str) -> list[Any]:
    """The sample's arrays as DArrays: the first sharded on axis 0 (``layout``), the rest
    replicated."""
    replicated = [Replicate()] * mesh.ndim
    out: list[Any] = []
    first = True

    def make(x: np.ndarray) -> dmesh.DArray:
        if x.ndim == 0:
            return dmesh.distribute(x, mesh, replicated)
        if layout == "sliced":
            return sliced(mesh, x, head=True)
        return dmesh.distribute(x, mesh, [Shard(0), *replicated[1:]])

    for x in _copies(args):
        if isinstance(x, list) and x and isinstance(x[0], np.ndarray):
            out.append([make(a) if first else dmesh.distribute(a, mesh, replicated) for a in x])
            first = False
        elif isinstance(x, np.ndarray):
            out.append(make(x) if first else dmesh.distribute(x, mesh, replicated))
            first = False
        else:
            out.append(x)
    return out


def _outcome(func: Any, key: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The result (the mutated first operand for in-place ops), or the error's class."""
    try:
        with np.errstate(all="ignore"):
            result = func(*args, **kwargs)
    except Exception as exc:
        return type(exc)
    return args[0] if _in_place(key) else result


@pytest.mark.parametrize("key", list(SAMPLES), ids=key_name)
def test_compiled_equals_eager(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, key: Any) -> None:
    args, kwargs = SAMPLES[key][0]
    if any(isinstance(v, np.ndarray) and v.ndim for v in kwargs.values()):
        pytest.skip("array keywords (like=, out=) are covered by the consistency suite")
    func = call(key)

    def apply(*operands: Any) -> Any:
        return func(*operands, **kwargs)

    with BitVerdict(comm) as verdict:
        for layout in ("even", "sliced"):
            want = _outcome(apply, key, _darrays(args, mesh, layout), {})
            compiled = compile(apply)
            for attempt in ("trace", "replay"):
                got = _outcome(compiled, key, _darrays(args, mesh, layout), {})
                label = f"{key_name(key)} {layout} {attempt}"
                if isinstance(want, type) or isinstance(got, type):
                    verdict.check(got is want, f"{label}: {got} != eager {want}")
                    continue
                if key in VALUES_UNSPECIFIED:  # np.empty_like: compare the specs only
                    ok = isinstance(got, dmesh.DArray) and got.spec == want.spec
                    verdict.check(ok, f"{label}: {got!r} != eager {want!r}")
                    continue
                message = _same(got, want)
                verdict.check(not message, f"{label}: {message}")
