"""The communicators of a mesh family: created in one order, freed in the reverse one.

:func:`dmesh.init_mesh` makes one :class:`MeshFamily`: the Cartesian
communicator over the mesh's ranks and one ``Cart_sub`` per mesh dimension
(mpi4py-fft's ``Subcomm``), then whatever sub-meshes and flattened meshes
derived from it create on first use. The family owns all of them:
:meth:`MeshFamily.close` frees them newest first, and
``dmesh.collectives.lifecycle`` frees what is still open before
``MPI_Finalize``. Nothing is freed in ``__del__``: freeing is collective, and
garbage collection runs at different moments on different ranks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mpi4py import MPI

from dmesh.collectives import lifecycle, tracing
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.core.abstract_mesh import AbstractMesh

if TYPE_CHECKING:
    from dmesh.mesh import DeviceMesh

__all__ = ["MeshFamily", "validate_comm"]


class MeshFamily:
    """The communicators of one :func:`~dmesh.init_mesh` call and the meshes derived from it."""

    def __init__(self) -> None:
        self.owned: list[MPI.Comm] = []
        self.derived: dict[tuple[str, tuple[int, ...]], DeviceMesh] = {}
        self.closed = False

    def own(self, comm: MPI.Comm, name: str, mesh_dim: int | None = None) -> MPI.Comm:
        """Keep ``comm`` to free it on close; ``name`` is how debug tools call it."""
        if comm != MPI.COMM_NULL:
            lifecycle.track(comm)
            tracing.name_group(comm, name, mesh_dim)
            self.owned.append(comm)
        return comm

    def create_cart(
        self, comm: MPI.Intracomm, abstract: AbstractMesh
    ) -> tuple[MPI.Comm, tuple[MPI.Comm, ...], tuple[int, ...] | None]:
        """The mesh's communicator, one per mesh dim, and this rank's coordinate. Collective.

        Ranks beyond ``abstract.size()`` get ``COMM_NULL`` everywhere and no
        coordinate. ``reorder=False`` keeps ``comm``'s rank order, so ranks
        are row-major in the mesh.
        """
        dims, ndim = abstract.shape, abstract.ndim
        new_cart = comm.Create_cart(list(dims), [False] * ndim, reorder=False)
        if new_cart == MPI.COMM_NULL:
            return MPI.COMM_NULL, (MPI.COMM_NULL,) * ndim, None
        names = abstract.names
        coordinate = tuple(new_cart.Get_coords(new_cart.Get_rank()))
        # A 1-D mesh's only dimension is the whole mesh: no second communicator.
        if ndim == 1:
            cart = self.own(new_cart, f"mesh dim 0 ({names[0]!r})", 0)
            return cart, (cart,), coordinate
        cart = self.own(new_cart, f"mesh {names}")
        dim_comms = tuple(
            self.own(new_cart.Sub([j == i for j in range(ndim)]), f"mesh dim {i} ({names[i]!r})", i)
            for i in range(ndim)
        )
        return cart, dim_comms, coordinate

    def close(self) -> None:
        """Free every communicator of the family, newest first; idempotent. Collective."""
        if self.closed:
            return
        self.closed = True
        self.derived.clear()
        # Newest first: every member created these in the same order, so every
        # member frees them in the same order too.
        while self.owned:
            comm = self.owned.pop()
            tracing.forget_group(comm)
            lifecycle.release(comm)


def validate_comm(comm: object) -> MPI.Intracomm:
    """``comm`` if a mesh can be built on it, else a teaching error."""
    if not isinstance(comm, MPI.Comm):
        raise ArgumentTypeError(
            f"comm: expected an MPI.Intracomm such as MPI.COMM_WORLD, got "
            f"{type(comm).__name__}: {comm!r}"
        )
    if comm == MPI.COMM_NULL:
        raise ArgumentError("comm: got MPI.COMM_NULL; pass a communicator this rank belongs to")
    if not isinstance(comm, MPI.Intracomm):
        raise ArgumentTypeError(
            f"comm: expected an MPI.Intracomm, got {type(comm).__name__}; a mesh is built "
            "on an intracommunicator such as MPI.COMM_WORLD"
        )
    return comm
