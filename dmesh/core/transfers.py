"""Transfer planning: the rectangles a *transfer* moves between two layouts (pure).

A transfer (the redistribution step for everything the per-mesh-dim steps of
:mod:`dmesh.core.plan` cannot do) moves, for every target block, the parts
of source blocks that meet it: each target element comes from one holder,
the receiver itself when it holds the element, otherwise holder number
``receiver % holders`` of that block, which spreads a replicated source's
load over its replicas. A ``Partial`` mesh dim's terms stay at their
coordinate along it. The piece a rank keeps (sender == receiver) never
travels: :mod:`dmesh.redistribution` copies it locally and sends the others
in one ``Alltoallv``, which it skips when no piece crosses ranks
(:func:`transfer_crosses`, the same answer on every rank since every rank
computes it from the layouts).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError
from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, shorts

__all__ = ["intersect", "transfer_crosses", "transfer_pieces", "transfer_plan"]

Box = tuple[tuple[int, int], ...]  # (start, stop) per dim, in global coordinates
Piece = tuple[int, int, Box]  # (sender, receiver, box)
Moves = tuple[tuple[int, tuple[slice, ...]], ...]  # (rank, slices) pairs in rank order


@lru_cache(maxsize=1024)
def transfer_pieces(
    src: Layout, dst: Layout, src_ranks: tuple[int, ...], dst_ranks: tuple[int, ...]
) -> tuple[Piece, ...]:
    """Every rectangle of a transfer from ``src`` to ``dst``: ``(sender, receiver, box)``.

    ``src_ranks``/``dst_ranks`` give the communicator rank at each mesh
    coordinate (row-major) of the source and target meshes. The pieces are
    ordered by receiver, then sender; each pair of ranks has one piece at
    most (a rank holds one source block and one target block). A
    ``Partial`` mesh dim of ``src`` must be the same in ``dst`` (one mesh):
    its terms stay at their coordinate along it, so only ranks at the same
    coordinate there hold the same term.
    """
    terms = tuple(m for m, p in enumerate(src.placements) if isinstance(p, Partial))
    if terms and (
        dst.mesh_shape != src.mesh_shape
        or any(dst.placements[m] != src.placements[m] for m in terms)
    ):
        raise ArgumentError(
            f"transfer_plan: from {shorts(src.placements)} to {shorts(dst.placements)}: the "
            f"partial mesh dims {terms} must stay alike (a transfer moves terms, it does not "
            "add them); reduce them first"
        )
    holders: dict[tuple[Any, ...], list[int]] = {}  # (block, term) -> ranks
    for coord, rank in zip(np.ndindex(*src.mesh_shape), src_ranks):
        holders.setdefault(_holding(src, coord, terms), []).append(rank)
    pieces: list[Piece] = []
    for coord, receiver in zip(np.ndindex(*dst.mesh_shape), dst_ranks):
        target, term = _holding(dst, coord, terms)
        row = []
        for (block, block_term), block_holders in holders.items():
            meet = intersect(block, target)
            if meet is not None and block_term == term:
                if receiver in block_holders:
                    sender = receiver
                else:
                    sender = block_holders[receiver % len(block_holders)]
                row.append((sender, receiver, meet))
        pieces.extend(sorted(row, key=lambda piece: piece[0]))
    return tuple(pieces)


@lru_cache(maxsize=1024)
def transfer_crosses(
    src: Layout, dst: Layout, src_ranks: tuple[int, ...], dst_ranks: tuple[int, ...]
) -> bool:
    """Whether any rank sends a piece to another rank (else the transfer is local copies).

    A function of the layouts and rank maps alone, so every rank gets the
    same answer and all either make the ``Alltoallv`` or skip it.
    """
    return any(s != r for s, r, _ in transfer_pieces(src, dst, src_ranks, dst_ranks))


@lru_cache(maxsize=1024)
def transfer_plan(
    src: Layout,
    dst: Layout,
    src_ranks: tuple[int, ...],
    dst_ranks: tuple[int, ...],
    me: int,
) -> tuple[Moves, Moves]:
    """What rank ``me`` sends to and receives from whom in a transfer from ``src`` to ``dst``.

    Returns ``(sends, receives)``: ``(rank, slices)`` pairs in rank order, the
    slices relative to this rank's source block (sends) or target block
    (receives); the piece ``me`` keeps is in both, under rank ``me``. See
    :func:`transfer_pieces` for who sends what.
    """
    pieces = transfer_pieces(src, dst, src_ranks, dst_ranks)
    sends: list[tuple[int, tuple[slice, ...]]] = []
    if me in src_ranks:
        mine = src.block(_coord(src, src_ranks, me))
        sends = [(r, _relative(box, mine)) for s, r, box in pieces if s == me]
    receives: list[tuple[int, tuple[slice, ...]]] = []
    if me in dst_ranks:
        target = dst.block(_coord(dst, dst_ranks, me))
        receives = [(s, _relative(box, target)) for s, r, box in pieces if r == me]
    return tuple(sorted(sends, key=lambda s: s[0])), tuple(receives)


def intersect(a: Box, b: Box) -> Box | None:
    """Where two boxes meet, or None when they share no element."""
    meet = tuple((max(x0, y0), min(x1, y1)) for (x0, x1), (y0, y1) in zip(a, b))
    return None if any(lo >= hi for lo, hi in meet) else meet


def _coord(layout: Layout, ranks: tuple[int, ...], me: int) -> tuple[int, ...]:
    """The mesh coordinate of rank ``me`` (``ranks``: the rank at each coordinate)."""
    return tuple(int(c) for c in list(np.ndindex(*layout.mesh_shape))[ranks.index(me)])


def _holding(layout: Layout, coord: Any, terms: tuple[int, ...]) -> tuple[Any, Any]:
    """The block at ``coord`` and which term of it (its coordinate along the ``terms`` dims)."""
    return layout.block(coord), tuple(int(coord[m]) for m in terms)


def _relative(meet: Box, block: Box) -> tuple[slice, ...]:
    return tuple(slice(lo - b0, hi - b0) for (lo, hi), (b0, _) in zip(meet, block))
