"""DeviceMesh: an N-D arrangement of MPI ranks with one communicator per dimension.

The topology follows mpi4py-fft's ``Subcomm``: one ``Create_cart`` over the
ranks, then one ``Cart_sub`` per mesh dimension, all created eagerly by
:func:`init_mesh`. Creating them lazily on first use would make the first use a
collective that only some ranks might reach.

A mesh and everything derived from it (sub-meshes, flattened meshes) form one
family whose communicators the root mesh owns (:mod:`dmesh.communicators`):
:meth:`DeviceMesh.close` on the root frees them all, and whatever is still open at exit is freed by
``dmesh.collectives.lifecycle`` before ``MPI_Finalize``. Nothing is freed in
``__del__``: freeing is collective, and garbage collection runs at different
moments on different ranks.
"""

from __future__ import annotations

from types import TracebackType
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
from mpi4py import MPI

from dmesh._device import bind_cuda, validate_device
from dmesh.collectives.errors import ArgumentError, DMeshError
from dmesh.communicators import MeshFamily, validate_comm
from dmesh.core.abstract_mesh import AbstractMesh

__all__ = ["DeviceMesh", "init_mesh"]

MeshDims: TypeAlias = int | str | tuple[int | str, ...] | list[int | str]


class DeviceMesh:
    """An N-D mesh of MPI ranks with named dimensions; build one with :func:`init_mesh`.

    Ranks outside the mesh (when it covers only part of the communicator it was
    built on) hold a non-member mesh: its ``coordinate`` and ``rank`` are None
    and its communicators are ``MPI.COMM_NULL``.

    The constructor is internal; its arguments are the already-created
    communicators of one mesh.
    """

    def __init__(
        self,
        *,
        abstract: AbstractMesh,
        device: str,
        cart: MPI.Comm,
        dim_comms: tuple[MPI.Comm, ...],
        coordinate: tuple[int, ...] | None,
        ranks: npt.NDArray[np.int64],
        root_dims: tuple[int, ...],
        family: MeshFamily,
        is_root: bool,
    ) -> None:
        self._abstract = abstract
        self._device = device
        self._cart = cart
        self._dim_comms = dim_comms
        self._coordinate = coordinate
        self._rank = None if cart == MPI.COMM_NULL else cart.Get_rank()
        ranks.flags.writeable = False
        self._ranks = ranks
        self._root_dims = root_dims  # this mesh's dimensions among the root mesh's
        self._family = family
        self._is_root = is_root

    # Metadata: local, valid on every rank, also after close().

    @property
    def abstract(self) -> AbstractMesh:
        """The names and sizes of this mesh, without communicators."""
        return self._abstract

    @property
    def shape(self) -> tuple[int, ...]:
        """Size of each mesh dimension."""
        return self._abstract.shape

    @property
    def ndim(self) -> int:
        """Number of mesh dimensions."""
        return self._abstract.ndim

    @property
    def names(self) -> tuple[str, ...]:
        """Name of each mesh dimension."""
        return self._abstract.names

    @property
    def device(self) -> str:
        """``"cpu"`` (NumPy blocks) or ``"cuda"`` (CuPy blocks)."""
        return self._device

    def size(self, mesh_dim: int | str | None = None) -> int:
        """Return the number of ranks along ``mesh_dim`` (index or name), or in the mesh if None."""
        return self._abstract.size(mesh_dim)

    @property
    def coordinate(self) -> tuple[int, ...] | None:
        """This rank's coordinates in the mesh, or None if it is not a member."""
        return self._coordinate

    @property
    def is_member(self) -> bool:
        """Whether this rank belongs to the mesh."""
        return self._coordinate is not None

    @property
    def rank(self) -> int | None:
        """This rank's rank in the mesh communicator ``comm()``, or None if not a member."""
        return self._rank

    @property
    def ranks(self) -> npt.NDArray[np.int64]:
        """Read-only array of the mesh's shape: the rank of ``init_mesh``'s comm at each coordinate.

        For a sub-mesh it is the slice through this rank's coordinate; a
        non-member sees the slice through coordinate 0 as a representative.
        """
        return self._ranks

    @property
    def closed(self) -> bool:
        """Whether the mesh's communicators have been freed by :meth:`close`."""
        return self._family.closed

    # Communicators.

    def comm(self, mesh_dim: int | str | None = None) -> MPI.Comm:
        """Return the communicator of ``mesh_dim``, or of the whole mesh if None.

        Parameters
        ----------
        mesh_dim : int, str or None
            A mesh dimension as an index or a name; None for the whole mesh
            (a Cartesian communicator whose rank order is the mesh's row-major
            order). For a 1-D mesh both are the same communicator.

        Returns
        -------
        MPI.Comm
            The communicator, or ``MPI.COMM_NULL`` on a rank outside the mesh.

        Raises
        ------
        DMeshError
            If the mesh has been closed.
        """
        self._check_open("comm")
        if mesh_dim is None:
            return self._cart
        return self._dim_comms[self._abstract.dim_index(mesh_dim)]

    def __getitem__(self, mesh_dims: MeshDims) -> DeviceMesh:
        """Return the sub-mesh of ``mesh_dims`` (a name, an index or a tuple) through this rank.

        A 1-D sub-mesh reuses this mesh's communicator of that dimension; a
        multi-dimensional one is created with ``Cart_sub`` on first use, which
        is collective over the mesh's members, and cached. Sub-meshes keep the
        mesh's dimension order.
        """
        self._check_open("mesh[...]")
        selected = self._select(mesh_dims)
        if selected == tuple(range(self.ndim)):
            return self
        root_dims = tuple(self._root_dims[i] for i in selected)
        key = ("sub", root_dims)
        cached = self._family.derived.get(key)
        if cached is not None:
            return cached
        abstract = AbstractMesh(
            tuple(self.shape[i] for i in selected), tuple(self.names[i] for i in selected)
        )
        coord = self._coordinate
        # A non-member belongs to no slice; it sees the one through the origin.
        where = coord if coord is not None else (0,) * self.ndim
        ranks = self._ranks[
            tuple(slice(None) if i in selected else where[i] for i in range(self.ndim))
        ]
        if coord is None:
            cart: MPI.Comm = MPI.COMM_NULL
        elif len(selected) == 1:
            cart = self._dim_comms[selected[0]]
        else:
            remain = [i in selected for i in range(self.ndim)]
            cart = self._family.own(self._cart_comm().Sub(remain), f"mesh dims {abstract.names}")
        sub = DeviceMesh(
            abstract=abstract,
            device=self._device,
            cart=cart,
            dim_comms=tuple(self._dim_comms[i] for i in selected),
            coordinate=None if coord is None else tuple(coord[i] for i in selected),
            ranks=ranks,
            root_dims=root_dims,
            family=self._family,
            is_root=False,
        )
        self._family.derived[key] = sub
        return sub

    def flatten(self) -> DeviceMesh:
        """Return a 1-D mesh over the same ranks in row-major order, named ``"_".join(names)``.

        The first call on an N-D mesh creates its communicator (collective over
        the mesh's members); the result is cached. A 1-D mesh is its own
        flattening.
        """
        self._check_open("flatten")
        if self.ndim == 1:
            return self
        key = ("flat", self._root_dims)
        cached = self._family.derived.get(key)
        if cached is not None:
            return cached
        n = self.size()
        if self._coordinate is None:
            comm: MPI.Comm = MPI.COMM_NULL
            coordinate = None
        else:
            # reorder=False keeps the ranks, which are already row-major in the cart.
            comm = self._family.own(
                self._cart_comm().Create_cart([n], [False], reorder=False),
                f"flattened mesh {self.names}",
            )
            coordinate = (int(np.ravel_multi_index(self._coordinate, self.shape)),)
        flat = DeviceMesh(
            abstract=AbstractMesh((n,), ("_".join(self.names),)),
            device=self._device,
            cart=comm,
            dim_comms=(comm,),
            coordinate=coordinate,
            ranks=self._ranks.reshape(-1),
            root_dims=self._root_dims,
            family=self._family,
            is_root=False,
        )
        self._family.derived[key] = flat
        return flat

    # Lifetime.

    def close(self) -> None:
        """Free the communicators of this mesh and of every mesh derived from it.

        Collective over the mesh's members, idempotent. On a sub-mesh or a
        flattened mesh it does nothing: the mesh they came from owns their
        communicators.
        """
        if self._is_root:
            self._family.close()

    def __enter__(self) -> DeviceMesh:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        closed = ", closed" if self.closed else ""
        return (
            f"DeviceMesh({self.shape}, names={self.names}, device={self._device!r}, "
            f"coordinate={self._coordinate}{closed})"
        )

    # Helpers.

    def _check_open(self, what: str) -> None:
        if self._family.closed:
            raise DMeshError(
                f"{what}: {self!r} has been closed and its communicators freed; "
                "create a new mesh with dmesh.init_mesh"
            )

    def _cart_comm(self) -> MPI.Cartcomm:
        # Members of an N-D mesh always hold a Cartcomm (from Create_cart or Sub).
        if not isinstance(self._cart, MPI.Cartcomm):
            raise DMeshError(f"internal: {self!r} has no Cartesian communicator")
        return self._cart

    def _select(self, mesh_dims: MeshDims) -> tuple[int, ...]:
        items = list(mesh_dims) if isinstance(mesh_dims, (tuple, list)) else [mesh_dims]
        if not items:
            raise ArgumentError(f"mesh[...]: select at least one dimension of {self._abstract!r}")
        selected = tuple(self._abstract.dim_index(item) for item in items)
        if len(set(selected)) != len(selected):
            raise ArgumentError(f"mesh[...]: {mesh_dims!r} names a dimension twice")
        if list(selected) != sorted(selected):
            in_order = tuple(self.names[i] for i in sorted(selected))
            raise ArgumentError(
                f"mesh[...]: {mesh_dims!r} is not in the mesh's dimension order {self.names}; "
                f"Cart_sub cannot transpose a mesh, select {in_order!r} instead"
            )
        return selected


def init_mesh(
    shape: int | tuple[int, ...] | list[int] | None = None,
    names: str | tuple[str, ...] | list[str] | None = None,
    device: str = "cpu",
    comm: MPI.Intracomm = MPI.COMM_WORLD,
) -> DeviceMesh:
    """Create a mesh of ranks over ``comm``; collective over ``comm``.

    Parameters
    ----------
    shape : int, tuple of int or None
        Size of each mesh dimension. One size may be ``-1``: it is filled in so
        that the mesh covers all of ``comm`` (as ``MPI.Compute_dims`` would).
        A shape with fewer ranks than ``comm`` makes a mesh over its first
        ``prod(shape)`` ranks; the others get a non-member mesh. None: a 1-D
        mesh over all ranks.
    names : tuple of str or None
        Name of each dimension; default ``("dim0", "dim1", ...)``.
    device : {"cpu", "cuda"}
        ``"cuda"`` binds every rank of ``comm`` to GPU ``local_rank % n_gpus``,
        the local rank being its rank among the ranks of its node. Needs CuPy
        (the ``gpu`` extra).
    comm : MPI.Intracomm
        The ranks to arrange; the mesh's rank at each coordinate is given by
        :attr:`DeviceMesh.ranks`.

    Returns
    -------
    DeviceMesh
        The mesh; close it with :meth:`DeviceMesh.close` or a ``with`` block.

    Raises
    ------
    ArgumentTypeError, ArgumentError
        On every rank, before any communication, for an argument of the wrong
        type or value; for ``device="cuda"`` also when CuPy or a GPU is
        missing on any rank.

    Examples
    --------
    >>> mesh = init_mesh((2, -1), names=("dp", "tp"))  # doctest: +SKIP
    >>> mesh["tp"].comm()                               # doctest: +SKIP
    """
    comm = validate_comm(comm)
    abstract = AbstractMesh.for_ranks(shape, names, comm.Get_size())
    device = validate_device(device)
    if device == "cuda":
        bind_cuda(comm)
    family = MeshFamily()
    cart, dim_comms, coordinate = family.create_cart(comm, abstract)
    return DeviceMesh(
        abstract=abstract,
        device=device,
        cart=cart,
        dim_comms=dim_comms,
        coordinate=coordinate,
        ranks=np.arange(abstract.size(), dtype=np.int64).reshape(abstract.shape),
        root_dims=tuple(range(abstract.ndim)),
        family=family,
        is_root=True,
    )
