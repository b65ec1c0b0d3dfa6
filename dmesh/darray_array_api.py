"""The Array API standard's array attributes on DArrays: the device is the placement.

A DArray's ``device`` is a :class:`Sharding`, its mesh and placements: where
its data lives. ``to_device`` redistributes to another placement on the same
mesh, and ``__array_namespace__`` returns :mod:`dmesh.array_api`. DLPack
(``__dlpack__``, ``__dlpack_device__``) exports this rank's block only: a
DArray is many arrays, one per rank, and DLPack describes one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dmesh import _hooks
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.core.placement import Placement

if TYPE_CHECKING:
    from dmesh.darray import DArray
    from dmesh.mesh import DeviceMesh

__all__ = ["API_VERSIONS", "ArrayAPIObject", "Sharding"]

# The revisions of the standard whose namespace dmesh.array_api serves (its own: the last).
API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")


@dataclass(frozen=True)
class Sharding:
    """An Array API *device* for DArrays: a mesh and one placement per mesh dim.

    ``x.device`` is the Sharding of ``x``; creation functions of
    :mod:`dmesh.array_api` take one as ``device=`` and ``x.to_device(s)``
    redistributes ``x`` to it. Two Shardings are equal when their meshes are
    the same object and their placements are equal.
    """

    mesh: DeviceMesh
    placements: tuple[Placement, ...]

    def __post_init__(self) -> None:
        placements = tuple(self.placements)
        if not all(isinstance(p, Placement) for p in placements):
            raise ArgumentTypeError(
                "Sharding: placements must be Shard, Replicate or Partial values, "
                f"got {placements!r}"
            )
        if len(placements) != self.mesh.ndim:
            raise ArgumentError(
                f"Sharding: {len(placements)} placements for a {self.mesh.ndim}-D mesh; "
                "give one per mesh dim"
            )
        object.__setattr__(self, "placements", placements)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Sharding)
            and other.mesh is self.mesh
            and other.placements == self.placements
        )

    def __hash__(self) -> int:
        return hash((id(self.mesh), self.placements))

    def __repr__(self) -> str:
        return f"Sharding(mesh of shape {tuple(self.mesh.shape)}, {list(self.placements)})"


class ArrayAPIObject:
    """The Array API attributes of :class:`~dmesh.DArray` (a mixin)."""

    __slots__ = ()

    @property
    def device(self: DArray) -> Sharding:  # type: ignore[misc]
        """Where the data lives: this array's mesh and placements, as a :class:`Sharding`."""
        return Sharding(self.mesh, self.placements)

    def to_device(self: DArray, device: Sharding, /, *, stream: Any = None) -> DArray:  # type: ignore[misc]
        """This array redistributed to ``device``'s placements (collective; same mesh only)."""
        if stream is not None:
            raise ArgumentError("to_device: DArrays take no stream; pass stream=None")
        if not isinstance(device, Sharding):
            raise ArgumentTypeError(
                f"to_device: expected a dmesh.array_api.Sharding(mesh, placements), "
                f"got {type(device).__name__}"
            )
        if device.mesh is not self.mesh:
            raise UnsupportedError(
                "to_device: the Sharding's mesh is not this array's mesh; moving between "
                "meshes is not supported (redistribute on one mesh, then dmesh.from_local)"
            )
        return self.redistribute(device.mesh, list(device.placements))

    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        """:mod:`dmesh.array_api`, the namespace of the Array API standard for DArrays."""
        if api_version is not None and api_version not in API_VERSIONS:
            raise ValueError(
                f"dmesh.array_api serves the Array API revisions {', '.join(API_VERSIONS)}, "
                f"not {api_version!r}"
            )
        return _hooks.array_namespace

    def __dlpack__(  # type: ignore[misc]
        self: DArray,
        /,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[Any, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """DLPack capsule of **this rank's block** (not the global array; no communication).

        The keywords are the standard's and go to the block's own ``__dlpack__``
        (given only when set, so a NumPy older than the keyword still works).
        """
        given = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
        return self.local.__dlpack__(**{k: v for k, v in given.items() if v is not None})

    def __dlpack_device__(self: DArray) -> Any:  # type: ignore[misc]
        """DLPack device of this rank's block."""
        return self.local.__dlpack_device__()
