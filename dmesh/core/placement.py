"""Placements: how an array is laid out along one mesh dimension.

Immutable, hashable values that never communicate (moving data is the
redistribution's job). ``repr`` round-trips (``Shard(0)``); ``short()`` gives
the compact form used in spec and error messages (``S(0)``, ``R``, ``P(sum)``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, suggest
from dmesh.collectives.reduce_ops import REDUCE_OPS

__all__ = ["PARTIAL_OPS", "Partial", "Placement", "Replicate", "Shard", "normalize_placements"]

# A partial value is reduced with one of these (the arithmetic reduce ops).
PARTIAL_OPS: tuple[str, ...] = ("sum", "prod", "min", "max", "avg")


class Placement:
    """Base of :class:`Shard`, :class:`Replicate` and :class:`Partial`."""

    __slots__ = ()

    def is_shard(self, dim: int | None = None) -> bool:
        """True for ``Shard`` (of tensor dim ``dim``, when given)."""
        return False

    def is_replicate(self) -> bool:
        """True for ``Replicate()``."""
        return False

    def is_partial(self) -> bool:
        """True for ``Partial(op)``."""
        return False

    def short(self) -> str:
        """Compact form: ``S(0)``, ``R``, ``P(sum)``."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True, repr=False)
class Shard(Placement):
    """Tensor dim ``dim`` is split into contiguous blocks along this mesh dimension.

    Blocks follow mesh-coordinate order; by default they are balanced like
    ``numpy.array_split`` (the first ``n % k`` get one more), and they may be
    uneven or empty. A negative ``dim`` counts from the end and is normalized
    once the array's ``ndim`` is known.
    """

    dim: int

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "dim", operator.index(self.dim))
        except TypeError as exc:
            raise ArgumentTypeError(
                f"Shard(dim): dim must be an int, got {type(self.dim).__name__}: {self.dim!r}"
            ) from exc

    def __repr__(self) -> str:
        return f"Shard({self.dim})"

    def is_shard(self, dim: int | None = None) -> bool:
        return dim is None or self.dim == dim

    def short(self) -> str:
        return f"S({self.dim})"


@dataclass(frozen=True, slots=True)
class Replicate(Placement):
    """Every rank along this mesh dimension holds the same block."""

    def is_replicate(self) -> bool:
        return True

    def short(self) -> str:
        return "R"


@dataclass(frozen=True, slots=True, repr=False)
class Partial(Placement):
    """Every rank along this mesh dimension holds a partial value; the array is their reduction.

    ``op`` is one of ``"sum"``, ``"prod"``, ``"min"``, ``"max"``, ``"avg"``. The
    reduction is deferred until a consumer needs the value.
    """

    op: str = "sum"

    def __post_init__(self) -> None:
        if not isinstance(self.op, str):
            raise ArgumentTypeError(
                f"Partial(op): op must be a str, one of {', '.join(PARTIAL_OPS)}; "
                f"got {type(self.op).__name__}: {self.op!r}"
            )
        if self.op not in PARTIAL_OPS:
            hint = suggest(self.op, PARTIAL_OPS)
            extra = (
                " (bitwise and logical ops do not make partial values)"
                if (self.op in REDUCE_OPS)
                else ""
            )
            raise ArgumentError(
                f"Partial(op={self.op!r}): unknown op{hint}{extra}; "
                f"allowed: {', '.join(PARTIAL_OPS)}"
            )

    def __repr__(self) -> str:
        return f"Partial({self.op!r})"

    def is_partial(self) -> bool:
        return True

    def short(self) -> str:
        return f"P({self.op})"


def normalize_placements(placements: Any, mesh_ndim: int, array_ndim: int) -> tuple[Placement, ...]:
    """Check ``placements`` for a mesh and an array; return them with shard dims made non-negative.

    Raises ``ArgumentTypeError`` for something that is not a sequence of
    placements and ``ArgumentError`` for a wrong count or a dim out of range.
    """
    if isinstance(placements, Placement):
        placements = (placements,)
    if not isinstance(placements, Sequence) or isinstance(placements, str):
        raise ArgumentTypeError(
            f"placements: expected a list or tuple of Shard/Replicate/Partial, one per mesh "
            f"dimension, got {type(placements).__name__}: {placements!r}"
        )
    if len(placements) != mesh_ndim:
        raise ArgumentError(
            f"placements: {len(placements)} given ({_shorts(placements)}) for a {mesh_ndim}-D "
            f"mesh; give one placement per mesh dimension (Replicate() where the array is "
            "not split)"
        )
    out: list[Placement] = []
    for i, p in enumerate(placements):
        if not isinstance(p, Placement):
            raise ArgumentTypeError(
                f"placements[{i}]: expected Shard(d), Replicate() or Partial(op), "
                f"got {type(p).__name__}: {p!r}"
            )
        if isinstance(p, Shard):
            if not -array_ndim <= p.dim < array_ndim:
                raise ArgumentError(
                    f"placements[{i}] = Shard({p.dim}): dim out of range for a {array_ndim}-D "
                    f"array; allowed: {-array_ndim} to {array_ndim - 1}"
                    + (" (a 0-d array cannot be sharded)" if array_ndim == 0 else "")
                )
            if p.dim < 0:
                p = Shard(p.dim + array_ndim)
        out.append(p)
    return tuple(out)


def _shorts(placements: Any) -> str:
    return ", ".join(p.short() if isinstance(p, Placement) else repr(p) for p in placements)


def shorts(placements: Sequence[Placement]) -> str:
    """``(S(0), R)``: the compact form of a placement tuple."""
    return (
        "(" + ", ".join(p.short() for p in placements) + ("," if len(placements) == 1 else "") + ")"
    )
