"""What one rank communicates: its collective calls, in order (pure).

A :class:`dmesh.scaling.Call` holds what :class:`dmesh.debug.CommMode` records of one
collective on one rank: the collective's name, the size of the group it ran
over, and the bytes of this rank's input and result buffers (``all_to_all``
counts the whole input, the piece a rank keeps included, except in a
redistribution's transfer, whose input holds only what other ranks need;
``permute`` counts the input only on a rank that sends). A formula returns one :data:`Traffic`
per rank, in the mesh's row-major coordinate order, which is the rank order
of a mesh made by ``dmesh.init_mesh``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dmesh.collectives.blocks import balanced_sizes

__all__ = ["Call", "Traffic", "block_sizes", "per_rank", "total_bytes"]


@dataclass(frozen=True)
class Call:
    """One collective call on one rank: name, group size, input and result bytes."""

    collective: str  # "all_gather", "all_reduce", ... (the names CommMode records)
    group_size: int  # ranks taking part: the mesh dim's size, or the mesh's
    sent_bytes: int  # this rank's input buffers
    received_bytes: int  # this rank's result buffers


Traffic = tuple[Call, ...]  # one rank's calls, in the order it makes them


def block_sizes(length: int, parts: int) -> tuple[int, ...]:
    """The block lengths dmesh gives ``length`` elements over ``parts`` ranks.

    ``numpy.array_split``'s sizes: the first ``length % parts`` blocks hold one
    element more, so they differ by at most one.
    """
    return balanced_sizes(length, parts)


def per_rank(
    mesh_shape: Sequence[int], calls_at: Callable[[tuple[int, ...]], Sequence[Call]]
) -> list[Traffic]:
    """Every rank's traffic, from a function of the rank's mesh coordinate.

    The list is in row-major coordinate order, so entry ``r`` is rank ``r``'s.
    """
    coords = itertools.product(*(range(size) for size in mesh_shape))
    return [tuple(calls_at(coord)) for coord in coords]


def total_bytes(traffic: Traffic) -> tuple[int, int]:
    """One rank's bytes sent and received over all its calls."""
    return (sum(c.sent_bytes for c in traffic), sum(c.received_bytes for c in traffic))
