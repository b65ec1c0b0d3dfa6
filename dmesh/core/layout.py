"""Block layouts: which part of the global array each mesh coordinate holds.

Pure arithmetic on the mesh shape, the placements, the global shape and the
block boundaries; no communication, so any rank can compute any other rank's
block (and redistribution plans are pure functions of two layouts).

For a tensor dim ``d`` sharded by the mesh dims ``M_d = (m1, m2, ...)`` (in
mesh-dim order), the dim is cut into ``k = size(m1) * size(m2) * ...`` blocks;
a coordinate's block is number ``ravel_multi_index((c[m1], c[m2], ...))``:
the dim is split over ``m1``, then each block over ``m2``, and so on. The cut is
stored as ``k + 1`` boundaries. The default (balanced) cut splits like
``numpy.array_split`` at each level; slicing, masks and ``from_local`` give
other cuts, which are first-class.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from dmesh.collectives.blocks import balanced_sizes
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.core.placement import Placement, Shard

__all__ = ["Bounds", "Layout", "balanced_bounds"]

Bounds = tuple[int, ...]  # k + 1 non-decreasing offsets from 0 to the dim's length


@lru_cache(maxsize=4096)
def balanced_bounds(length: int, levels: tuple[int, ...]) -> Bounds:
    """Boundaries of ``length`` split over ``levels[0]``, each piece over ``levels[1]``, ..."""
    pieces = [length]
    for parts in levels:
        pieces = [size for piece in pieces for size in balanced_sizes(piece, parts)]
    bounds = [0]
    for size in pieces:
        bounds.append(bounds[-1] + size)
    return tuple(bounds)


@dataclass(frozen=True)
class Layout:
    """The blocks of an array of ``shape`` with ``placements`` on a mesh of ``mesh_shape``.

    ``bounds[d]`` holds the boundaries of tensor dim ``d`` (None where no mesh
    dim shards it). Build one with :meth:`balanced` or :meth:`with_bounds`.
    """

    mesh_shape: tuple[int, ...]
    placements: tuple[Placement, ...]
    shape: tuple[int, ...]
    bounds: tuple[Bounds | None, ...]
    # Layouts key the plan and propagation caches: hash the tuples once.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields = (self.mesh_shape, self.placements, self.shape, self.bounds)
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash

    @staticmethod
    def balanced(
        mesh_shape: tuple[int, ...], placements: tuple[Placement, ...], shape: tuple[int, ...]
    ) -> Layout:
        """The default layout: every sharded dim cut like ``numpy.array_split``, level by level."""
        return _balanced(mesh_shape, placements, shape)

    @staticmethod
    def with_bounds(
        mesh_shape: tuple[int, ...],
        placements: tuple[Placement, ...],
        shape: tuple[int, ...],
        bounds: Sequence[Sequence[int] | None],
    ) -> Layout:
        """A layout with explicit boundaries (validated: count, order, ends)."""
        if len(bounds) != len(shape):
            raise ArgumentError(
                f"bounds: {len(bounds)} entries for a {len(shape)}-D array; give one per dim"
            )
        checked: list[Bounds | None] = []
        for d, cut in enumerate(bounds):
            mesh_dims = sharding_mesh_dims(placements, d)
            if not mesh_dims:
                if cut is not None:
                    raise ArgumentError(f"bounds[{d}]: dim {d} is not sharded; give None")
                checked.append(None)
                continue
            blocks = math.prod(mesh_shape[m] for m in mesh_dims)
            try:
                values = tuple(int(b) for b in cut)  # type: ignore[union-attr]
            except TypeError as exc:
                raise ArgumentTypeError(f"bounds[{d}]: expected ints, got {cut!r}") from exc
            if (
                len(values) != blocks + 1
                or values[0] != 0
                or values[-1] != shape[d]
                or any(a > b for a, b in itertools.pairwise(values))
            ):
                raise ArgumentError(
                    f"bounds[{d}]: expected {blocks + 1} non-decreasing offsets from 0 to "
                    f"{shape[d]} (dim {d} is cut into {blocks} blocks), got {list(values)}"
                )
            checked.append(values)
        return Layout(mesh_shape, placements, shape, tuple(checked))

    # -- per coordinate ---------------------------------------------------------
    def block_number(self, coord: Sequence[int], dim: int) -> int:
        """Which of ``dim``'s blocks the mesh coordinate ``coord`` holds."""
        number = 0
        for m in sharding_mesh_dims(self.placements, dim):
            number = number * self.mesh_shape[m] + coord[m]
        return number

    def block(self, coord: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """``(start, stop)`` per dim of the block held at ``coord``."""
        out = []
        for d, n in enumerate(self.shape):
            cut = self.bounds[d]
            if cut is None:
                out.append((0, n))
            else:
                b = self.block_number(coord, d)
                out.append((cut[b], cut[b + 1]))
        return tuple(out)

    def local_shape(self, coord: Sequence[int]) -> tuple[int, ...]:
        """Shape of the block held at ``coord``."""
        return tuple(stop - start for start, stop in self.block(coord))

    def offsets(self, coord: Sequence[int]) -> tuple[int, ...]:
        """Global index of the first element of the block held at ``coord``."""
        return tuple(start for start, _ in self.block(coord))

    def slices(self, coord: Sequence[int]) -> tuple[slice, ...]:
        """Slices of the global array that make the block held at ``coord``."""
        return tuple(slice(start, stop) for start, stop in self.block(coord))

    # -- whole layout -------------------------------------------------------------
    @property
    def is_balanced(self) -> bool:
        """Whether every sharded dim has the default (balanced) cut."""
        return self == _balanced(self.mesh_shape, self.placements, self.shape)

    def sizes(self, dim: int) -> tuple[int, ...]:
        """Block lengths along ``dim`` in block order (``(n,)`` if not sharded)."""
        cut = self.bounds[dim]
        if cut is None:
            return (self.shape[dim],)
        return tuple(b - a for a, b in itertools.pairwise(cut))


def sharding_mesh_dims(placements: tuple[Placement, ...], dim: int) -> tuple[int, ...]:
    """The mesh dims that shard tensor dim ``dim``, in mesh-dim order."""
    return tuple(m for m, p in enumerate(placements) if isinstance(p, Shard) and p.dim == dim)


@lru_cache(maxsize=4096)
def _balanced(
    mesh_shape: tuple[int, ...], placements: tuple[Placement, ...], shape: tuple[int, ...]
) -> Layout:
    bounds: list[Bounds | None] = []
    for d, n in enumerate(shape):
        mesh_dims = sharding_mesh_dims(placements, d)
        levels = tuple(mesh_shape[m] for m in mesh_dims)
        bounds.append(balanced_bounds(n, levels) if mesh_dims else None)
    return Layout(mesh_shape, placements, shape, tuple(bounds))
