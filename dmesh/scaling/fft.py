"""Traffic of ``np.fft`` on DArrays: slab and pencil transposes, the four-step 1-D FFT (pure).

An axis is transformed where every block holds it whole. A sharded axis
that must be transformed first gives its sharding to another axis (the
nearest one, searching up for forward transforms and down for inverse ones,
that needs no more transforms and is not sharded): ``S(i) -> S(j)``, one
``all_to_all`` over each mesh dim that shards ``i``. On a 1-D mesh this is
the slab decomposition (one transpose), on a 2-D mesh the pencil
decomposition (one per mesh dim); the output stays in the transposed layout.
The plan below is ``dmesh.ops.kernels.fft.plan_fft``'s, restated here on
layouts (``dmesh.scaling`` does not import the op layer); the tests check it
against the recorded calls. A move that nests shardings takes the general
transfer (one ``all_to_all`` over the whole mesh).

A 1-D array sharded along its axis takes the four-step algorithm
(``ops/kernels/fft_1d.py``): three transposes of the ``(n1, n2)`` view.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from dmesh.core.fft_plan import Transform, axis_blocks, one_d_transforms, plan_fft
from dmesh.core.layout import Layout, balanced_bounds, sharding_mesh_dims
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.core.plan import plan_redistribution
from dmesh.scaling.redistribution import transfer
from dmesh.scaling.traffic import Call, Traffic, per_rank

__all__ = ["fft_four_step", "fftn_layout", "fftn_transposes", "fftshift", "four_step_split"]

KINDS = ("fft", "ifft", "rfft", "irfft")


def _plan(layout: Layout, transforms: tuple[Transform, ...], forward: bool) -> list[Any]:
    """``("transform", funcs, layout)`` and ``("move", layout)`` steps: dmesh's own plan."""
    steps, _ = plan_fft(layout, transforms, forward)
    return [("transform", tuple(t[2] for t in step[1]), step[2]) if step[0] == "transform"
            else step for step in steps]  # fmt: skip


def _transforms(
    kind: str, shape: Sequence[int], s: Sequence[int] | None, axes: Sequence[int] | None
) -> tuple[Transform, ...]:
    """The 1-D transforms of ``np.fft.<kind>n(a, s, axes)`` in NumPy's order."""
    ndim = len(shape)
    axes = list(range(ndim)) if axes is None else [ax % ndim for ax in axes]
    if s is None:
        lengths = [shape[ax] for ax in axes]
        if kind == "irfft":
            lengths[-1] = 2 * (shape[axes[-1]] - 1)
    else:
        lengths = list(s)
    return one_d_transforms(kind, lengths, axes)


def _after(dtype: np.dtype, funcs: Sequence[str]) -> np.dtype:
    probe = np.zeros(4, dtype)
    for func in funcs:
        probe = getattr(np.fft, func)(probe)
    return np.dtype(probe.dtype)


# -- what one move sends -------------------------------------------------------------------
def _move_calls(src: Layout, dst: Layout, itemsize: int, coord: tuple[int, ...]) -> list[Call]:
    """This rank's calls in ``with_layout`` from ``src`` to ``dst`` (one mesh)."""
    calls = []
    block = list(src.local_shape(coord))
    me = int(np.ravel_multi_index(coord, src.mesh_shape)) if coord else 0
    for step in plan_redistribution(src, dst, True):
        kind = step[0]
        if kind == "all_to_all":
            _, m, i, j, split_sizes, concat_sizes = step
            sent = math.prod(block) * itemsize
            block[j], block[i] = split_sizes[coord[m]], sum(concat_sizes)
            group = src.mesh_shape[m]
            calls.append(Call("all_to_all", group, sent, math.prod(block) * itemsize))
        elif kind == "transfer":  # the pieces that cross ranks, in one all_to_all
            calls.extend(_transfer_calls(step[1], step[2], itemsize)[me])
            block = list(step[2].local_shape(coord))
        elif kind in ("crop", "slice"):
            block = list(step[-1].local_shape(coord))
        else:  # pragma: no cover - a layout move of an FFT takes no other step
            raise ValueError(f"fft: unexpected redistribution step {kind!r}")
    return calls


@lru_cache(maxsize=64)
def _transfer_calls(src: Layout, dst: Layout, itemsize: int) -> tuple[Traffic, ...]:
    """Every rank's calls in one transfer (computed once for all the ranks' formulas)."""
    return tuple(transfer(src, dst, itemsize))


# -- n-D: slab and pencil ------------------------------------------------------------------
def fftn_layout(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    placements: Sequence[Placement],
    kind: str = "fft",
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
) -> tuple[Placement, ...]:
    """The placements ``np.fft.<kind>n`` leaves its result in (the last transpose's).

    ``(S(0),)`` of a 3-D array gives ``(S(1),)`` for ``fftn``/``rfftn`` and
    ``(S(2),)`` for ``ifftn``; ``(S(0), S(1))`` gives ``(S(1), S(2))`` for
    ``fftn`` and ``(S(2), S(0))`` for ``ifftn``.
    """
    layout = Layout.balanced(tuple(mesh_shape), tuple(placements), tuple(shape))
    steps = _plan(layout, _transforms(kind, shape, s, axes), kind in ("fft", "rfft"))
    return steps[-1][-1].placements if steps else layout.placements


def fftn_transposes(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    dtype: Any,
    placements: Sequence[Placement],
    kind: str = "fft",
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
) -> list[Traffic]:
    """Every rank's calls in ``np.fft.<kind>n(a, s, axes)`` (``fftn``, ``ifftn``, ``rfftn``,
    ``irfftn``; ``fft2`` and friends are ``axes=(-2, -1)``, ``fft`` along one axis ``axes=(ax,)``).

    ``a`` has ``shape``, ``dtype`` and balanced ``placements`` (Shard/Replicate).
    Each sharded transformed axis moves once per mesh dim sharding it: an
    ``all_to_all`` over that mesh dim of the rank's block (in the dtype of that
    moment: complex after a first transform). Slab (1-D mesh of ``p``,
    ``(S(0),)``, ``n`` complex elements of ``s`` bytes): one ``all_to_all``,
    ``n s / p`` bytes in and out per rank, time ``(p-1) alpha + (p-1)/p^2 n s
    beta``. Pencil (``(p0, p1)``, ``(S(0), S(1))`` of a 3-D array): two, over
    ``p1`` then ``p0`` (``fftn``), each ``n s / (p0 p1)`` bytes, time
    ``(p0 + p1 - 2) alpha + ((p0-1)/p0 + (p1-1)/p1) n s / (p0 p1) beta``. An
    ``irfftn``/``rfftn`` whose real axis is sharded makes one more transpose.
    No transpose moves the result back (``ifftn(fftn(a))`` walks back).
    A 1-D array sharded along its axis is :func:`fft_four_step`'s.
    """
    mesh_shape = tuple(mesh_shape)
    layout = Layout.balanced(mesh_shape, tuple(placements), tuple(shape))
    if len(shape) == 1 and axis_blocks(layout, 0) > 1:
        n = None if s is None else s[0]
        return fft_four_step(mesh_shape, shape[0], dtype, placements, kind, n)
    steps = _plan(layout, _transforms(kind, shape, s, axes), kind in ("fft", "rfft"))

    def calls_at(coord: tuple[int, ...]) -> list[Call]:
        calls, current, item = [], layout, np.dtype(dtype)
        for step in steps:
            if step[0] == "transform":
                item = _after(item, step[1])
            else:
                calls += _move_calls(current, step[1], item.itemsize, coord)
            current = step[-1]
        return calls

    return per_rank(mesh_shape, calls_at)


# -- 1-D: the four-step algorithm ----------------------------------------------------------
def four_step_split(n: int, blocks: int) -> tuple[int, int] | None:
    """``(n1, n2)``, ``n1 * n2 == n``, both at least ``blocks``, ``n1`` the largest <= sqrt(n)."""
    best = None
    for n1 in range(1, math.isqrt(n) + 1):
        if n % n1 == 0 and n1 >= blocks and n // n1 >= blocks:
            best = (n1, n // n1)
    return best


def _with_shard(start: Layout, dim: int, shape: tuple[int, ...]) -> Layout:
    levels = tuple(start.mesh_shape[m] for m in sharding_mesh_dims(start.placements, 0))
    placements = tuple(Shard(dim) if isinstance(p, Shard) else p for p in start.placements)
    bounds: list[Any] = [None] * len(shape)
    bounds[dim] = balanced_bounds(shape[dim], levels)
    return Layout(start.mesh_shape, placements, shape, tuple(bounds))


def fft_four_step(
    mesh_shape: Sequence[int],
    length: int,
    dtype: Any,
    placements: Sequence[Placement],
    kind: str = "fft",
    n: int | None = None,
) -> list[Traffic]:
    """Every rank's calls in ``np.fft.<kind>(a, n)`` of a 1-D ``a`` sharded along its axis.

    ``kind`` is ``fft``, ``ifft``, ``rfft`` or ``irfft``, with ``n >= length``
    (no cut); ``n = n1 n2`` with ``n1, n2 >= k`` blocks (:func:`four_step_split`).
    The signal moves into blocks of whole rows when their cut differs from its
    own (one transfer, input dtype), then three ``all_to_all`` transposes of
    the ``(n1, n2)`` view over the ``k`` sharding ranks: complex, ``n s / k``
    bytes in and out per rank each. Even blocks: time
    ``3 ((k-1) alpha + (k-1)/k^2 n s beta)``. ``rfft`` of an odd ``n`` is
    ``fft``'s traffic (its result is a local cut); ``irfft`` of an odd ``n``
    first builds the full spectrum of ``n`` points with a distributed take (as
    :func:`fftshift`'s). ``rfft`` of a real signal of ``n`` points and ``irfft``
    of at least ``n / 2 + 1``, ``n`` even with at least two points per block,
    transform ``n / 2`` complex points (``dmesh.ops.kernels.fft_real_1d``):
    ``rfft`` moves the signal into blocks at even offsets, makes the four-step
    calls of ``n / 2`` points, mirrors the spectrum (one ``permute``), rolls it
    by one cell (an ``all_to_all`` of one element each), lays it back (a
    transfer) and shares ``Z[0]`` (an ``all_reduce``); ``irfft`` lays out the
    half spectrum and its mirror (a transfer, a ``permute``, a transfer) before
    the inverse four-step. Not modelled (``ValueError``): lengths with no such
    split (Bluestein's convolution), and the half-length path on a mesh with
    replicated blocks.
    """
    mesh_shape = tuple(mesh_shape)
    if n is None:
        n = 2 * (length - 1) if kind == "irfft" else length
    start = Layout.balanced(mesh_shape, tuple(placements), (length,))
    split = four_step_split(n, axis_blocks(start, 0))
    if kind not in KINDS or split is None or n < length:
        raise ValueError(f"fft_four_step: {kind} of {length} points, n={n}: not modelled")
    blocks = axis_blocks(start, 0)
    half_input = n if kind == "rfft" else n // 2 + 1  # (fft_real_1d.applies)
    real_in = np.dtype(dtype).kind in ("biuf" if kind == "rfft" else "fc")
    if (
        kind in ("rfft", "irfft")
        and real_in
        and n % 2 == 0
        and n // 2 >= 2 * blocks
        and length >= half_input
    ):
        return _half_length(start, length, n, kind, np.dtype(dtype))
    item = np.dtype(dtype).itemsize
    cplx = _after(np.dtype(dtype), ["ifft" if kind == "irfft" else "fft"]).itemsize

    def calls_at(coord: tuple[int, ...]) -> list[Call]:
        if kind != "irfft":
            return _four_step_calls(start, length, n, split, item, cplx, kind == "ifft", coord)
        spectrum = _with_shard(start, 0, (n,))
        calls = _hermitian(start, length, n, coord, item)
        return calls + _four_step_calls(spectrum, n, n, split, cplx, cplx, True, coord)

    return per_rank(mesh_shape, calls_at)


def _four_step_calls(start: Layout, length: int, n: int, split: tuple[int, int], item: int,
                     cplx: int, inverse: bool, coord: tuple[int, ...]) -> list[Call]:  # fmt: skip
    """The four-step FFT of ``n`` points of the ``length`` ones laid out as ``start``."""
    n1, n2 = split
    rows = _with_shard(start, 0, (n1, n2))
    flat = tuple(min(n2 * b, length) for b in rows.bounds[0])  # type: ignore[union-attr]
    calls = _move_calls(start, Layout(start.mesh_shape, start.placements, (length,), (flat,)),
                        item, coord)  # fmt: skip
    func = "ifft" if inverse else "fft"
    current = rows
    for axis, size in ((0, n1), (1, n2)):
        for step in _plan(current, ((axis, size, func),), not inverse):
            if step[0] == "move":
                calls += _move_calls(current, step[1], cplx, coord)
            current = step[-1]
    return calls + _move_calls(current, _with_shard(start, 1, (n1, n2)), cplx, coord)


# -- rfft/irfft of an even n: a complex transform of n / 2 points -------------------------
def _mirror_calls(layout: Layout, item: int, coord: tuple[int, ...]) -> list[Call]:
    """``a[::-1]`` of a 1-D ``layout``: block ``j`` to block ``k - 1 - j``, one ``permute``."""
    sizes = layout.sizes(0)
    k, j = len(sizes), layout.block_number(coord, 0)
    pairs = [(i, k - 1 - i) for i in range(k) if sizes[i] and i != k - 1 - i]
    if not pairs:
        return []
    sent = sizes[j] * item if (j, k - 1 - j) in pairs else 0
    received = sizes[k - 1 - j] * item if (k - 1 - j, j) in pairs else 0
    return [Call("permute", k, sent, received)]


def _mirrored(layout: Layout) -> Layout:
    cut = layout.bounds[0]
    assert cut is not None
    k, n = len(cut) - 1, layout.shape[0]
    bounds = (tuple(n - cut[k - j] for j in range(k + 1)),)
    return Layout(layout.mesh_shape, layout.placements, layout.shape, bounds)


def _cut(layout: Layout, lo: int, hi: int) -> Layout:
    """``layout`` of a 1-D array seen through ``a[lo:hi]`` (a view: no call)."""
    cut = layout.bounds[0]
    assert cut is not None
    bounds = (tuple(min(max(b - lo, 0), hi - lo) for b in cut),)
    return Layout(layout.mesh_shape, layout.placements, (hi - lo,), bounds)


def _half_length(start: Layout, length: int, n: int, kind: str, dtype: np.dtype) -> list[Traffic]:
    """``rfft``/``irfft`` of an even ``n`` (``dmesh.ops.kernels.fft_real_1d``), on a mesh whose
    every rank holds its own block (no replicated mesh dim of more than one rank)."""
    mesh_shape = start.mesh_shape
    k = axis_blocks(start, 0)
    if math.prod(mesh_shape) != k:
        raise ValueError(
            f"fft_four_step: {kind} of even n={n} with replicated blocks: not modelled"
        )
    h = n // 2
    split = four_step_split(h, k)
    if split is None:  # Bluestein's length for the n/2-point transform
        raise ValueError(f"fft_four_step: {kind} of n={n}: n/2 has no split, not modelled")
    half = _with_shard(start, 0, (h,))
    item = dtype.itemsize
    cplx = _after(dtype, ["rfft" if kind == "rfft" else "ifft"]).itemsize
    rows = _with_shard(start, 1, split)
    spectrum = Layout(mesh_shape, start.placements, (h,),
                      (tuple(split[0] * b for b in rows.bounds[1]),))  # type: ignore[union-attr]  # fmt: skip

    def calls_at(coord: tuple[int, ...]) -> list[Call]:
        if kind == "rfft":
            paired = tuple(2 * b for b in half.bounds[0])  # type: ignore[union-attr]
            pairs = Layout(mesh_shape, start.placements, (n,), (paired,))
            calls = _move_calls(_cut(start, 0, n), pairs, item, coord)
            calls += _four_step_calls(half, h, h, split, cplx, cplx, False, coord)
            calls += _mirror_calls(spectrum, cplx, coord)
            if k > 1:  # the one-cell roll: each block's last cell to the next block
                calls.append(Call("all_to_all", k, cplx, cplx))
            calls += _move_calls(_mirrored(spectrum), spectrum, cplx, coord)
            return calls + [Call("all_reduce", k, cplx, cplx)]  # Z[0], to every rank
        calls = _move_calls(_cut(start, 0, h), half, item, coord)
        upper = _cut(start, 1, h + 1)
        calls += _mirror_calls(upper, item, coord)
        calls += _move_calls(_mirrored(upper), half, item, coord)
        return calls + _four_step_calls(half, h, h, split, cplx, cplx, True, coord)

    return per_rank(mesh_shape, calls_at)


# -- distributed takes: fftshift, and irfft's Hermitian spectrum ---------------------------
def _take_calls(
    layout: Layout, axis: int, index: Layout, sources: Any, row_bytes: int, coord: tuple[int, ...]
) -> list[Call]:
    """This rank's calls in ``np.take(a, idx, axis)`` (``a`` in ``layout``, ``idx`` a DArray in
    ``index``, 1-D, sharded like ``axis``; ``sources(lo, hi)`` its values at ``[lo, hi)``)."""
    group = sharding_mesh_dims(layout.placements, axis)
    g = math.prod(layout.mesh_shape[m] for m in group)
    cuts = np.asarray(layout.bounds[axis], np.int64)
    bounds = index.bounds[0]
    assert bounds is not None

    def asked(b: int) -> np.ndarray:  # points block b asks of each block: owners' counts
        owners = np.searchsorted(cuts, sources(bounds[b], bounds[b + 1]), side="right") - 1
        return np.bincount(owners, minlength=g)

    me = index.block_number(coord, 0)
    sent = asked(me)
    received = sum(int(asked(b)[me]) for b in range(g))
    points = int(sent.sum())
    return [
        Call("all_reduce", math.prod(layout.mesh_shape), 16, 16),  # the bound check
        Call("all_to_all", g, 8 * g, 8 * g),  # request counts
        Call("all_to_all", g, 8 * points, 8 * received),  # int64 offsets
        Call("all_to_all", g, received * row_bytes, points * row_bytes),  # the elements
    ]


def fftshift(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    itemsize: int,
    placements: Sequence[Placement],
    axes: Sequence[int] | None = None,
    inverse: bool = False,
) -> list[Traffic]:
    """Every rank's calls in ``np.fft.fftshift(a, axes)`` (``ifftshift``: ``inverse=True``).

    A roll by ``n // 2`` of each axis: local where the blocks hold the axis
    whole, else a distributed ``np.take`` of the rolled indices: a 16-byte
    ``all_reduce`` over the mesh (the bound check), then over the ``k`` ranks
    sharding the axis an ``all_to_all`` of ``k`` int64 request counts, one of
    8-byte offsets (one per index along the axis), one of the elements. Even
    blocks, ``(S(ax),)`` over ``p``: ``8 n_ax/p`` bytes of offsets and ``n s/p``
    of elements in and out per rank, time
    ``L alpha + 3 (p-1) alpha + (p-1)/p (8 p + 8 n_ax/p + n s/p) beta``.
    """
    mesh_shape = tuple(mesh_shape)
    layout = Layout.balanced(mesh_shape, tuple(placements), tuple(shape))
    ndim = len(shape)
    rolls = []
    for ax in range(ndim) if axes is None else [a % ndim for a in axes]:
        n = shape[ax]
        shift = (-1 if inverse else 1) * (n // 2)
        if n and shift % n and sharding_mesh_dims(layout.placements, ax):
            rolls.append((ax, shift % n))

    def calls_at(coord: tuple[int, ...]) -> list[Call]:
        calls = []
        block = layout.local_shape(coord)
        for ax, shift in rolls:
            row = math.prod(b for d, b in enumerate(block) if d != ax) * itemsize
            index = Layout(mesh_shape, _index_placements(layout, ax), (shape[ax],),
                           (layout.bounds[ax],))  # fmt: skip
            roll = _rolled(shift, shape[ax])
            calls += _take_calls(layout, ax, index, roll, row, coord)
        return calls

    return per_rank(mesh_shape, calls_at)


def _index_placements(layout: Layout, axis: int) -> tuple[Placement, ...]:
    dims = sharding_mesh_dims(layout.placements, axis)
    return tuple(Shard(0) if m in dims else Replicate() for m in range(len(layout.mesh_shape)))


def _rolled(shift: int, n: int) -> Any:
    return lambda lo, hi: (np.arange(lo, hi) - shift) % n


def _hermitian(start: Layout, length: int, n: int, coord: tuple[int, ...], itemsize: int
               ) -> list[Call]:  # fmt: skip
    """``irfft``'s take of the full spectrum of ``n`` points from the ``length`` given."""
    index = _with_shard(start, 0, (n,))
    if length == 0:
        return []

    def sources(lo: int, hi: int) -> Any:
        k = np.arange(lo, hi)
        return np.minimum(np.where(k <= n // 2, k, n - k), length - 1)

    return _take_calls(start, 0, index, sources, itemsize, coord)
