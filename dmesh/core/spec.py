"""``DArraySpec``: everything needed to know any rank's block without communicating."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dmesh.collectives.errors import ArgumentError
from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Placement, shorts

if TYPE_CHECKING:
    from dmesh.mesh import DeviceMesh

__all__ = ["DArraySpec"]

# (id(mesh), layout, dtype) -> the one DArraySpec of them (see DArraySpec.__new__).
_interned: dict[tuple[int, Layout, np.dtype], DArraySpec] = {}
_INTERNED_LIMIT = 4096


@dataclass(frozen=True, eq=False)
class DArraySpec:
    """Mesh, layout (placements, global shape, block boundaries) and dtype of a DArray.

    Immutable and hashable; two specs are equal when they have the same mesh
    (the same object), layout and dtype. The hash is computed once: specs key
    the caches of redistribution plans and, later, of sharding decisions.
    """

    mesh: DeviceMesh
    layout: Layout
    dtype: np.dtype
    _hash: int = field(init=False, repr=False, compare=False)

    def __new__(cls, mesh: DeviceMesh, layout: Layout, dtype: np.dtype) -> DArraySpec:
        # Equal specs are one object: specs key the dispatch and plan caches,
        # and two equal specs that are distinct objects make every lookup
        # compare them field by field (__eq__, in Python: about 0.5 us), as a
        # loop that makes its arrays afresh (np.zeros_like, distribute) would.
        key = (id(mesh), layout, np.dtype(dtype))
        spec = _interned.get(key)
        if spec is not None and spec.mesh is mesh:
            return spec  # (__init__ runs again: the same fields, the same hash)
        spec = super().__new__(cls)
        if len(_interned) >= _INTERNED_LIMIT:  # bounded: specs hold meshes
            _interned.clear()
        _interned[key] = spec
        return spec

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, np.dtype):  # np.float64 and the like: one spec per dtype
            object.__setattr__(self, "dtype", np.dtype(self.dtype))
        for p in self.layout.placements:
            if isinstance(p, Partial) and p.op in ("min", "max") and self.dtype.kind == "c":
                raise ArgumentError(
                    f"{p!r} with dtype {self.dtype}: complex numbers are not ordered, so a "
                    "partial min/max has no value; use Partial('sum') or real data"
                )
            if isinstance(p, Partial) and p.op == "avg" and self.dtype.kind in "biu":
                raise ArgumentError(
                    f"{p!r} with dtype {self.dtype}: the average of integer terms is in general "
                    "no integer (and beyond 2**53 not even exact in float64), so an integer "
                    "DArray cannot hold one; use Partial('sum') or a float dtype"
                )
        object.__setattr__(self, "_hash", hash((id(self.mesh), self.layout, self.dtype)))

    def __hash__(self) -> int:
        return self._hash

    # Immutable, and one object per value: copies are the spec itself.
    def __copy__(self) -> DArraySpec:
        return self

    def __deepcopy__(self, memo: Any) -> DArraySpec:
        return self

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DArraySpec)
            and self._hash == other._hash
            and self.mesh is other.mesh
            and self.layout == other.layout
            and self.dtype == other.dtype
        )

    @property
    def placements(self) -> tuple[Placement, ...]:
        """One placement per mesh dimension."""
        return self.layout.placements

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the global array."""
        return self.layout.shape

    @property
    def ndim(self) -> int:
        """Number of dimensions of the global array."""
        return len(self.layout.shape)

    def local_shape(self, coord: tuple[int, ...] | None = None) -> tuple[int, ...]:
        """Block shape at ``coord`` (default: this rank's; empty on a non-member)."""
        coord = self.mesh.coordinate if coord is None else coord
        if coord is None:
            return (0,) * self.ndim
        return self.layout.local_shape(coord)

    def offsets(self, coord: tuple[int, ...] | None = None) -> tuple[int, ...]:
        """Global index of the first element of the block at ``coord`` (default: this rank's)."""
        coord = self.mesh.coordinate if coord is None else coord
        if coord is None:
            return (0,) * self.ndim
        return self.layout.offsets(coord)

    def with_layout(self, layout: Layout) -> DArraySpec:
        """The same array on the same mesh in another layout."""
        return DArraySpec(self.mesh, layout, self.dtype)

    def with_dtype(self, dtype: np.dtype) -> DArraySpec:
        """The same layout with another dtype."""
        return DArraySpec(self.mesh, self.layout, np.dtype(dtype))

    def __repr__(self) -> str:
        """``f64[8,6] (S(0), R) on mesh x=2,y=2``."""
        dims = ",".join(str(n) for n in self.shape)
        kind = {"b": "bool", "i": "i", "u": "u", "f": "f", "c": "c"}.get(self.dtype.kind, "")
        name = kind if kind == "bool" else f"{kind}{self.dtype.itemsize * 8}"
        balance = "" if self.layout.is_balanced else " uneven"
        return f"{name}[{dims}] {shorts(self.placements)}{balance} on {self.mesh.abstract!r}"
