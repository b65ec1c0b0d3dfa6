"""Redistribution: what each rank sends to move an array between layouts (pure).

``a.redistribute(mesh, placements)``, ``a.rebalance()`` and
``a.with_layout(layout)`` run the steps of
``dmesh.core.plan.plan_redistribution`` (its docstring holds the transition
table). Per step over a mesh dim ``m`` of ``k`` ranks, with ``B`` the bytes of
the rank's block before the step (``N/P`` for an array of ``N`` bytes cut into
``P`` even blocks), the calls ``CommMode`` records are:

================  ==================  ==========  =============  ====================
transition        collective (group)  sent        received       time
================  ==================  ==========  =============  ====================
``S(i) -> R``     ``all_gather`` (k)  ``B``       ``k B``        ``L a + (k-1) B b``
``R -> S(i)``     none (a slice)      0           0              0
``S(i) -> S(j)``  ``all_to_all`` (k)  ``B``       ``B``          ``(k-1)(a + B/k b)``
``P -> R``        ``all_reduce`` (k)  ``B``       ``B``          ``2 L a + 2(k-1)/k B b``
``P -> S(i)``     ``reduce_scatter``  ``B``       ``B/k``        ``L a + (k-1)/k B b``
``R -> P``        none                0           0              0
``P(x) -> P(y)``  ``all_reduce`` (k)  ``B``       ``B``          as ``P -> R``
================  ==================  ==========  =============  ====================

(``a``, ``b``: the network's latency and inverse bandwidth; ``L = ceil(log2 k)``;
the ``all_reduce`` time is Rabenseifner's, for long vectors; short ones take
``L (a + B b)``.) A mesh dim of size 1 changes placement without a call.
Several mesh dims change one step each, slices first and gathers last, so each
step's ``B`` is the block as the steps before left it. Everything else is one
*transfer*: each target element comes from one holder (the receiver itself if
it holds it, else holder ``receiver % holders``); the piece a rank keeps is
copied locally, and the pieces that cross ranks travel in one ``all_to_all``
over the whole mesh (``p`` ranks; every rank takes part, with nothing to send
or receive if so), in which a rank's input is the pieces of its block that
other ranks' target blocks need from it and its result the rest of its target
block. When no piece crosses ranks (a replicated source; another mesh whose
coordinates are the same ranks and blocks) there is no call. Between balanced
layouts on one mesh a rank receives ``N/P_dst`` less what it keeps; a transfer
of a sharded array to a replicated target receives ``N`` less its own block.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Placement
from dmesh.core.plan import plan_redistribution
from dmesh.scaling.traffic import Call, Traffic, per_rank

__all__ = ["layout_traffic", "redistribute", "transfer"]

Box = tuple[tuple[int, int], ...]
BoundsArg = Sequence[Sequence[int] | None] | None


def redistribute(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    src_placements: Sequence[Placement],
    dst_placements: Sequence[Placement],
    src_bounds: BoundsArg = None,
    dst_bounds: BoundsArg = None,
    dst_mesh_shape: Sequence[int] | None = None,
    dst_ranks: Sequence[int] | None = None,
) -> list[Traffic]:
    """Every rank's calls in moving an array of ``shape`` between two placements.

    ``a.redistribute(mesh, dst_placements)`` of an array of ``itemsize``-byte
    elements placed ``src_placements`` on a mesh of ``mesh_shape``, with the
    source cut at ``src_bounds`` (one boundary tuple or None per tensor dim, as
    ``Layout.with_bounds`` takes them; None: balanced, as ``distribute`` cuts)
    and the target at ``dst_bounds`` (None: balanced, as ``redistribute`` and
    ``rebalance`` cut; other bounds: ``with_layout``). ``dst_mesh_shape``
    given: the target is another mesh over the same ranks
    (``same_mesh=False``; ``dst_ranks``: the source mesh's rank at each of its
    coordinates, row-major, by default the same order).

    Even blocks, one mesh dim of ``k`` ranks, ``B`` the block's bytes before
    the step: ``S(i)->R`` one ``all_gather`` (``B`` in, ``k B`` out);
    ``S(i)->S(j)`` one ``all_to_all`` (``B`` in and out); ``P->R`` and
    ``P(x)->P(y)`` one ``all_reduce`` (``B`` in and out); ``P->S(i)`` one
    ``reduce_scatter`` (``B`` in, ``B/k`` out); ``R->S(i)``, ``R->P`` and
    size-1 mesh dims nothing. On a ``(p0, p1)`` mesh: ``(S0, S1)->(R, R)`` is
    an ``all_gather`` over ``p0`` (``N/p`` in, ``N/p1`` out) and one over
    ``p1`` (``N/p1`` in, ``N`` out); ``(P, S0)->(R, R)`` an ``all_reduce`` of
    ``N/p1`` over ``p0``, then an ``all_gather`` over ``p1``;
    ``(S0, R)->(R, S0)`` and ``(S0, S0)->R`` transfers over ``p`` ranks (see
    :func:`transfer`).
    """
    src = _layout(tuple(mesh_shape), src_placements, shape, src_bounds)
    same_mesh = dst_mesh_shape is None
    dst_mesh = tuple(mesh_shape) if dst_mesh_shape is None else tuple(dst_mesh_shape)
    dst = _layout(dst_mesh, dst_placements, shape, dst_bounds)
    return layout_traffic(src, dst, itemsize, same_mesh, dst_ranks)


def layout_traffic(
    src: Layout,
    dst: Layout,
    itemsize: int,
    same_mesh: bool = True,
    dst_ranks: Sequence[int] | None = None,
) -> list[Traffic]:
    """Every rank's calls in moving an array from ``src`` to ``dst`` (``DArray._moved``).

    The steps of ``plan_redistribution(src, dst, same_mesh)``, each priced
    as in the module's table from the rank's block as the earlier steps left
    it; a ``transfer`` step as :func:`transfer`. Nothing moves when
    ``same_mesh`` and the layouts are equal. ``dst_ranks`` as in
    :func:`redistribute`.
    """
    if same_mesh and src == dst:
        return per_rank(src.mesh_shape, lambda coord: ())
    steps = plan_redistribution(src, dst, same_mesh)
    p = math.prod(src.mesh_shape)
    ranks = tuple(range(p)) if dst_ranks is None else tuple(int(r) for r in dst_ranks)
    moves = {
        n: transfer(step[1], step[2], itemsize, ranks)
        for n, step in enumerate(steps)
        if step[0] == "transfer"
    }

    def calls_at(coord: tuple[int, ...]) -> list[Call]:
        me = int(np.ravel_multi_index(coord, src.mesh_shape))
        block = list(src.local_shape(coord))
        calls = []
        for n, step in enumerate(steps):
            kind = step[0]
            if kind in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"):
                k = src.mesh_shape[step[1]]
                before = math.prod(block) * itemsize
                _reshape(block, step, coord)
                calls.append(Call(kind, k, before, math.prod(block) * itemsize))
            elif kind in ("slice", "crop"):
                block = list(step[-1].local_shape(coord))  # the target's piece, kept locally
            elif kind == "transfer":
                calls.extend(moves[n][me])
                block = list(step[2].local_shape(_coord_of(step[2], ranks, me)))
        return calls

    return per_rank(src.mesh_shape, calls_at)


def _reshape(block: list[int], step: tuple[Any, ...], coord: tuple[int, ...]) -> None:
    """The rank's block after a collective step over one mesh dim (in place)."""
    kind, m = step[0], step[1]
    if kind == "reduce_scatter":  # dim d is cut over mesh dim m alone in the target
        d, sizes = step[3], step[4]
        block[d] = sizes[coord[m]]
    elif kind == "all_gather":  # the whole dim d
        d, sizes = step[2], step[3]
        block[d] = sum(sizes)
    elif kind == "all_to_all":  # dim j cut over m alone, dim i whole
        i, j, split_sizes, concat_sizes = step[2:6]
        block[j] = split_sizes[coord[m]]
        block[i] = sum(concat_sizes)


def transfer(
    src: Layout, dst: Layout, itemsize: int, dst_ranks: Sequence[int] | None = None
) -> list[Traffic]:
    """Every rank's calls in a transfer ``src -> dst``: an ``all_to_all`` over ``p`` ranks, or none.

    Each target element comes from one holder: the receiver itself when it
    holds the element, else holder number ``receiver % holders`` of the block
    (partial terms stay at their coordinate). The piece a rank keeps is
    copied locally and never counted; a rank sends each other rank's target
    block the part of its source block it is the chosen holder of, and
    receives the rest of its target block. When no piece crosses ranks, no
    rank makes the call. One holder per block: uneven blocks ``n_r`` (rows
    ``I_r``) -> balanced ``m_r`` (rows ``J_r``, ``rebalance``): rank ``r``
    sends ``(n_r - len(I_r & J_r)) s`` and receives ``(m_r - len(I_r & J_r))
    s``; a sharded source to a replicated target (nested ``(S0, S0)->R``):
    every rank sends its block ``B`` to the ``p - 1`` others and receives
    ``N - B``. ``(S0, R)->(R, S0)`` on ``(p0, p1)``: rank ``(c0, c1)`` sends
    ``(p0 - 1) len(I_c0 & J_c1)`` rows (its rows ``I_c0`` that the target rows
    ``J_c1`` of the ranks ``(*, c1)`` need) and receives ``len(J_c1) -
    len(I_c0 & J_c1)`` rows. A replicated source to anything: no call, each
    rank serving itself. ``dst_ranks``: the source mesh rank at each target
    coordinate.
    """
    p = math.prod(src.mesh_shape)
    ranks = tuple(range(p)) if dst_ranks is None else tuple(int(r) for r in dst_ranks)
    terms = tuple(m for m, q in enumerate(src.placements) if isinstance(q, Partial))
    holders: dict[tuple[Box, tuple[int, ...]], list[int]] = {}
    for r, coord in enumerate(np.ndindex(*src.mesh_shape)):
        key = (src.block(coord), tuple(coord[m] for m in terms))
        holders.setdefault(key, []).append(r)
    sent, received = [0] * p, [0] * p
    crosses = False
    for receiver, coord in zip(ranks, np.ndindex(*dst.mesh_shape)):
        target, term = dst.block(coord), tuple(coord[m] for m in terms)
        for (box, box_term), who in holders.items():
            if box_term != term or receiver in who:  # the piece it keeps does not travel
                continue
            volume = math.prod(max(0, min(b, d) - max(a, c)) for (a, b), (c, d) in zip(box, target))
            if volume:
                crosses = True
                sent[who[receiver % len(who)]] += volume * itemsize
                received[receiver] += volume * itemsize
    if not crosses:
        return [() for _ in range(p)]
    return [(Call("all_to_all", p, sent[r], received[r]),) for r in range(p)]


def _coord_of(layout: Layout, ranks: tuple[int, ...], me: int) -> tuple[int, ...]:
    """The target mesh coordinate of source rank ``me``."""
    return tuple(int(c) for c in np.unravel_index(ranks.index(me), layout.mesh_shape))


def _layout(
    mesh_shape: tuple[int, ...],
    placements: Sequence[Placement],
    shape: Sequence[int],
    bounds: BoundsArg,
) -> Layout:
    if bounds is None:
        return Layout.balanced(mesh_shape, tuple(placements), tuple(shape))
    return Layout.with_bounds(mesh_shape, tuple(placements), tuple(shape), bounds)
