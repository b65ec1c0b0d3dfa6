"""``map_blocks`` and ``map_overlap``: a NumPy function on each rank's block.

Like DTensor's ``local_map``, JAX's ``shard_map`` and dask.array's
``map_blocks``/``map_overlap``: the function sees plain local blocks and its
results are wrapped back into DArrays. ``map_overlap`` hands it the block
padded by a halo (see :func:`dmesh.halo`) and trims the padding off the
result, which is how a stencil is written once for one process and runs on
a mesh unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh import _hooks
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, ShardingError
from dmesh.convert import from_local
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.halo import halo, normalize_widths

__all__ = ["map_blocks", "map_overlap"]

_BOUNDARIES = {"constant": "constant", "edge": "edge", "nearest": "edge", "periodic": "constant"}


def map_blocks(
    fn: Callable[..., Any], *arrays: Any, placements: Sequence[Any] | None = None, **kwargs: Any
) -> DArray:
    """``fn(*blocks, **kwargs)`` on every rank's blocks, wrapped as a DArray.

    DArray arguments are replaced by their local blocks (as they are laid out:
    give arrays with matching layouts when ``fn`` combines them elementwise);
    other arguments are passed unchanged. The result has the first DArray's
    placements unless ``placements`` is given; its block boundaries come from
    the blocks ``fn`` returned (one small exchange of their shapes, which also
    checks that they fit together). Collective over the mesh.
    """
    darrays = [x for x in arrays if isinstance(x, DArray)]
    if not darrays:
        raise ArgumentTypeError("map_blocks: give at least one DArray among the arrays")
    mesh = darrays[0].mesh
    for x in darrays[1:]:
        if x.mesh is not mesh:
            raise ShardingError(
                "map_blocks: the DArrays are on different meshes; redistribute them onto one"
            )
    darrays = [x.reduce_partials() for x in darrays]
    first = darrays[0]
    swap = iter(darrays)
    blocks = [next(swap).local if isinstance(x, DArray) else x for x in arrays]
    result = fn(*blocks, **kwargs) if mesh.is_member else first.local
    target = first.placements if placements is None else placements
    return from_local(result, mesh, target)


def map_overlap(
    fn: Callable[..., Any],
    a: DArray,
    depth: Any,
    boundary: Any = "constant",
    *,
    trim: bool = True,
    **kwargs: Any,
) -> DArray:
    """``fn`` on the block of ``a`` padded by ``depth`` neighbour cells per side; padding trimmed.

    ``depth`` is an int or one per dim (or ``(before, after)`` pairs);
    ``boundary`` is ``"periodic"``, ``"constant"`` (zeros), a number (that
    constant), or ``"edge"``/``"nearest"``. ``fn`` must return an array of the
    padded block's shape; with ``trim=True`` (dask's default) the padding is
    cut off and the result has ``a``'s layout. Collective over the mesh.
    """
    value: Any
    if isinstance(boundary, str):
        if boundary not in _BOUNDARIES:
            raise ArgumentError(
                f"map_overlap: boundary={boundary!r} is not supported; use 'periodic', "
                "'constant', 'edge' ('nearest') or a number"
            )
        periodic, mode, value = boundary == "periodic", _BOUNDARIES[boundary], 0
    elif isinstance(boundary, (int, float, complex, np.generic)):
        periodic, mode, value = False, "constant", boundary
    else:
        raise ArgumentTypeError(
            f"map_overlap: boundary must be a str or a number, got {type(boundary).__name__}"
        )
    widths = normalize_widths(depth, a.ndim, "depth")
    a = a.reduce_partials()
    recorder = _hooks.recorder
    if recorder is not None and trim and recorder.records(a):  # dmesh.compile is tracing
        overlap = functools.partial(
            overlap_block, fn=fn, widths=widths, periodic=periodic, mode=mode, value=value,
            kwargs=kwargs,
        )  # fmt: skip
        padded_shape = tuple(n + b + e for n, (b, e) in zip(a.spec.local_shape(), widths))

        def result_dtype() -> np.dtype:  # fn on zeros of a padded block: no message
            return np.dtype(np.asarray(fn(np.zeros(padded_shape, a.dtype), **kwargs)).dtype)

        what = f"dmesh.map_overlap({getattr(fn, '__qualname__', fn)}, widths={widths}, {kwargs})"
        return recorder.block_call(overlap, a, what, result_dtype)  # type: ignore[no-any-return]
    padded = halo(a, widths, periodic=periodic, mode=mode, constant_values=value)
    result = fn(padded, **kwargs) if a.mesh.is_member else padded
    if not trim:
        return from_local(result, a.mesh, a.placements)
    fits = getattr(result, "shape", None) == padded.shape
    # One verdict for every rank: a block fn got wrong would otherwise leave
    # the ranks with inconsistent arrays.
    group = a.mesh.comm() if a.mesh.is_member else None
    if group is not None and not bool(coll.all_reduce(np.array(fits), "land", group)):
        raise ShardingError(
            f"map_overlap: fn must return an array of the padded block's shape; rank "
            f"{group.Get_rank()} got {getattr(result, 'shape', type(result).__name__)} for "
            f"{padded.shape}"
            if not fits
            else "map_overlap: fn returned a wrong shape on "
            "another rank; it must return an array of the padded block's shape"
        )
    inner = tuple(slice(b, b + n) for (b, _), n in zip(widths, a.local.shape))
    trimmed = result[inner] if a.mesh.is_member else a.local
    return DArray(trimmed, DArraySpec(a.mesh, a.spec.layout, np.dtype(trimmed.dtype)))


def overlap_block(
    block: Any,
    spec: DArraySpec,
    *,
    fn: Callable[..., Any],
    widths: Any,
    periodic: bool,
    mode: str,
    value: Any,
    kwargs: dict[str, Any],
) -> Any:
    """:func:`map_overlap`'s work on one rank's ``block`` of an array of ``spec`` (collective:
    the halo exchange), for a compiled function's replay. The check that ``fn`` keeps the
    padded shape is made on every rank at the plan's first, checked run; here a block of
    another shape raises on its own rank (``fn``'s shapes depend on the block shapes, which
    a plan fixes)."""
    padded = halo(DArray(block, spec), widths, periodic=periodic, mode=mode, constant_values=value)
    result = fn(padded, **kwargs)
    if getattr(result, "shape", None) != padded.shape:
        raise ShardingError(
            f"map_overlap: fn must return an array of the padded block's shape {padded.shape}, "
            f"got {getattr(result, 'shape', type(result).__name__)}"
        )
    return result[tuple(slice(b, b + n) for (b, _), n in zip(widths, block.shape))]
