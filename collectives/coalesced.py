"""Coalesced collectives: several arrays moved in one MPI call.

Many small collectives cost one latency each; packing them into one buffer
pays it once (gradient bucketing in data-parallel training, the tensors of a
checkpoint, the per-field reductions of a solver). All arrays of one call must
share a dtype, since one MPI call moves one datatype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dmesh.collectives import tracing
from dmesh.collectives._common import (
    as_array,
    check_flag,
    from_front,
    row_size,
    to_front,
)
from dmesh.collectives.async_array import AsyncArray, Pending
from dmesh.collectives.blocks import balanced_sizes, normalize_axis, offsets_of
from dmesh.collectives.device import transport_for
from dmesh.collectives.dtypes import mpi_datatype
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.collectives.group import Group, resolve_group
from dmesh.collectives.headers import all_gather_headers, check_same_except
from dmesh.collectives.reduce_ops import reduce_plan

__all__ = ["all_gather_coalesced", "all_reduce_coalesced", "reduce_scatter_coalesced"]


def _as_arrays(xs: Any, what: str) -> list[Any]:
    if isinstance(xs, np.ndarray) or not isinstance(xs, Sequence):
        raise ArgumentTypeError(f"{what}: expected a list of arrays, got {type(xs).__name__}")
    arrays = [as_array(x, f"xs[{i}]") for i, x in enumerate(xs)]
    if arrays:
        dtype = arrays[0].dtype
        for i, a in enumerate(arrays):
            if a.dtype != dtype:
                raise ArgumentTypeError(
                    f"{what}: all arrays must share one dtype, but xs[0] is {dtype} and xs[{i}] "
                    f"is {a.dtype}; call once per dtype or convert with .astype"
                )
    return arrays


def _deliver(
    async_op: bool,
    blocking: Any,
    nonblocking: Any,
    finish: Any,
    shapes: Sequence[tuple[int, ...]],
    dtype: np.dtype,
) -> list[Any]:
    if async_op:
        # The Pending keeps `nonblocking`, whose closure holds the buffers.
        pending = Pending(nonblocking(), lambda: tuple(finish()), nonblocking)
        return [AsyncArray(pending, i, shape, dtype) for i, shape in enumerate(shapes)]
    blocking()
    return list(finish())


def _axes(arrays: list[Any], axis: Any, what: str) -> list[int]:
    """``axis`` normalized for each array; 0-d arrays have no axis to split or join."""
    for i, a in enumerate(arrays):
        if a.ndim == 0:
            raise ArgumentError(f"{what}: xs[{i}] is 0-d; reshape it to (1,)")
    return [normalize_axis(axis, a.ndim) for a in arrays]


def all_reduce_coalesced(
    xs: Sequence[Any], op: str = "sum", group: Group = None, *, async_op: bool = False
) -> list[Any]:
    """:func:`all_reduce` of each array of ``xs``, in one MPI call. Collective."""
    if tracing.hooked and not tracing.depth:  # a debug tool watches (one read otherwise)
        return tracing.observe_list("all_reduce_coalesced", all_reduce_coalesced, locals())
    arrays = _as_arrays(xs, "all_reduce_coalesced")
    check_flag(async_op, "async_op")
    comm = resolve_group(group)
    if not arrays:
        return []
    plan = reduce_plan(op, arrays[0].dtype)
    transport = transport_for(arrays[0], comm)
    if plan.host_op:  # a user-defined op: MPI applies it on the host
        transport = transport.staged()
    xp = transport.xp
    sizes = [a.size for a in arrays]
    send = transport.outgoing(
        xp.concatenate([xp.ravel(a).astype(plan.wire, copy=False) for a in arrays])
    )
    recv = transport.empty((sum(sizes),), plan.wire)
    datatype = mpi_datatype(plan.wire)
    specs = ([send, send.size, datatype], [recv, recv.size, datatype], plan.mpi_op)

    def finish() -> list[Any]:
        flat = plan.finish(transport.incoming(recv), comm.Get_size())
        return [
            flat[o : o + n].reshape(a.shape) for a, o, n in zip(arrays, offsets_of(sizes), sizes)
        ]

    return _deliver(
        async_op,
        lambda: comm.Allreduce(*specs),
        lambda: [comm.Iallreduce(*specs)],
        finish,
        [a.shape for a in arrays],
        plan.result,
    )


def all_gather_coalesced(
    xs: Sequence[Any],
    axis: int = 0,
    group: Group = None,
    *,
    sizes: Sequence[Sequence[int]] | None = None,
    async_op: bool = False,
) -> list[Any]:
    """:func:`all_gather` of each array of ``xs`` along ``axis``, in one MPI call.

    Lengths along ``axis`` may differ between ranks; they travel in one small
    header first, which also checks the ranks agree, unless ``sizes`` gives
    them (for each array, one length per rank, the same on every rank: the
    one MPI call is then all). Collective.
    """
    if tracing.hooked and not tracing.depth:  # a debug tool watches (one read otherwise)
        return tracing.observe_list("all_gather_coalesced", all_gather_coalesced, locals())
    arrays = _as_arrays(xs, "all_gather_coalesced")
    check_flag(async_op, "async_op")
    comm = resolve_group(group)
    if not arrays:
        return []
    axes = _axes(arrays, axis, "all_gather_coalesced")
    if sizes is not None:
        shapes_by_rank = _known_shapes(arrays, axes, sizes, comm.Get_size())
    else:
        # One header row per rank: every array's shape, flattened, after ndims.
        layout = [len(a.shape) for a in arrays]
        mine = [n for a in arrays for n in a.shape]
        headers = all_gather_headers(comm, (), arrays[0].dtype, [*layout, *mine])
        check_same_except(headers, None, "all_gather_coalesced")
        shapes_by_rank = [_split_shapes(extra[len(layout) :], layout) for _, _, extra in headers]
        for i, ax in enumerate(axes):
            check_same_except(
                [(shapes[i], arrays[0].dtype, ()) for shapes in shapes_by_rank], ax,
                f"all_gather_coalesced (xs[{i}])",
            )  # fmt: skip
    transport = transport_for(arrays[0], comm)
    xp = transport.xp
    packed = [to_front(a, ax).reshape(-1) for a, ax in zip(arrays, axes)]
    send = transport.outgoing(xp.concatenate(packed))
    counts = [sum(math.prod(s) for s in shapes) for shapes in shapes_by_rank]
    recv = transport.empty((sum(counts),), arrays[0].dtype)
    datatype = mpi_datatype(arrays[0].dtype)
    sendspec = [send, send.size, datatype]
    recvspec = [recv, (counts, offsets_of(counts)), datatype]
    totals = [sum(shapes[i][ax] for shapes in shapes_by_rank) for i, ax in enumerate(axes)]

    def finish() -> list[Any]:
        flat = transport.incoming(recv)
        results = []
        for i, (a, ax) in enumerate(zip(arrays, axes)):
            rest = tuple(s for d, s in enumerate(a.shape) if d != ax)
            front = xp.empty((totals[i], *rest), dtype=a.dtype)
            row = 0
            for rank_offset, shapes in zip(offsets_of(counts), shapes_by_rank):
                start = rank_offset + sum(math.prod(s) for s in shapes[:i])
                n = shapes[i][ax]
                front[row : row + n] = flat[start : start + n * row_size(shapes[i], ax)].reshape(
                    (n, *rest)
                )
                row += n
            results.append(from_front(front, ax))
        return results

    out_shapes = [
        a.shape[:ax] + (totals[i],) + a.shape[ax + 1 :]
        for i, (a, ax) in enumerate(zip(arrays, axes))
    ]
    return _deliver(
        async_op,
        lambda: comm.Allgatherv(sendspec, recvspec),
        lambda: [comm.Iallgatherv(sendspec, recvspec)],
        finish,
        out_shapes,
        arrays[0].dtype,
    )


def _known_shapes(
    arrays: list[Any], axes: list[int], sizes: Sequence[Sequence[int]], nranks: int
) -> list[list[tuple[int, ...]]]:
    """Every rank's shape of each array: this one's, with ``sizes`` along its axis."""
    if len(sizes) != len(arrays) or any(len(s) != nranks for s in sizes):
        raise ArgumentError(
            f"all_gather_coalesced: sizes must hold one length per rank ({nranks}) for each "
            f"of the {len(arrays)} arrays, got {[list(s) for s in sizes]}"
        )
    return [
        [a.shape[:ax] + (int(s[r]),) + a.shape[ax + 1 :] for a, ax, s in zip(arrays, axes, sizes)]
        for r in range(nranks)
    ]


def _split_shapes(flat: Sequence[int], ndims: Sequence[int]) -> list[tuple[int, ...]]:
    shapes, start = [], 0
    for n in ndims:
        shapes.append(tuple(flat[start : start + n]))
        start += n
    return shapes


def reduce_scatter_coalesced(
    xs: Sequence[Any],
    op: str = "sum",
    axis: int = 0,
    group: Group = None,
    *,
    async_op: bool = False,
) -> list[Any]:
    """:func:`reduce_scatter` of each array of ``xs`` (balanced pieces), in one MPI call.

    Collective: every rank passes arrays of the same shapes and dtype.
    """
    if tracing.hooked and not tracing.depth:  # a debug tool watches (one read otherwise)
        return tracing.observe_list("reduce_scatter_coalesced", reduce_scatter_coalesced, locals())
    arrays = _as_arrays(xs, "reduce_scatter_coalesced")
    check_flag(async_op, "async_op")
    comm = resolve_group(group)
    if not arrays:
        return []
    axes = _axes(arrays, axis, "reduce_scatter_coalesced")
    plan = reduce_plan(op, arrays[0].dtype)
    nranks, rank = comm.Get_size(), comm.Get_rank()
    pieces = [balanced_sizes(a.shape[ax], nranks) for a, ax in zip(arrays, axes)]
    rows = [row_size(a.shape, ax) for a, ax in zip(arrays, axes)]
    transport = transport_for(arrays[0], comm)
    if plan.host_op:  # a user-defined op: MPI applies it on the host
        transport = transport.staged()
    xp = transport.xp
    # Rank p's segment of the send buffer holds piece p of every array in turn.
    fronts = [to_front(a, ax, plan.wire).reshape(-1) for a, ax in zip(arrays, axes)]
    segments = []
    for p in range(nranks):
        for front, piece, row in zip(fronts, pieces, rows):
            start = offsets_of(piece)[p] * row
            segments.append(front[start : start + piece[p] * row])
    send = transport.outgoing(xp.concatenate(segments) if segments else xp.empty(0, plan.wire))
    counts = [sum(piece[p] * row for piece, row in zip(pieces, rows)) for p in range(nranks)]
    recv = transport.empty((counts[rank],), plan.wire)
    datatype = mpi_datatype(plan.wire)
    sendspec, recvspec = [send, datatype], [recv, counts[rank], datatype]
    out_shapes = [
        a.shape[:ax] + (piece[rank],) + a.shape[ax + 1 :]
        for a, ax, piece in zip(arrays, axes, pieces)
    ]

    def finish() -> list[Any]:
        flat = plan.finish(transport.incoming(recv), nranks)
        results, start = [], 0
        for a, ax, piece, row in zip(arrays, axes, pieces, rows):
            n = piece[rank] * row
            rest = tuple(s for d, s in enumerate(a.shape) if d != ax)
            results.append(from_front(flat[start : start + n].reshape((piece[rank], *rest)), ax))
            start += n
        return results

    return _deliver(
        async_op,
        lambda: comm.Reduce_scatter(sendspec, recvspec, counts, plan.mpi_op),
        lambda: [comm.Ireduce_scatter(sendspec, recvspec, counts, plan.mpi_op)],
        finish,
        out_shapes,
        plan.result,
    )
