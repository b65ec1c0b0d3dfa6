"""The distributed FFT's plan: which axes to transform where, and the transposes between.

A pure function of the input's :class:`~dmesh.core.layout.Layout` and the 1-D
transforms (NumPy's order): ``np.fft``'s kernels (``dmesh.ops.kernels.fft``)
run its steps, and ``dmesh.scaling.fft`` prices them, so the two cannot
drift apart. The rules (which axis takes a sharding, the order of ``rfft``
and ``irfft``) are in the module docstring of ``dmesh.ops.kernels.fft``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from dmesh.collectives.errors import UnsupportedError
from dmesh.core.layout import Layout, balanced_bounds, sharding_mesh_dims
from dmesh.core.placement import Shard, shorts

__all__ = ["Step", "Transform", "axis_blocks", "one_d_transforms", "plan_fft"]

# One 1-D transform of the plan: (axis, n, numpy.fft function name).
Transform = tuple[int, int, str]
# ("transform", transforms, layout after) or ("move", layout after).
Step = tuple[Any, ...]


def one_d_transforms(kind: str, lengths: list[int], axes: list[int]) -> tuple[Transform, ...]:
    """The 1-D transforms of ``np.fft.<kind>n`` over ``axes`` (``lengths`` each), in NumPy's order.

    ``kind`` is ``"fft"``, ``"ifft"``, ``"rfft"`` or ``"irfft"``: ``rfft``
    transforms the last axis first (it needs the real input), ``irfft`` last.
    """
    k = len(axes)
    if kind == "rfft":
        rest = [(axes[i], lengths[i], "fft") for i in reversed(range(k - 1))]
        return ((axes[-1], lengths[-1], "rfft"), *rest)
    if kind == "irfft":
        rest = [(axes[i], lengths[i], "ifft") for i in range(k - 1)]
        return (*rest, (axes[-1], lengths[-1], "irfft"))
    return tuple((axes[i], lengths[i], kind) for i in reversed(range(k)))


def axis_blocks(layout: Layout, axis: int) -> int:
    """How many blocks ``axis`` is cut into (1: every block holds it whole)."""
    return math.prod(layout.mesh_shape[m] for m in sharding_mesh_dims(layout.placements, axis))


def _transformed(layout: Layout, transforms: tuple[Transform, ...]) -> Layout:
    """``layout`` after ``transforms`` on axes its blocks hold whole (lengths change)."""
    shape, bounds = list(layout.shape), list(layout.bounds)
    for axis, n, func in transforms:
        shape[axis] = n // 2 + 1 if func == "rfft" else n
        if bounds[axis] is not None:  # sharded over mesh dims of size 1 only
            bounds[axis] = (0, shape[axis])
    return Layout(layout.mesh_shape, layout.placements, tuple(shape), tuple(bounds))


def _moved(layout: Layout, axis: int, target: int) -> Layout:
    """``layout`` with the sharding of ``axis`` given to ``target`` (balanced there)."""
    placements = tuple(
        Shard(target) if isinstance(p, Shard) and p.dim == axis else p for p in layout.placements
    )
    bounds = list(layout.bounds)
    bounds[axis] = None
    levels = tuple(layout.mesh_shape[m] for m in sharding_mesh_dims(placements, target))
    bounds[target] = balanced_bounds(layout.shape[target], levels)
    return Layout(layout.mesh_shape, placements, layout.shape, tuple(bounds))


def _ready(layout: Layout, pending: list[Transform]) -> tuple[Transform, ...]:
    """The pending transforms that can run now, in order.

    A c2c transform runs when its axis is whole in the blocks; ``rfft`` must
    run first (it needs the real input) and ``irfft`` last (NumPy's order).
    """
    if pending[0][2] == "rfft" and axis_blocks(layout, pending[0][0]) > 1:
        return ()
    ready: list[Transform] = []
    for t in pending:
        if axis_blocks(layout, t[0]) > 1:
            continue
        if t[2] == "irfft" and len(ready) != len(pending) - 1:
            continue
        ready.append(t)
    return tuple(ready)


def _next_move(
    layout: Layout, pending: list[Transform], forward: bool, name: str
) -> tuple[int, int]:
    """``(axis, target)``: which sharded axis gives its sharding to which axis.

    Targets are ranked: an axis with no pending transform and no sharding,
    then one with no pending transform that is sharded over mesh dims of size
    1, then over larger ones (the shardings nest), then the same order among
    pending axes; within a rank the nearest in the search direction (up for
    forward transforms, down for inverse ones), cyclically.
    """
    ndim = len(layout.shape)
    pending_axes = {t[0] for t in pending}
    if pending[0][2] == "rfft" or (pending[-1][2] == "irfft" and len(pending) == 1):
        movers = [pending[0][0]]
    else:
        movers = [t[0] for t in pending if t[2] != "irfft" and axis_blocks(layout, t[0]) > 1]
    best: tuple[int, int, int, int] | None = None
    for axis in movers:
        for distance in range(1, ndim):
            target = (axis + distance if forward else axis - distance) % ndim
            # Any sharding of the target, even over mesh dims of size 1, nests
            # the two and takes the general transfer instead of an all-to-all.
            nested = bool(sharding_mesh_dims(layout.placements, target))
            rank = 3 * (target in pending_axes) + nested + (axis_blocks(layout, target) > 1)
            key = (rank, distance, axis, target)
            if best is None or key < best:
                best = key
    if best is None:
        axis = movers[0]
        raise UnsupportedError(
            f"np.fft.{name}: axis {axis} of the {ndim}-d DArray is sharded "
            f"({shorts(layout.placements)} on mesh {layout.mesh_shape}) and no other axis can "
            "take its sharding; the distributed FFT transposes the sharding onto another axis. "
            "Replicate the array first (a.redistribute(mesh, [Replicate()] * mesh.ndim)) or "
            "give it a second axis (a 1-D signal of n = n1 * n2 points as an (n1, n2) array)"
        )
    return best[2], best[3]


@lru_cache(maxsize=1024)
def plan_fft(
    layout: Layout, transforms: tuple[Transform, ...], forward: bool, name: str = "fftn"
) -> tuple[tuple[Step, ...], Layout]:
    """The steps of a distributed FFT of an array in ``layout`` and its output layout.

    ``transforms`` are 1-D transforms in NumPy's order; c2c ones commute, so
    each ``"transform"`` step runs those whose axes the blocks hold whole, and
    each ``"move"`` step gives one sharded axis's sharding to another axis.
    ``layout`` has no Partial placements. Raises ``UnsupportedError`` when a
    sharded axis has nowhere to go.
    """
    steps: list[Step] = []
    pending = list(transforms)
    while pending:
        ready = _ready(layout, pending)
        if ready:
            layout = _transformed(layout, ready)
            steps.append(("transform", ready, layout))
            pending = [t for t in pending if t not in ready]
        else:
            axis, target = _next_move(layout, pending, forward, name)
            layout = _moved(layout, axis, target)
            steps.append(("move", layout))
    return tuple(steps), layout
