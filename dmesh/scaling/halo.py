"""Traffic of ``dmesh.halo`` and ``dmesh.map_overlap`` (pure).

A halo exchange pads every rank's block by ``(before, after)`` cells per dim.
Along each tensor dim ``d`` that a mesh dim shards (in dim order, skipping
dims of width ``(0, 0)``) it makes two ``permute`` calls over the ranks that
shard ``d`` (in block order): the last ``before`` cells go to the next block,
then the first ``after`` cells to the previous one. Dims before ``d`` travel
with their padding (so the corners arrive with no extra message), dims after
``d`` without it. At a non-periodic global edge the rank sends or receives
nothing in that direction, but still takes part in the call; a periodic dim
closes the ring (over one block it is a self-send). ``map_overlap`` adds one
``all_reduce`` of a 1-byte verdict over the whole mesh (``trim=True``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Placement
from dmesh.scaling.traffic import Call, Traffic, per_rank

__all__ = ["halo_exchange", "halo_widths", "map_overlap"]

Width = int | tuple[int, int]


def halo_widths(width: int | Sequence[Width], ndim: int) -> tuple[tuple[int, int], ...]:
    """``width`` as one ``(before, after)`` pair per dim (an int, or one int or pair per dim)."""
    if isinstance(width, int):
        return ((width, width),) * ndim
    items = list(width)
    if len(items) != ndim:
        raise ValueError(f"halo_widths: {len(items)} entries for a {ndim}-d array")
    return tuple((w, w) if isinstance(w, int) else (int(w[0]), int(w[1])) for w in items)


def _periodic_flags(periodic: bool | Sequence[bool], ndim: int) -> tuple[bool, ...]:
    if isinstance(periodic, bool):
        return (periodic,) * ndim
    return tuple(bool(p) for p in periodic)


def _check_blocks(sizes: tuple[int, ...], width: tuple[int, int], periodic: bool, d: int) -> None:
    """Raise as dmesh does (before any message) where a block cannot supply its cells."""
    k = len(sizes)
    before, after = width
    for i, size in enumerate(sizes):
        need = max(before if i < k - 1 or periodic else 0, after if i > 0 or periodic else 0)
        if size < need:
            raise ValueError(
                f"halo: dim {d} is cut into blocks of {sizes}; block {i} holds {size} cells "
                f"but must supply {need}: dmesh raises ArgumentError, with no message"
            )


def halo_exchange(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    placements: Sequence[Placement],
    width: int | Sequence[Width],
    periodic: bool | Sequence[bool] = False,
) -> list[Traffic]:
    """Every rank's calls in ``dmesh.halo(a, width, periodic)`` (``async_op`` makes the same).

    ``a`` has ``shape``, ``itemsize`` bytes per element and ``placements``
    (Shard/Replicate) with balanced blocks. Per sharded dim ``d`` of
    ``k_d`` blocks (``k_d`` the product of the mesh dims sharding it), two
    ``permute`` calls over those ``k_d`` ranks, each moving one slab of
    ``w * S_d`` elements, ``S_d = prod_{e<d} (b_e + n_e + a_e) * prod_{e>d} b_e``
    (``b_e`` the rank's block length, ``n_e, a_e`` the widths of dim ``e``).
    Even blocks of an ``(n0, n1)`` array, width ``w``: on ``(S(0),)`` over ``p``
    ranks, an interior rank sends and receives ``2 w n1 s`` bytes in 2 calls,
    time ``2 (alpha + w n1 s beta)``; on ``(S(0), S(1))`` over ``(p0, p1)``,
    4 calls, ``2 w s (n1/p1 + n0/p0 + 2 w)`` bytes each way (the corners
    included). Edge ranks of a non-periodic dim send and receive half that
    along it. Raises ``ValueError`` where dmesh raises (a block thinner than
    the cells it must give).
    """
    mesh_shape = tuple(mesh_shape)
    layout = Layout.balanced(mesh_shape, tuple(placements), tuple(shape))
    widths = halo_widths(width, len(shape))
    flags = _periodic_flags(periodic, len(shape))
    sharded = []
    for d in range(len(shape)):
        mesh_dims = sharding_mesh_dims(layout.placements, d)
        if not mesh_dims:
            continue
        _check_blocks(layout.sizes(d), widths[d], flags[d], d)
        if widths[d] != (0, 0):
            sharded.append((d, math.prod(mesh_shape[m] for m in mesh_dims)))

    def calls_at(coord: tuple[int, ...]) -> list[Call]:
        block = layout.local_shape(coord)
        calls = []
        for d, k in sharded:
            slab = math.prod(
                (n + sum(widths[e]) if e < d else n) for e, n in enumerate(block) if e != d
            )
            i = layout.block_number(coord, d)
            has_next, has_previous = i < k - 1 or flags[d], i > 0 or flags[d]
            before, after = (w * slab * itemsize for w in widths[d])
            calls.append(Call("permute", k, before * has_next, before * has_previous))
            calls.append(Call("permute", k, after * has_previous, after * has_next))
        return calls

    return per_rank(mesh_shape, calls_at)


def map_overlap(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    placements: Sequence[Placement],
    depth: int | Sequence[Width],
    periodic: bool = False,
    trim: bool = True,
) -> list[Traffic]:
    """Every rank's calls in ``dmesh.map_overlap(fn, a, depth, boundary)``.

    The halo exchange of :func:`halo_exchange` (``boundary="periodic"`` is
    ``periodic=True``; ``"constant"``, a number, ``"edge"`` move the same),
    then, with ``trim=True``, one ``all_reduce`` of a 1-byte verdict (does
    ``fn`` keep the padded shape on every rank) over the whole mesh: time
    ``L alpha`` more, ``L = ceil(log2 p)``.
    """
    size = math.prod(mesh_shape)
    exchange = halo_exchange(mesh_shape, shape, itemsize, placements, depth, periodic)
    verdict = (Call("all_reduce", size, 1, 1),) if trim else ()
    return [calls + verdict for calls in exchange]
