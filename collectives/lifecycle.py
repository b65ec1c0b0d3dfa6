"""Communicators dmesh created, freed in one place before MPI finalizes.

mpi4py calls ``MPI_Finalize`` from a C-level exit hook that runs after
Python's ``atexit`` handlers, so freeing here is always in time. Freeing is a
collective on each communicator; every rank runs the same handlers in the same
order, so it never depends on garbage-collection timing (which is why nothing
is freed in ``__del__``).
"""

from __future__ import annotations

import atexit

from mpi4py import MPI

_owned: list[MPI.Comm] = []
_hook_installed = False


def track(comm: MPI.Comm) -> MPI.Comm:
    """Remember ``comm`` so that it is freed at exit unless released earlier."""
    global _hook_installed
    if comm == MPI.COMM_NULL:
        return comm
    if not _hook_installed:
        atexit.register(free_all)
        _hook_installed = True
    _owned.append(comm)
    return comm


def release(comm: MPI.Comm) -> None:
    """Free ``comm`` now (collective over its ranks) and forget it."""
    for i, owned in enumerate(_owned):
        if owned is comm:
            del _owned[i]
            break
    if comm != MPI.COMM_NULL and not MPI.Is_finalized():
        comm.Free()


def free_all() -> None:
    """Free every tracked communicator, newest first."""
    while _owned:
        comm = _owned.pop()
        if comm != MPI.COMM_NULL and not MPI.Is_finalized():
            comm.Free()
