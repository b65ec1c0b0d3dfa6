"""Turn the ``group`` argument of a collective into an MPI communicator.

A group is one of:

* an ``MPI.Intracomm`` (used as is);
* ``None`` (``MPI.COMM_WORLD``);
* a 1-D mesh: any object with an ``ndim`` of 1 and a ``comm(mesh_dim)`` method
  (``dmesh.DeviceMesh`` is one; ``collectives`` needs no import of dmesh);
* ``(mesh, mesh_dim)``: the communicator of one mesh dimension, ``mesh_dim``
  an index or a name;
* a list or tuple of world ranks: a communicator over those ranks, in that
  order, created on first use by exactly those ranks and cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from mpi4py import MPI

from dmesh.collectives import lifecycle
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError

__all__ = ["Group", "MeshLike", "resolve_group"]


@runtime_checkable
class MeshLike(Protocol):
    """What a mesh offers to collectives: its rank and per-dimension communicators."""

    @property
    def ndim(self) -> int:
        """Number of mesh dimensions."""
        ...

    def comm(self, mesh_dim: int | str | None = None) -> MPI.Comm:
        """The communicator of one mesh dimension (``None``: the whole mesh)."""
        ...


Group = MPI.Comm | MeshLike | tuple[MeshLike, int | str] | Sequence[int] | None

_rank_list_comms: dict[tuple[int, ...], MPI.Intracomm] = {}


def resolve_group(group: Group) -> MPI.Intracomm:
    """Return the intracommunicator that ``group`` names (see the module docstring)."""
    if isinstance(group, MPI.Intracomm):
        comm: MPI.Comm = group
    elif group is None:
        return MPI.COMM_WORLD
    elif isinstance(group, MeshLike) and not isinstance(group, (tuple, list)):
        if group.ndim != 1:
            raise ArgumentError(
                f"group: a mesh used as a group must be 1-D, got a {group.ndim}-D mesh; "
                "pass (mesh, mesh_dim) to use one of its dimensions"
            )
        comm = group.comm(0)
    elif (
        isinstance(group, tuple)
        and len(group) == 2
        and isinstance(group[0], MeshLike)
        and isinstance(group[1], (int, str))
    ):
        comm = group[0].comm(group[1])
    elif isinstance(group, (list, tuple)) and all(
        isinstance(r, int) and not isinstance(r, bool) for r in group
    ):
        return _comm_of_ranks(tuple(group))
    elif isinstance(group, MPI.Comm):
        raise ArgumentTypeError(
            f"group: an intercommunicator or topology-less Comm ({type(group).__name__}) "
            "is not supported; pass an intracommunicator such as MPI.COMM_WORLD"
        )
    else:
        raise ArgumentTypeError(
            f"group: expected an MPI.Intracomm, a 1-D DeviceMesh, (mesh, mesh_dim), a list "
            f"of world ranks or None, got {type(group).__name__}: {group!r}"
        )
    if comm == MPI.COMM_NULL:
        raise ArgumentError(
            "group: this rank is not a member of that mesh or communicator "
            f"(world rank {MPI.COMM_WORLD.Get_rank()}); only member ranks call its collectives"
        )
    if not isinstance(comm, MPI.Intracomm):
        raise ArgumentTypeError(f"group: resolved to {type(comm).__name__}, not an Intracomm")
    return comm


def _comm_of_ranks(ranks: tuple[int, ...]) -> MPI.Intracomm:
    cached = _rank_list_comms.get(ranks)
    if cached is not None:
        return cached
    world = MPI.COMM_WORLD
    size = world.Get_size()
    bad = [r for r in ranks if not 0 <= r < size]
    if not ranks or bad or len(set(ranks)) != len(ranks):
        raise ArgumentError(
            f"group: a rank list must hold distinct world ranks in [0, {size}), got {list(ranks)}"
        )
    if world.Get_rank() not in ranks:
        raise ArgumentError(
            f"group: world rank {world.Get_rank()} is not in the group {list(ranks)}; "
            "only the ranks of a group call its collectives"
        )
    world_group = world.Get_group()
    sub_group = world_group.Incl(list(ranks))
    # Create_group is collective over the group's members only, so ranks
    # outside the list are never involved and cannot deadlock on it.
    comm = world.Create_group(sub_group)
    sub_group.Free()
    world_group.Free()
    _rank_list_comms[ranks] = comm
    lifecycle.track(comm)
    return comm
