"""``DArraySpec``: everything needed to know any rank's block without communicating."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dmesh.collectives.errors import ArgumentError
from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Placement, shorts

if TYPE_CHECKING:
    from dmesh.mesh import DeviceMesh

__all__ = ["DArraySpec"]

# (id(mesh), layout, dtype) -> a weak reference to the one live DArraySpec of them (see
# DArraySpec.__new__). A plain dict of weak references, not a WeakValueDictionary:
# its get() is Python code, and a spec is made on every new selection's result.
_interned: dict[tuple[int, Layout, np.dtype], weakref.ref[DArraySpec]] = {}


def _forget(key: tuple[int, Layout, np.dtype]) -> Any:
    """The callback that drops ``key``'s entry when its spec dies (if it is still that one)."""

    def forget(ref: weakref.ref[DArraySpec]) -> None:
        if _interned.get(key) is ref:
            del _interned[key]

    return forget


@dataclass(frozen=True, eq=False, init=False)
class DArraySpec:
    """Mesh, layout (placements, global shape, block boundaries) and dtype of a DArray.

    Immutable and hashable; two specs are equal when they have the same mesh
    (the same object), layout and dtype, and then they are the same object:
    while a spec lives, making one of the same mesh, layout and dtype gives
    it back (``__new__``). So equality and hashing are identity's, done
    in C: specs key the dispatch, plan and redistribution caches, and a
    Python ``__hash__``/``__eq__`` cost a tenth to half a microsecond on every
    lookup.
    """

    mesh: DeviceMesh
    layout: Layout
    dtype: np.dtype

    def __new__(cls, mesh: DeviceMesh, layout: Layout, dtype: np.dtype) -> DArraySpec:
        key = (id(mesh), layout, dtype if isinstance(dtype, np.dtype) else np.dtype(dtype))
        ref = _interned.get(key)
        if ref is not None:
            spec = ref()
            if spec is not None and spec.mesh is mesh:
                return spec  # (__init__ sees it is made and returns)
        spec = super().__new__(cls)
        # Weak: the entry goes with the last holder of the spec.
        _interned[key] = weakref.ref(spec, _forget(key))
        return spec

    def __init__(self, mesh: DeviceMesh, layout: Layout, dtype: np.dtype) -> None:
        if "layout" in self.__dict__:  # the live spec of these, given back by __new__
            return
        object.__setattr__(self, "mesh", mesh)
        object.__setattr__(self, "layout", layout)
        # np.float64 and the like: one spec per dtype
        object.__setattr__(self, "dtype", dtype if isinstance(dtype, np.dtype) else np.dtype(dtype))
        self._check()

    def _check(self) -> None:
        """A Partial that the dtype cannot hold raises (a new spec's fields, once)."""
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

    # Immutable, and one object per value: copies are the spec itself.
    def __copy__(self) -> DArraySpec:
        return self

    def __deepcopy__(self, memo: Any) -> DArraySpec:
        return self

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
        """The same layout with another dtype (kept with this spec: ``a.astype(f32)`` in a
        loop makes its result spec once, not on every call)."""
        retyped: dict[Any, DArraySpec] | None = self.__dict__.get("_retyped")
        if retyped is None:
            retyped = {}
            object.__setattr__(self, "_retyped", retyped)
        spec = retyped.get(dtype)
        if spec is None:
            spec = retyped[dtype] = DArraySpec(self.mesh, self.layout, np.dtype(dtype))
        return spec

    def __repr__(self) -> str:
        """``f64[8,6] (S(0), R) on mesh x=2,y=2``."""
        dims = ",".join(str(n) for n in self.shape)
        kind = {"b": "bool", "i": "i", "u": "u", "f": "f", "c": "c"}.get(self.dtype.kind, "")
        name = kind if kind == "bool" else f"{kind}{self.dtype.itemsize * 8}"
        balance = "" if self.layout.is_balanced else " uneven"
        return f"{name}[{dims}] {shorts(self.placements)}{balance} on {self.mesh.abstract!r}"
