"""Boolean-mask selections reduced over their rows are recorded (issue 29, item 4).

``X[mask].mean(axis=0)`` (and ``sum``, ``max``, ``min``, as methods or NumPy
functions) is one node running eager's selection and reduction, its counts'
all-gather inside: k-means traces whole. Checked against eager's bits on row-,
column- and 2-D-sharded, replicated and uneven (even empty) blocks, with NaN and
infinities, empty selections (NaN means, as eagerly) and a max of an empty selection
(NumPy's ValueError on every rank, compiled as eagerly). Anything else done with a
selection (its shape, arithmetic, another axis) breaks the graph, and the compiled
function still answers as eagerly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI
from test_compile import _against_eager, _placements, _uneven, _whole_against_eager

import dmesh
from dmesh import Replicate, compile
from helpers import assert_all, assert_raises_all


def _kmeans(X: Any, C: Any) -> Any:
    for _ in range(2):
        d2 = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=-1)
        labels = d2.argmin(axis=1)
        C = np.stack([X[labels == j].mean(axis=0) for j in range(C.shape[0])])
    return C, labels


def _reductions(X: Any, w: Any) -> Any:
    big, small = w > 0.5, w < -10.0  # (small: selects nothing)
    return (
        np.sum(X[big], axis=0),
        X[big].max(axis=0),
        np.min(X[~big], 0),
        X[small].mean(axis=0),
        np.mean(X[big], axis=-X.ndim, keepdims=False),
    )


def _data(rows: int, cols: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    X[1, 0], X[2, 1] = np.nan, np.inf
    return X, rng.standard_normal(rows)


@pytest.mark.parametrize("rows", [13, 4])
def test_selections_reduced_trace_whole(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, rows: int
) -> None:
    X, w = _data(rows, 3, 1)
    C = X[:3].copy()
    C[0, 0] = 0.0  # (finite centres: a NaN one attracts nothing)
    found: list[str] = []
    replicated = [Replicate()] * mesh.ndim
    for placements in _placements(mesh):
        x = dmesh.distribute(X, mesh, placements)
        c = dmesh.distribute(C, mesh, replicated)
        found += _whole_against_eager(_kmeans, (x, c), f"k-means {placements}")
        v = dmesh.distribute(w, mesh, [dmesh.Shard(0), *replicated[1:]])
        found += _whole_against_eager(_reductions, (x, v), f"reductions {placements}")
    assert_all(comm, not found, "; ".join(found[:3]))


def test_uneven_and_empty_blocks(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    X, w = _data(3, 2, 2)  # 3 rows over up to 4 ranks once cut: an empty block
    x, v = _uneven(mesh, X), _uneven(mesh, w)
    found = _whole_against_eager(_reductions, (x, v), "uneven")
    assert_all(comm, not found, "; ".join(found[:3]))


def test_a_max_of_nothing_raises_as_eagerly(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    X, w = _data(6, 2, 3)
    x = dmesh.distribute(X, mesh, [dmesh.Shard(0)] * mesh.ndim)
    v = dmesh.distribute(w, mesh, [dmesh.Shard(0)] * mesh.ndim)

    def empty_max(x: Any, v: Any) -> Any:
        return x[v > 100.0].max(axis=0) + 1.0

    assert_raises_all(comm, ValueError, lambda: empty_max(x, v))
    compiled = compile(empty_max, segments="always")
    for _ in range(2):  # the tracing call, then the plan
        assert_raises_all(comm, ValueError, lambda: compiled(x, v))


def test_other_uses_break(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    X, w = _data(7, 2, 4)
    x = dmesh.distribute(X, mesh, [dmesh.Shard(0)] * mesh.ndim)
    v = dmesh.distribute(w, mesh, [dmesh.Shard(0)] * mesh.ndim)
    uses = {
        "shape": lambda x, v: x[v > 0].shape[0] * x,
        "arithmetic": lambda x, v: (x[v > 0] * 2.0).sum(axis=0),
        "another axis": lambda x, v: x[v > 0].sum(axis=1),
        "no axis": lambda x, v: x[v > 0].mean() + x,
        "a ufunc": lambda x, v: np.sqrt(x[v > 0]).sum(axis=0),
        "integers": lambda x, v: np.ones_like(x, dtype=np.int64)[v > 0].mean(axis=0),
    }
    found: list[str] = []
    for name, fn in uses.items():
        compiled = compile(fn, segments="always")
        found += _against_eager(compiled, fn, (x, v), name)
        if not compiled.breaks:
            found.append(f"{name}: traced whole")
    assert_all(comm, not found, "; ".join(found[:3]))
