"""Rearranging and joining functions of issue 14, item 3 (ops/rules/arrangement.py,
ops/rules/joining.py, ops/kernels/joins.py): NumPy's values, dtype and shape at 1-4 ranks
on balanced, uneven and empty blocks; a sharded input gives a sharded result; joins along
a sharded axis never gather; errors raised on every rank."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from helpers import BitVerdict, Verdict, assert_raises_all

X = np.arange(42.0).reshape(7, 6) - 20.5
X[1, 2], X[3, 0], X[5, 5], X[0, 4] = np.nan, np.inf, -np.inf, -0.0
V = np.array([3.0, -0.0, np.nan, -np.inf, 7.5, 1e300, -2.0, 0.5, 9.0])
IX = np.array([[np.iinfo(np.int64).min, -1, 0], [1, 5, np.iinfo(np.int64).max]] * 3)

Op = Callable[[Any], Any]

# name -> function of one array (NumPy's or a DArray): each is compared with NumPy.
UNARY: dict[str, Op] = {
    "atleast_1d": np.atleast_1d,
    "atleast_2d": np.atleast_2d,
    "atleast_3d": np.atleast_3d,
    "fliplr": lambda a: np.fliplr(a) if a.ndim > 1 else np.flipud(a),
    "flipud": np.flipud,
    "rot90": np.rot90,
    "rot90 k=2": lambda a: np.rot90(a, 2),
    "rot90 k=-1 axes=(1,0)": lambda a: np.rot90(a, -1, axes=(1, 0)),
    "rot90 k=4": lambda a: np.rot90(a, 4),
    "rollaxis": lambda a: np.rollaxis(a, -1),
    "rollaxis start": lambda a: np.rollaxis(a, 0, a.ndim),
    "matrix_transpose": np.matrix_transpose,
    "linalg.matrix_transpose": np.linalg.matrix_transpose,
    "unstack": np.unstack,
    "unstack axis=1": lambda a: np.unstack(a, axis=1),
    "tile 2": lambda a: np.tile(a, 2),
    "tile (2,1)": lambda a: np.tile(a, (2, 1)),
    "tile (3,1,2)": lambda a: np.tile(a, (3, 1, 2)),
    "tile 0": lambda a: np.tile(a, (0, 2)),
    "roll": lambda a: np.roll(a, 4),
    "roll -13": lambda a: np.roll(a, -13),
    "roll axis 0": lambda a: np.roll(a, 3, axis=0),
    "roll axis 1": lambda a: np.roll(a, -2, axis=1),
    "roll tuple": lambda a: np.roll(a, (1, 2, -1), axis=(0, 1, 0)),
    "roll 0": lambda a: np.roll(a, 0, axis=0),
    "append": lambda a: np.append(a, a),
    "append axis 0": lambda a: np.append(a, a[:2], axis=0),
    "append axis 1": lambda a: np.append(a, a[:, :1], axis=1),
    "block": lambda a: np.block([[a, a[:, :2]], [a[:2], a[:2, :2]]]),
    "block 1-d": lambda a: np.block([a[:, 0], a[:, 1]]),
    "dstack": lambda a: np.dstack([a, a]),
    "vstack dtype": lambda a: np.vstack([a, a], dtype=np.float32),
    "hstack dtype": lambda a: np.hstack([a, a], dtype=np.float32),
    "amax axis 0": lambda a: np.amax(a, axis=0),
    "amin": np.amin,
    "column_stack": lambda a: np.column_stack([a, a[:, 0]]),
    "column_stack 1-d": lambda a: np.column_stack([a[:, 0], a[:, 1]]),
    "hsplit": lambda a: np.hsplit(a, 3),
    "hsplit at": lambda a: np.hsplit(a, [1, 4]),
    "vsplit": lambda a: np.vsplit(a, [2, 3, 9]),
    "dsplit": lambda a: np.dsplit(np.atleast_3d(a), 1),
    "concatenate": lambda a: np.concatenate([a, a[1:], a[:0]]),
    "concatenate axis=None": lambda a: np.concatenate([a, a[2:]], axis=None),
    "concatenate axis=1": lambda a: np.concatenate([a, a[:, 1:]], axis=1),
    "concatenate dtype": lambda a: np.concatenate([a, a], dtype=np.float32),
    "delete": lambda a: np.delete(a, [0, 5, -1, 5]),
    "delete axis 0": lambda a: np.delete(a, slice(1, None, 2), axis=0),
    "delete axis 1": lambda a: np.delete(a, 0, axis=1),
    "delete mask": lambda a: np.delete(a, np.arange(a.shape[0]) % 3 == 1, axis=0),
    "delete none": lambda a: np.delete(a, [], axis=0),
    "insert": lambda a: np.insert(a, 3, -1.5),
    "insert axis 0": lambda a: np.insert(a, [0, 2, 2, a.shape[0]], 9.0, axis=0),
    "insert axis 0 rows": lambda a: np.insert(a, 1, a[:1] * 2, axis=0),
    "insert axis 1": lambda a: np.insert(a, [1, -1], a[:, :2], axis=1),
    "insert axis 1 scalar index": lambda a: np.insert(a, 2, [[7.0], [8.0]][0], axis=1),
    "repeat": lambda a: np.repeat(a, 2),
    "repeat 0": lambda a: np.repeat(a, 0, axis=0),
    "repeat axis 0": lambda a: np.repeat(a, 3, axis=0),
    "repeat axis 0 each": lambda a: np.repeat(a, np.arange(a.shape[0]) % 3, axis=0),
    "repeat axis 1 each": lambda a: np.repeat(a, [2, 0, 1, 1, 0, 3][: a.shape[1]], axis=1),
    "repeat flat each": lambda a: np.repeat(a, np.arange(a.size) % 4),
    "squeeze": lambda a: np.squeeze(a[:, :1]),
    "swapaxes": lambda a: np.swapaxes(a, 0, 1),
    "swapaxes negative": lambda a: np.swapaxes(a, axis1=-1, axis2=0),
    "moveaxis tuple": lambda a: np.moveaxis(a[..., None], (0, 2), (1, 0)),
    "moveaxis keywords": lambda a: np.moveaxis(a, source=-1, destination=0),
    "transpose axes": lambda a: np.transpose(a, axes=(-1, 0)),
    "broadcast_arrays": lambda a: np.broadcast_arrays(a, a[:1]),
}


TWO_D = (
    "rot90", "matrix", "linalg", "unstack axis", "block", "dstack", "column", "vsplit",
    "append axis 1", "insert axis 1", "delete axis 1", "concatenate axis=1", "hsplit", "squeeze",
    "swapaxes", "swapaxes negative", "moveaxis tuple", "moveaxis keywords", "transpose axes",
    "broadcast", "tile (2,1)", "rollaxis", "roll axis 1", "roll tuple", "dsplit",
    "repeat axis 1",
)  # fmt: skip


KEEP_SHARDS = (
    "roll", "roll axis 0", "append axis 0", "concatenate", "delete axis 0", "insert axis 0",
    "tile (2,1)", "flipud", "rot90", "repeat axis 0 each",
)  # fmt: skip


def _layouts(mesh: dmesh.DeviceMesh, x: np.ndarray) -> list[tuple[str, Op]]:
    """Ways to hold ``x``: every Shard/Replicate combination, and slices of a sharded
    array (uneven blocks, an empty first or last block)."""
    rest = [Replicate()] * (mesh.ndim - 1)
    choices = [Replicate(), *(Shard(d) for d in range(x.ndim))]
    made: list[tuple[str, Op]] = []
    for combo in itertools.product(choices, repeat=mesh.ndim):
        made.append((str(combo), lambda x, c=list(combo): dmesh.distribute(x, mesh, c)))
    first = [Shard(0), *rest]
    made.append(
        ("tail of S(0)", lambda x: dmesh.distribute(np.concatenate([x, x]), mesh, first)[len(x) :])
    )
    made.append(
        ("head of S(0)", lambda x: dmesh.distribute(np.concatenate([x, x]), mesh, first)[: len(x)])
    )
    if x.ndim > 1:
        made.append(("S(1) sliced", lambda x: dmesh.distribute(
            np.concatenate([x[:, -1:], x], axis=1), mesh, [*rest, Shard(1)])[:, 1:]))  # fmt: skip
    return made


def _check(verdict: BitVerdict, label: str, got: Any, want: Any) -> None:
    if isinstance(want, (tuple, list)):
        verdict.check(isinstance(got, (tuple, list)) and len(got) == len(want), f"{label}: count")
        for i, (g, w) in enumerate(zip(got, want)):
            _check(verdict, f"{label}[{i}]", g, w)
        return
    verdict.check(isinstance(got, dmesh.DArray), f"{label}: not a DArray: {type(got)}")
    full = np.asarray(got.full_array())
    verdict.bits(label, full)
    verdict.check(full.shape == want.shape and full.dtype == want.dtype,
                  f"{label}: {full.shape} {full.dtype} != {want.shape} {want.dtype}")  # fmt: skip
    same = np.array_equal(full, want, equal_nan=True)
    signs = np.array_equal(np.signbit(full), np.signbit(want))
    verdict.check(same and signs, f"{label}: {full} != {want}")


@pytest.mark.parametrize("name", list(UNARY))
def test_agrees_with_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, name: str) -> None:
    op = UNARY[name]
    with BitVerdict(comm) as verdict:
        for x in (X, V, IX) if name not in ("fliplr", "rot90 k=-1 axes=(1,0)") else (X, IX):
            if x.ndim < 2 and name.startswith(TWO_D):
                continue
            want = op(x)
            for label, make in _layouts(mesh, x):
                _check(verdict, f"{name} {x.shape} {label}", op(make(x)), want)


def test_sharded_results_stay_sharded(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A Shard(0) input gives a sharded result and the joins move only what they must."""
    rest = [Replicate()] * (mesh.ndim - 1)
    a = dmesh.distribute(X, mesh, [Shard(0), *rest])
    with Verdict(comm) as verdict:
        for name in KEEP_SHARDS:
            got = UNARY[name](a)
            verdict.check(any(p.is_shard() for p in got.placements), f"{name}: {got.placements}")
        with debug.CommMode() as mode:
            np.concatenate([a, a])
        verdict.check("allgather" not in str(mode.counts()).lower(), f"{mode.counts()}")


def test_partial_operands(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    p = dmesh.distribute(X[:, :3].copy(), mesh, [Partial("sum"), *rest])
    s = dmesh.distribute(X[:, :3].copy(), mesh, [Shard(0), *rest])
    want = X[:, :3]
    with BitVerdict(comm) as verdict:
        _check(verdict, "append", np.append(s, p, axis=0), np.append(want, want, axis=0))
        _check(verdict, "roll", np.roll(p, 2), np.roll(want, 2))
        _check(verdict, "tile", np.tile(p, 2), np.tile(want, 2))
        _check(verdict, "insert", np.insert(s, 2, p[:1], axis=0), np.insert(want, 2, want[:1], 0))


def test_errors_raise_everywhere(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(X, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    v = a[0]
    assert_raises_all(comm, ValueError, np.fliplr, v)
    assert_raises_all(comm, ValueError, np.rot90, a, 1, (0, 0))
    assert_raises_all(comm, ValueError, np.matrix_transpose, v)
    assert_raises_all(comm, ValueError, np.vsplit, v, 2)
    assert_raises_all(comm, ValueError, np.hsplit, a, 4)
    assert_raises_all(comm, ValueError, np.concatenate, [a, v])
    assert_raises_all(comm, ValueError, np.append, a, a[:, :2], axis=0)
    assert_raises_all(comm, IndexError, np.delete, a, 7, axis=0)
    assert_raises_all(comm, IndexError, np.insert, a, 8, 0.0, axis=0)
    assert_raises_all(comm, TypeError, np.concatenate, [a, a], dtype=np.int32)
    assert_raises_all(comm, ValueError, np.block, [[a], a])
    assert_raises_all(comm, ArgumentError, np.tile, a, -1)
    assert_raises_all(comm, ValueError, np.repeat, a, [1, 2], axis=0)
    assert_raises_all(comm, ValueError, np.repeat, a, -1)
    assert_raises_all(comm, TypeError, np.repeat, a, 1.5)
    assert_raises_all(comm, UnsupportedError, np.repeat, a, v.astype(int))
    # axes out of range or repeated: NumPy's errors, never a wrapped-around axis
    assert_raises_all(comm, np.exceptions.AxisError, np.swapaxes, a, 0, 2)
    assert_raises_all(comm, np.exceptions.AxisError, np.moveaxis, a, (0, 2), (1, 0))
    assert_raises_all(comm, ValueError, np.moveaxis, a, (0, 1), 0)
    assert_raises_all(comm, ValueError, np.transpose, a, (0, 0))
    assert_raises_all(comm, ValueError, np.transpose, a, (0,))
    assert_raises_all(comm, np.exceptions.AxisError, np.transpose, a, (0, 2))
