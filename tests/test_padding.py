"""``np.pad`` of DArrays in every mode (issue 14, item 3; ops/rules/padding.py): NumPy's
values at 1-4 ranks, balanced, uneven and empty blocks, each axis sharded; errors on every
rank."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from dmesh.collectives.errors import UnsupportedError
from helpers import BitVerdict, assert_raises_all

X = np.arange(42.0).reshape(7, 6) - 10.5
X[2, 3], X[4, 0], X[0, 5] = -0.0, np.nan, np.inf
IX = np.arange(42).reshape(7, 6) * 3 - 50
IX[3, 3] = np.iinfo(np.int64).max // 4

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("constant", {}), ("constant", {"constant_values": ((1, 2), (3, -0.0))}), ("empty", {}),
    ("edge", {}), ("reflect", {}), ("symmetric", {}), ("wrap", {}), ("maximum", {}),
    ("minimum", {"stat_length": 2}), ("mean", {}), ("mean", {"stat_length": ((1, 2), (3, 1))}),
    ("median", {}), ("linear_ramp", {}), ("linear_ramp", {"end_values": (5, -3)}),
]  # fmt: skip
WIDTHS = [2, ((1, 3), (0, 2)), ((9, 0), (1, 8)), ((0, 0), (0, 0))]


def _layouts(mesh: dmesh.DeviceMesh, x: np.ndarray) -> list[tuple[str, dmesh.DArray]]:
    rest = [Replicate()] * (mesh.ndim - 1)
    made = [(str(p), dmesh.distribute(x, mesh, p)) for p in
            ([Shard(0), *rest], [*rest, Shard(1)], [Replicate(), *rest])]  # fmt: skip
    whole = dmesh.distribute(np.concatenate([x, x]), mesh, [Shard(0), *rest])
    made += [("tail", whole[len(x) :]), ("head", whole[: len(x)])]
    if mesh.ndim == 2:
        made.append(("both", dmesh.distribute(x, mesh, [Shard(0), Shard(1)])))
    return made


@pytest.mark.parametrize(
    ("mode", "kwargs"), CALLS, ids=[f"{m}{i}" for i, (m, _) in enumerate(CALLS)]
)
def test_pad_agrees_with_numpy(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, mode: str, kwargs: dict[str, Any]
) -> None:
    with BitVerdict(comm) as verdict:
        for x in (X, IX):
            for width in WIDTHS:
                with np.errstate(all="ignore"):
                    want = np.pad(x, width, mode, **kwargs)
                for label, a in _layouts(mesh, x):
                    with np.errstate(all="ignore"):
                        got = np.asarray(np.pad(a, width, mode, **kwargs).full_array())
                    name = f"{mode} {kwargs} {x.dtype} {width} {label}"
                    verdict.bits(name, got)
                    ok = got.shape == want.shape and got.dtype == want.dtype
                    expected = want
                    if mode == "empty" and ok:  # only the interior is defined
                        inner = tuple(slice(w[0], w[0] + n) for w, n in
                                      zip(np.broadcast_to(width, (2, 2)), x.shape))  # fmt: skip
                        got, expected = got[inner], want[inner]
                    exact = mode not in ("mean", "linear_ramp")  # sums in another order
                    if exact:
                        ok = ok and np.array_equal(got, expected, equal_nan=True)
                    else:
                        ok = ok and np.allclose(got, expected, rtol=1e-12, equal_nan=True)
                    verdict.check(ok, f"{name}: {got} != {expected}")


def test_pad_keeps_shards(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(X, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    with BitVerdict(comm) as verdict:
        for mode, kwargs in CALLS:
            got = np.pad(a, 2, mode, **kwargs)
            verdict.check(got.placements[0] == Shard(0), f"{mode}: {got.placements}")


def test_pad_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(X, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    empty = a[:0]
    assert_raises_all(comm, ValueError, np.pad, empty, 1, "edge")
    assert_raises_all(comm, ValueError, np.pad, a, -1)
    assert_raises_all(comm, TypeError, np.pad, a, 1.5)
    assert_raises_all(comm, ValueError, np.pad, a, 1, "edge", constant_values=3)
    assert_raises_all(comm, ValueError, np.pad, a, 1, "mean", stat_length=0)
    assert_raises_all(comm, UnsupportedError, np.pad, a, 1, "reflect", reflect_type="odd")
    assert_raises_all(comm, UnsupportedError, np.pad, a, 1, lambda *args: None)


def test_pad_value_the_dtype_cannot_hold_raises_everywhere(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    # NumPy raises (NaN into ints, 1000 into int8); so does every rank, also those whose
    # blocks get no padded cell.
    rest = [Replicate()] * (mesh.ndim - 1)
    for data, value, error in [(IX, np.nan, ValueError), (IX.astype(np.int8), 1000, OverflowError)]:
        a = dmesh.distribute(data, mesh, [Shard(0), *rest])
        assert_raises_all(comm, error, np.pad, a, ((1, 0), (0, 0)), constant_values=value)
