"""The shape of a device mesh without its communicators.

An :class:`AbstractMesh` is the names and sizes of a mesh's dimensions and
nothing else (JAX's ``AbstractMesh``). Layout arithmetic, sharding rules and
redistribution planning depend only on it, so they stay pure functions that
can be cached at module level and tested in one process without MPI.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, suggest

__all__ = ["AbstractMesh"]


@dataclass(frozen=True, repr=False)
class AbstractMesh:
    """Names and sizes of the dimensions of a mesh of ranks.

    Parameters
    ----------
    shape : tuple of int
        Size of each mesh dimension; every size is a positive int.
    names : tuple of str
        Name of each mesh dimension: unique, non-empty, one per size.

    Raises
    ------
    ArgumentTypeError
        If a size is not an int or a name not a str.
    ArgumentError
        If a size is not positive, a name is empty or repeated, the lengths of
        ``shape`` and ``names`` differ, or the mesh has no dimension.

    Examples
    --------
    >>> mesh = AbstractMesh((2, 3), ("dp", "tp"))
    >>> mesh
    mesh dp=2,tp=3
    >>> mesh.size(), mesh.size("tp"), mesh.dim_index(-1)
    (6, 3, 1)
    """

    shape: tuple[int, ...]
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        # The dataclass is frozen, so normalized values are stored with
        # object.__setattr__; this keeps equal meshes equal (and equal hashes)
        # whether they were built from lists, tuples or NumPy integers.
        object.__setattr__(self, "shape", _validate_shape(self.shape))
        object.__setattr__(self, "names", _validate_names(self.names, len(self.shape)))

    @classmethod
    def for_ranks(
        cls,
        shape: int | tuple[int, ...] | list[int] | None,
        names: str | tuple[str, ...] | list[str] | None,
        n_ranks: int,
    ) -> AbstractMesh:
        """Return the mesh :func:`dmesh.init_mesh` builds from these arguments on ``n_ranks`` ranks.

        Parameters
        ----------
        shape : int, tuple of int or None
            Sizes; one may be ``-1``, filled in so that the mesh covers all
            ``n_ranks`` ranks (as ``MPI.Compute_dims`` would). None: ``(n_ranks,)``.
        names : str, tuple of str or None
            Names; a str names a 1-D mesh; None: ``("dim0", "dim1", ...)``.
        n_ranks : int
            Number of ranks available; the mesh may use fewer, never more.

        Raises
        ------
        ArgumentError
            If there are two ``-1``, the other sizes do not divide ``n_ranks``,
            or the mesh needs more than ``n_ranks`` ranks (and as the constructor).
        ArgumentTypeError
            As the constructor.
        """
        if shape is None:
            shape = (n_ranks,)
        elif isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
            shape = (shape,)  # an int; any other type is reported by _sizes
        dims = list(_sizes(shape))
        if dims.count(-1) > 1:
            raise ArgumentError(f"shape: at most one size may be -1, got {tuple(dims)}")
        if -1 in dims:
            known = math.prod(size for size in dims if size != -1)
            if n_ranks % known:
                raise ArgumentError(
                    f"shape: the -1 in {tuple(dims)} cannot be filled in for {n_ranks} ranks: "
                    f"the other sizes multiply to {known}, which does not divide {n_ranks}"
                )
            dims[dims.index(-1)] = n_ranks // known
        if names is None:
            names = tuple(f"dim{i}" for i in range(len(dims)))
        elif isinstance(names, str):
            names = (names,)
        mesh = cls(tuple(dims), _validate_names(names, len(dims)))
        if mesh.size() > n_ranks:
            raise ArgumentError(
                f"shape: {mesh.shape} needs {mesh.size()} ranks but there are {n_ranks}; "
                "launch more ranks (mpiexec -n) or choose a smaller shape (one with fewer "
                "ranks makes a mesh over the first ranks)"
            )
        return mesh

    @property
    def ndim(self) -> int:
        """Number of mesh dimensions."""
        return len(self.shape)

    def size(self, mesh_dim: int | str | None = None) -> int:
        """Return the number of ranks along ``mesh_dim``, or in the whole mesh if None.

        Parameters
        ----------
        mesh_dim : int, str or None
            A mesh dimension as an index (negative counts from the end) or a
            name; None for the whole mesh.

        Returns
        -------
        int
            The size of that dimension, or the product of all sizes.
        """
        if mesh_dim is None:
            return math.prod(self.shape)
        return self.shape[self.dim_index(mesh_dim)]

    def dim_index(self, mesh_dim: int | str) -> int:
        """Return the non-negative index of ``mesh_dim``.

        Parameters
        ----------
        mesh_dim : int or str
            An index in ``[-ndim, ndim)`` or one of ``names``.

        Returns
        -------
        int
            The index in ``[0, ndim)``.

        Raises
        ------
        ArgumentError
            If the index is out of range or the name unknown (with a close
            match when there is one).
        ArgumentTypeError
            If ``mesh_dim`` is neither an int nor a str.
        """
        if isinstance(mesh_dim, str):
            if mesh_dim in self.names:
                return self.names.index(mesh_dim)
            raise ArgumentError(
                f"mesh_dim: no dimension named {mesh_dim!r} in {self!r}"
                f"{suggest(mesh_dim, self.names)}; the names are {list(self.names)}"
            )
        index = _as_int(mesh_dim)
        if index is None:
            raise ArgumentTypeError(
                f"mesh_dim: expected an int index or a str name, "
                f"got {type(mesh_dim).__name__}: {mesh_dim!r}"
            )
        if not -self.ndim <= index < self.ndim:
            raise ArgumentError(
                f"mesh_dim: index {index} is out of range for the {self.ndim}-D {self!r}; "
                f"use an index in [{-self.ndim}, {self.ndim}) or a name of {list(self.names)}"
            )
        return index % self.ndim

    def __repr__(self) -> str:
        return "mesh " + ",".join(f"{n}={s}" for n, s in zip(self.names, self.shape, strict=True))


def _as_int(value: object) -> int | None:
    """``value`` as an int if it is an integer (NumPy's included, bool excluded), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def _sizes(shape: object) -> tuple[int, ...]:
    """``shape`` as a tuple of ints; raise on types, and on sizes below 1 other than -1."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise ArgumentTypeError(
            f"shape: expected a tuple of ints, got {type(shape).__name__}: {shape!r}"
        )
    sizes = tuple(shape)
    ints: list[int] = []
    for size in sizes:
        value = _as_int(size)
        if value is None:
            raise ArgumentTypeError(
                f"shape: every size must be an int, got {type(size).__name__} {size!r} in {sizes!r}"
            )
        ints.append(value)
    result = tuple(ints)
    if not result:
        raise ArgumentError("shape: a mesh needs at least one dimension, got ()")
    bad = [size for size in result if size < 1 and size != -1]
    if bad:
        raise ArgumentError(
            f"shape: sizes must be positive (or one -1 to fill in), got {bad[0]} in {result}"
        )
    return result


def _validate_shape(shape: object) -> tuple[int, ...]:
    result = _sizes(shape)
    if -1 in result:
        raise ArgumentError(
            f"shape: sizes must be positive, got -1 in {result}; only init_mesh fills in a -1"
        )
    return result


def _validate_names(names: object, ndim: int) -> tuple[str, ...]:
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        raise ArgumentTypeError(
            f"names: expected a tuple of str, got {type(names).__name__}: {names!r}"
        )
    result = tuple(names)
    for name in result:
        if not isinstance(name, str):
            raise ArgumentTypeError(
                f"names: every name must be a str, got {type(name).__name__} {name!r} in {result!r}"
            )
        if not name:
            raise ArgumentError(f"names: a name must not be empty, got {result!r}")
    if len(result) != ndim:
        raise ArgumentError(
            f"names: {len(result)} name(s) {result!r} for a {ndim}-D shape; give one per size"
        )
    repeated = sorted({name for name in result if result.count(name) > 1})
    if repeated:
        raise ArgumentError(f"names: {repeated[0]!r} appears twice in {result!r}; names are unique")
    return result
