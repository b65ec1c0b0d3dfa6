"""Halo exchange: this rank's block padded with its neighbours' cells, like ``np.pad``.

``halo(a, width)`` returns the local block of ``a`` grown by ``width`` cells
on both sides of every dim, as ``np.pad`` would grow the global array and
then cut out this rank's part: along a sharded dim the cells come from the
neighbouring blocks (in block order, which is the mesh's Cartesian order),
at the global edges from the boundary rule (``mode="constant"``: zeros or
``constant_values``; ``mode="edge"``: the edge cell repeated), and across the
edge from the other end where the dim is periodic. Unsharded dims are padded
locally by the same rules.

Dims are exchanged one after the other, each sending the already padded
extent of the dims before it, so the corner cells of 2-D and 3-D meshes
arrive with no extra message (two messages per sharded dim and rank).
``async_op=True`` posts the first sharded dim's messages and returns a
:class:`HaloExchange`; the interior can be computed while they travel and
``wait()`` gives the padded block.

Every rank knows every block's size (the layout), so a width that a
neighbour's block cannot supply is an error raised on every rank before any
message.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.core.layout import sharding_mesh_dims

if TYPE_CHECKING:
    from dmesh.darray import DArray

__all__ = ["HaloExchange", "halo", "normalize_widths"]

MODES = ("constant", "edge")


def normalize_widths(width: Any, ndim: int, name: str = "width") -> tuple[tuple[int, int], ...]:
    """``width`` as one ``(before, after)`` pair per dim (``np.pad``'s ``pad_width`` forms)."""
    pairs: list[tuple[int, ...]]
    try:
        if isinstance(width, (int, np.integer)):
            pairs = [(operator.index(width),) * 2] * ndim
        else:
            items = list(width)
            if (
                len(items) == 2
                and all(isinstance(w, (int, np.integer)) for w in items)
                and ndim != 2
            ):
                items = [tuple(items)] * ndim  # (before, after) for every dim, as np.pad
            if len(items) != ndim:
                raise ArgumentError(
                    f"{name}: {len(items)} entries for a {ndim}-d array; give one int, "
                    "or one int or (before, after) pair per dim"
                )
            pairs = [
                (operator.index(w),) * 2
                if isinstance(w, (int, np.integer))
                else tuple(operator.index(v) for v in w)
                for w in items
            ]
    except TypeError as exc:
        raise ArgumentTypeError(f"{name}: expected ints, got {width!r}") from exc
    if any(len(p) != 2 or min(p) < 0 for p in pairs):
        raise ArgumentError(f"{name}: widths must be non-negative ints, got {width!r}")
    return tuple((int(b), int(a)) for b, a in pairs)


def _periodic_flags(periodic: Any, ndim: int) -> tuple[bool, ...]:
    if isinstance(periodic, (bool, np.bool_)):
        return (bool(periodic),) * ndim
    flags = tuple(bool(p) for p in periodic)
    if len(flags) != ndim:
        raise ArgumentError(f"periodic: {len(flags)} flags for a {ndim}-d array; give one per dim")
    return flags


class HaloExchange:
    """A halo exchange in flight (``halo(..., async_op=True)``).

    ``interior`` is this rank's block (compute on it meanwhile); ``wait()``
    completes the exchange and returns the padded block. Collective: every
    rank calls ``wait()``.
    """

    def __init__(self, interior: Any, finish: Any) -> None:
        self.interior = interior
        self._finish = finish
        self._result: Any = None

    def wait(self) -> Any:
        """The padded block (waits for the messages once)."""
        if self._finish is not None:
            self._result = self._finish()
            self._finish = None
        return self._result


def halo(
    a: DArray,
    width: Any,
    periodic: Any = False,
    mode: str = "constant",
    *,
    constant_values: Any = 0,
    async_op: bool = False,
) -> Any:
    """This rank's block of ``a`` padded by ``width`` cells per side, as ``np.pad`` of the whole.

    Parameters
    ----------
    a : DArray
        The array; ``Partial`` mesh dims are reduced first.
    width : int or sequence
        Cells per side: one int for every dim, or per dim an int or a
        ``(before, after)`` pair.
    periodic : bool or sequence of bool
        Per dim (or all): wrap around the global edges instead of ``mode``.
    mode : {"constant", "edge"}
        The rule at non-periodic global edges.
    constant_values : scalar
        The value of ``mode="constant"`` cells.
    async_op : bool
        Return a :class:`HaloExchange` with the first sharded dim's messages
        in flight instead of the padded block.

    Collective over the mesh. Raises ``ArgumentError`` on every rank when a
    neighbour's block is thinner than the width it must supply.
    """
    if mode not in MODES:
        raise ArgumentError(f"halo: mode={mode!r} is not supported; use one of {MODES}")
    widths = normalize_widths(width, a.ndim)
    flags = _periodic_flags(periodic, a.ndim)
    a = a.reduce_partials()
    plans = [_dim_plan(a, d, widths[d], flags[d], mode) for d in range(a.ndim)]
    block = a.local
    xp = array_module(block)
    padded_shape = tuple(n + b + e for n, (b, e) in zip(block.shape, widths))
    if a.mesh.coordinate is None:  # not a member: nothing to exchange
        empty = xp.empty(padded_shape, block.dtype)
        return HaloExchange(block, lambda: empty) if async_op else empty
    out = xp.empty(padded_shape, block.dtype)
    out[tuple(slice(b, b + n) for n, (b, _) in zip(block.shape, widths))] = block
    sharded = [d for d in range(a.ndim) if plans[d] is not None and widths[d] != (0, 0)]

    def fill(d: int, received: tuple[Any, Any] | None) -> None:
        _fill_dim(out, block.shape, widths, d, flags[d], mode, constant_values, received)

    def exchange(d: int, async_dim: bool) -> Any:
        return _exchange_dim(out, block.shape, widths, d, plans[d], async_dim)

    if not async_op or not sharded:
        for d in range(a.ndim):
            fill(d, exchange(d, False) if d in sharded else None)
        return HaloExchange(block, lambda: out) if async_op else out
    first = sharded[0]
    # Dims before the first sharded one are local: pad them now, so the
    # messages of the first sharded dim carry their cells too (corners).
    for d in range(first):
        fill(d, None)
    pending = exchange(first, True)

    def finish() -> Any:
        fill(first, tuple(None if p is None else p.wait() for p in pending))  # type: ignore[arg-type]
        for d in range(first + 1, a.ndim):
            fill(d, exchange(d, False) if d in sharded else None)
        return out

    return HaloExchange(block, finish)


def _dim_plan(a: DArray, d: int, width: tuple[int, int], periodic: bool, mode: str) -> Any:
    """(communicator, ring pairs) for a sharded dim after checking the blocks; None if local."""
    before, after = width
    mesh_dims = sharding_mesh_dims(a.placements, d)
    n = a.shape[d]
    if not mesh_dims:
        _check_local(n, before, after, periodic, mode, d)
        return None
    bounds = a.spec.layout.bounds[d]
    assert bounds is not None  # a sharded dim has boundaries
    sizes = [hi - lo for lo, hi in itertools.pairwise(bounds)]
    k = len(sizes)
    for i, size in enumerate(sizes):
        # Block i gives its last `before` cells to the next block and its
        # first `after` cells to the one before, where those exist.
        gives_next = i < k - 1 or periodic
        gives_previous = i > 0 or periodic
        need = max(before if gives_next else 0, after if gives_previous else 0)
        edge = mode == "edge" and not periodic and (i in (0, k - 1)) and (before or after)
        if size < need or (edge and size == 0):
            raise ArgumentError(
                f"halo: dim {d} is cut into blocks of {sizes}; block {i} holds {size} cells "
                f"but must supply {max(need, 1)} (width {width}). Use a smaller width or "
                "fewer blocks along this dim (a.redistribute(...) or a.rebalance())"
            )
    if a.mesh.coordinate is None:
        return None
    comm = a.mesh[mesh_dims].comm()  # rank order there is block order
    forward = [(i, i + 1) for i in range(k - 1)] + ([(k - 1, 0)] if periodic else [])
    backward = [(j, i) for i, j in forward]
    return comm, forward, backward


def _check_local(n: int, before: int, after: int, periodic: bool, mode: str, d: int) -> None:
    if periodic and max(before, after) > n:
        raise ArgumentError(
            f"halo: dim {d} has {n} cells, fewer than the periodic width {(before, after)}"
        )
    if mode == "edge" and not periodic and n == 0 and (before or after):
        raise ArgumentError(f"halo: dim {d} is empty; mode='edge' has no edge cell to repeat")


def _along(d: int, ndim: int, index: slice) -> tuple[slice, ...]:
    key = [slice(None)] * ndim
    key[d] = index
    return tuple(key)


def _exchange_dim(
    out: Any,
    shape: tuple[int, ...],
    widths: tuple[tuple[int, int], ...],
    d: int,
    plan: Any,
    async_op: bool,
) -> tuple[Any, Any]:
    """Send this block's edge slabs along dim ``d`` (with the padding of earlier dims)."""
    comm, forward, backward = plan
    before, after = widths[d]
    lo, n = widths[d][0], shape[d]
    # Earlier dims are already padded: send their full padded extent (corners);
    # later dims only their interior (their padding is filled afterwards).
    key = [
        slice(None) if e < d else slice(widths[e][0], widths[e][0] + shape[e])
        for e in range(out.ndim)
    ]
    last = list(key)
    last[d] = slice(lo + n - before, lo + n)
    first = list(key)
    first[d] = slice(lo, lo + after)
    slab = [out.shape[e] if e < d else shape[e] for e in range(out.ndim)]
    to_next = coll.permute(
        out[tuple(last)], forward, comm, recv_shape=_with(slab, d, before), async_op=async_op
    )
    to_previous = coll.permute(
        out[tuple(first)], backward, comm, recv_shape=_with(slab, d, after), async_op=async_op
    )
    return to_next, to_previous


def _with(shape: Sequence[int], d: int, length: int) -> list[int]:
    result = list(shape)
    result[d] = length
    return result


def _fill_dim(
    out: Any,
    shape: tuple[int, ...],
    widths: tuple[tuple[int, int], ...],
    d: int,
    periodic: bool,
    mode: str,
    constant_values: Any,
    received: tuple[Any, Any] | None,
) -> None:
    """Fill the padding of dim ``d``: received cells, else wrap, edge or constant."""
    before, after = widths[d]
    if not before and not after:
        return
    lo, n = before, shape[d]
    key = [
        slice(None) if e < d else slice(widths[e][0], widths[e][0] + shape[e])
        for e in range(out.ndim)
    ]

    def at(index: slice) -> tuple[slice, ...]:
        k = list(key)
        k[d] = index
        return tuple(k)

    from_previous, from_next = received if received is not None else (None, None)
    if before:
        if from_previous is not None:
            out[at(slice(0, lo))] = from_previous
        elif periodic and received is None:
            out[at(slice(0, lo))] = out[at(slice(lo + n - before, lo + n))]
        elif mode == "edge":
            out[at(slice(0, lo))] = out[at(slice(lo, lo + 1))]
        else:
            out[at(slice(0, lo))] = constant_values
    if after:
        end = lo + n
        if from_next is not None:
            out[at(slice(end, end + after))] = from_next
        elif periodic and received is None:
            out[at(slice(end, end + after))] = out[at(slice(lo, lo + after))]
        elif mode == "edge":
            out[at(slice(end, end + after))] = out[at(slice(end - 1, end))]
        else:
            out[at(slice(end, end + after))] = constant_values
