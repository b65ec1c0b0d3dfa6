"""Checking the scaling model's formulas (``dmesh.scaling``) against recorded traffic.

``recorded(fn)`` runs ``fn`` under :class:`dmesh.debug.CommMode` and returns
its result and this rank's calls as :class:`dmesh.scaling.Call` s;
``check_traffic`` compares them with a formula's prediction for this rank,
exactly (collective, group size, bytes in and out, in order), and raises on
every rank if any rank differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh.debug import CommMode
from dmesh.scaling import Call, Traffic

WORLD = MPI.COMM_WORLD.Get_size()
# Every mesh the world size allows: the 1-D mesh, and the 2-D ones (a size-1
# mesh dim included, so a formula must also hold where a dim has one block).
TWO_D: dict[int, list[tuple[int, int]]] = {
    1: [(1, 1)],
    2: [(2, 1), (1, 2)],
    3: [(3, 1), (1, 3)],
    4: [(2, 2), (4, 1)],
}
TRAFFIC_MESH_SHAPES: list[tuple[int, ...]] = [(WORLD,), *TWO_D.get(WORLD, [])]


def recorded(fn: Callable[[], Any]) -> tuple[Any, Traffic]:
    """``fn()``'s result and the collective calls this rank made inside it."""
    with CommMode() as comm:
        result = fn()
    calls = tuple(
        Call(r.collective, r.group_size, r.sent_bytes, r.received_bytes) for r in comm.records
    )
    return result, calls


def rank_index(mesh: dmesh.DeviceMesh) -> int:
    """This rank's entry in a formula's per-rank list (row-major mesh coordinate)."""
    assert mesh.coordinate is not None
    return int(np.ravel_multi_index(mesh.coordinate, mesh.shape))


def check_traffic(
    mesh: dmesh.DeviceMesh, predicted: Sequence[Traffic], got: Traffic, label: str
) -> None:
    """Raise ``AssertionError`` on every rank unless each rank's ``got`` is its prediction."""
    expected = predicted[rank_index(mesh)] if len(predicted) == mesh.size() else None
    ok = expected == got
    message = (
        f"{label} on mesh {mesh.shape}, rank {mesh.rank}: predicted {expected}, recorded {got}"
        if expected is not None
        else f"{label}: the formula gave {len(predicted)} ranks, the mesh has {mesh.size()}"
    )
    flags = mesh.comm().allgather((ok, message))
    failures = [m for good, m in flags if not good]
    if failures:
        raise AssertionError("\n".join(failures))
