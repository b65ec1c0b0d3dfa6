"""Layouts of 1-D and 2-D arrays for the order, search and set tests (tests/test_search.py...).

``layouts(mesh, x)`` gives ``(label, DArray)`` pairs holding ``x``: sharded on each mesh
dim and on both, replicated, and uneven with an empty block (a slice of a sharded array
twice as long). ``check`` compares a (tuple of) DArray result(s) with NumPy's on a
BitVerdict: shape, dtype, values (NaN equal to NaN), and the same bits on every rank.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

import dmesh
from dmesh import Replicate, Shard
from helpers import BitVerdict


def layouts(mesh: dmesh.DeviceMesh, x: np.ndarray) -> Iterator[tuple[str, dmesh.DArray]]:
    """``x`` as DArrays in several layouts (collective: every rank gets the same list)."""
    rest = [Replicate()] * (mesh.ndim - 1)
    yield "replicated", dmesh.distribute(x, mesh, [Replicate()] * mesh.ndim)
    if x.ndim == 0:
        return
    for d in range(x.ndim):
        yield f"Shard({d})", dmesh.distribute(x, mesh, [Shard(d)] * mesh.ndim)
    if mesh.ndim == 2:
        yield "[S0, R]", dmesh.distribute(x, mesh, [Shard(0), Replicate()])
        yield "[R, S0]", dmesh.distribute(x, mesh, [Replicate(), Shard(0)])
        if x.ndim > 1:
            yield "[S0, S1]", dmesh.distribute(x, mesh, [Shard(0), Shard(1)])
    n = x.shape[0]
    twice = np.concatenate([x, x])
    whole = dmesh.distribute(twice, mesh, [Shard(0), *rest])
    yield "uneven, last block empty", whole[:n]
    yield "uneven, first block empty", whole[n:]


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    return bool(np.array_equal(got, want, equal_nan=got.dtype.kind in "fc"))


def check(verdict: BitVerdict, label: str, got: Any, want: Any) -> None:
    """Record whether ``got`` equals NumPy's ``want`` and its bits (collective: gathers)."""
    if isinstance(want, tuple):
        verdict.check(isinstance(got, tuple) and len(got) == len(want), f"{label}: {got!r}")
        for i, (g, w) in enumerate(zip(got, want)):
            check(verdict, f"{label}[{i}]", g, w)
        return
    verdict.check(isinstance(got, dmesh.DArray), f"{label}: not a DArray: {type(got)}")
    full = np.asarray(got.full_array())
    if not got.mesh.is_member:
        return
    verdict.bits(label, full)
    want = np.asarray(want)
    verdict.check(_same(full, want), f"{label}: {full!r} != NumPy's {want!r}")
