"""``concatenate``, ``stack`` and ``broadcast_to``.

``concatenate``/``stack``: on one mesh dim, every operand and the result may
be sharded alike on any dim other than the joining one (each rank joins its
blocks), or replicated. The joining dim itself is never sharded in a row, so
operands sharded there are redistributed first, as the cost model prices it.
A list of operands keeps the dispatcher's step cache from keying these calls,
so ``np.concatenate``, ``np.vstack`` and ``np.hstack`` keep what a call of the
same operand specs and axis did (``dmesh.ops.kernels.joins.seen``): a repeated
call is a lookup and the join of the blocks (``np.stack``, a rule, keeps its
parsed step).

``broadcast_to``: an operand dim that keeps its length keeps its sharding;
new and stretched dims are replicated. Partial values stay partial (every
output element copies one input element).
"""

from __future__ import annotations

import functools
import itertools
import operator
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from dmesh import _hooks
from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    AxisArgumentError,
    UnsupportedError,
)
from dmesh.core.placement import PARTIAL_OPS, Partial, Replicate, Shard
from dmesh.darray import DArray
from dmesh.ops.kernels.joins import (
    join,
    local_run,
    planned_join,
    remember,
    replayed,
    seen,
    seen_key,
    sharded_along,
)
from dmesh.ops.kernels.roll import roll_blocks, roll_whole, rolled_block
from dmesh.ops.registry import Call, Row, decompose, partial_survives, register

R = Replicate()


def _parse_join(name: str) -> Any:
    def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        kwargs = dict(kwargs)
        arrays = args[0] if args else kwargs.pop("arrays")
        axis = args[1] if len(args) > 1 else kwargs.pop("axis", 0)
        if kwargs or axis is None:
            raise UnsupportedError(f"np.{name} on DArrays supports (arrays, axis) only")
        arrays = list(arrays)
        if not arrays:
            raise ArgumentError(f"np.{name}: need at least one array")
        first = arrays[0]
        ndim = first.ndim if hasattr(first, "ndim") else np.ndim(first)
        ndim += 1 if name == "stack" else 0
        return arrays, (name, _checked_axis(axis, ndim))

    return parse


def _checked_axis(axis: Any, ndim: int) -> int:
    """``axis`` in ``[0, ndim)``; NumPy's errors (0-d arrays, AxisError) on every rank."""
    if ndim == 0:
        raise ArgumentError("zero-dimensional arrays cannot be concatenated")
    value = operator.index(axis)
    if not -ndim <= value < ndim:
        raise AxisArgumentError(value, ndim)
    return value % ndim


def _join_shape(call: Call) -> tuple[int, ...]:
    name, axis = call.static
    first = call.shapes[0]
    for shape in call.shapes:
        if len(shape) != len(first) or any(
            n != f for d, (n, f) in enumerate(zip(shape, first)) if name == "stack" or d != axis
        ):
            raise ArgumentError(f"np.{name}: all arrays must match off the axis; got {call.shapes}")
    if name == "stack":
        return (*first[:axis], len(call.shapes), *first[axis:])
    return (*first[:axis], sum(s[axis] for s in call.shapes), *first[axis + 1 :])


def _join_dims(call: Call) -> tuple[tuple[int | None, ...], ...]:
    name, axis = call.static
    if name == "stack":
        return tuple(tuple(d if d < axis else d + 1 for d in range(len(s))) for s in call.shapes)
    return tuple(tuple(d if d != axis else None for d in range(len(s))) for s in call.shapes)


def _join_rows(call: Call) -> list[Row]:
    name, axis = call.static
    n = len(call.shapes)
    rows: list[Row] = [(R,) * (n + 1)]
    for d in range(len(call.shapes[0])):
        if name == "concatenate" and d == axis:
            continue
        out = d if name == "concatenate" or d < axis else d + 1
        rows.append((Shard(out), *(Shard(d),) * n))
    if call.dtypes:  # terms cast to the result's dtype must still combine (partial_survives)
        joined = np.result_type(*call.dtypes) if None not in call.dtypes else None
        for op in PARTIAL_OPS:
            if all(partial_survives(op, d, joined) for d in call.dtypes):
                rows.append((Partial(op), *(Partial(op),) * n))
    return rows


def _join_run(func: Any, blocks: list[Any], call: Call) -> Any:
    _, axis = call.static
    return func(blocks, axis=axis)


def concatenate_blocks(arrays: Any, axis: Any = 0) -> Any:
    """The key of ``np.concatenate``'s rule: blocks joined along an axis none of them shards.

    ``np.concatenate`` itself is a decomposition (:func:`concatenate`) that
    sends an operand sharded along the joining axis to
    :func:`dmesh.ops.kernels.joins.join` (no gather) and the other calls here.
    """
    return np.concatenate(arrays, axis)


register(
    concatenate_blocks, name="joins.concatenate", out_shape=_join_shape,
    parse=_parse_join("concatenate"), run=_join_run, dim_map=_join_dims,
)(_join_rows)  # fmt: skip
register(np.stack, name="joining.stack", out_shape=_join_shape, parse=_parse_join("stack"),
         run=_join_run, dim_map=_join_dims)(_join_rows)  # fmt: skip


@decompose(np.concatenate)
def concatenate(
    arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: str = "same_kind"
) -> Any:
    """``np.concatenate`` of DArrays; ``axis=None`` joins the flattened arrays.

    Along an axis that an operand is sharded on, the blocks are re-cut and
    joined where they are (:func:`dmesh.ops.kernels.joins.join`, at most an
    all-to-all); otherwise each rank joins its blocks (the rule). ``dtype=``
    casts the operands first under ``casting``, as NumPy does. A call of
    specs seen before does what the first did, from a lookup.
    """
    plain = out is None and dtype is None and casting == "same_kind"
    result, key = replayed(seen_key("concatenate", axis, arrays) if plain else None, arrays)
    if result is not None:
        return result
    result = _concatenate(arrays, axis, out, dtype, casting)
    if key is not None:
        run = planned_join(arrays, axis, result)  # (where join made it)
        if run is None:
            run = local_run("concatenate", arrays, axis % result.ndim, result)
        remember(key, run)
    return result


def _concatenate(arrays: Any, axis: Any, out: Any, dtype: Any, casting: str) -> Any:
    if out is not None:
        raise UnsupportedError(
            "np.concatenate(..., out=) on DArrays is not supported; "
            "assign the result instead (out[...] = np.concatenate(...))"
        )
    items = list(arrays)
    if not items:
        raise ArgumentError("need at least one array to concatenate")
    if dtype is not None or casting not in ("same_kind", "safe", "unsafe"):
        # (NumPy casts to the joined dtype under ``casting`` when none is given: "no"
        # and "equiv" refuse what promotion changes; the others never refuse it.)
        sources = [x.dtype if isinstance(x, DArray) else np.asarray(x).dtype for x in items]
        target = np.dtype(dtype) if dtype is not None else np.result_type(*sources)
        for source in sources:
            if not np.can_cast(source, target, casting=casting):  # type: ignore[arg-type]
                raise ArgumentTypeError(
                    f"Cannot cast array data from {source} to {target} according "
                    f"to the rule {casting!r}"
                )
        if dtype is not None:
            items = [x.astype(target) if isinstance(x, DArray) else np.asarray(x, target)
                     for x in items]  # fmt: skip
    if axis is None:
        items = [np.ravel(x) for x in items]
        axis = 0
    ndim = np.ndim(items[0])
    if ndim and any(sharded_along(x, _checked_axis(axis, ndim)) for x in items):
        return join(items, operator.index(axis))
    dispatch = _hooks.dispatch_function  # (the hook: the rules do not import the dispatcher)
    assert dispatch is not None  # installed with the ops package, which defines this module
    return dispatch(concatenate_blocks, (), (items, axis), {})


def _parse_broadcast(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Any], tuple[Any, ...]]:
    array = args[0]
    given: Any = args[1] if len(args) > 1 else kwargs.get("shape", ())
    shape = (given,) if isinstance(given, (int, np.integer)) else tuple(given)
    np.broadcast_shapes(np.shape(array), shape)  # raises NumPy's error when they do not fit
    if tuple(np.broadcast_shapes(np.shape(array), shape)) != shape:
        raise ArgumentError(f"np.broadcast_to: cannot broadcast {np.shape(array)} to {shape}")
    return [array], (tuple(int(n) for n in shape),)


def _broadcast_rows(call: Call) -> list[Row]:
    (shape,) = call.static
    source = call.shapes[0]
    offset = len(shape) - len(source)
    rows: list[Row] = [(R, R)]
    for d, n in enumerate(source):
        if n == shape[d + offset]:
            rows.append((Shard(d + offset), Shard(d)))
    rows += [(Partial(op), Partial(op)) for op in PARTIAL_OPS]
    return rows


def _broadcast_run(func: Any, blocks: list[Any], call: Call) -> Any:
    (shape,) = call.static
    block = blocks[0]
    offset = len(shape) - block.ndim
    local = [
        block.shape[e - offset] if e >= offset and call.shapes[0][e - offset] == n else n
        for e, n in enumerate(shape)
    ]
    return np.broadcast_to(block, tuple(local))


def _broadcast_shape(call: Call) -> tuple[int, ...]:
    return tuple(call.static[0])


def _broadcast_dims(call: Call) -> tuple[tuple[int | None, ...], ...]:
    """Operand dim ``e`` is output dim ``e + (target ndim - operand ndim)``.

    (The default map counts from the operands' own dims, which a target with
    more dims shifts: blocks would then be aligned with the wrong output dim.)
    """
    offset = len(call.static[0]) - len(call.shapes[0])
    return (tuple(e + offset for e in range(len(call.shapes[0]))),)


register(np.broadcast_to, name="joining.broadcast_to", out_shape=_broadcast_shape,
         parse=_parse_broadcast, run=_broadcast_run,
         dim_map=_broadcast_dims)(_broadcast_rows)  # fmt: skip


@decompose(np.array_split)
def array_split(a: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    """``np.array_split``: slices of ``a`` (views of the blocks, no data moved)."""
    n = a.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ArgumentError("number sections must be larger than 0.")
        base, extra = divmod(n, sections)
        sizes = [base + 1] * extra + [base] * (sections - extra)
        cuts = [sum(sizes[:i]) for i in range(1, sections)]
    else:
        cuts = [int(c) for c in indices_or_sections]
    edges = [0, *cuts, n]
    head = (slice(None),) * (axis % a.ndim)
    pieces: list[Any] = [
        a[head + (slice(lo, max(lo, hi)),)] for lo, hi in itertools.pairwise(edges)
    ]
    return pieces


@decompose(np.split)
def split(a: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    """``np.split``: as :func:`array_split`, but sections must divide the axis evenly."""
    if isinstance(indices_or_sections, (int, np.integer)) and a.shape[axis] % indices_or_sections:
        raise ArgumentError("array split does not result in an equal division")
    pieces: list[Any] = array_split(a, indices_or_sections, axis)
    return pieces


@decompose(np.vstack)
def vstack(tup: Any, *, dtype: Any = None, casting: Any = "same_kind") -> Any:
    """``np.vstack``: 1-D arrays become rows, then concatenate along axis 0.

    A call of operand specs seen before does what it did then (each rank stacking
    rows of its blocks)."""
    plain = dtype is None and casting == "same_kind"
    done, key = replayed(seen_key("vstack", 0, tup) if plain else None, tup)
    if done is not None:
        return done
    arrays = [x[None] if x.ndim == 1 else x for x in tup]
    result: Any = np.concatenate(arrays, axis=0, dtype=dtype, casting=casting)
    if key is not None:
        ndims = {len(spec.shape) for spec in key[2:]}
        if ndims == {1}:  # rows: each rank stacks its blocks, where the rule joined them
            remember(key, local_run("stack", tup, 0, result))
        else:  # np.concatenate's own call of these arrays, kept by it
            remember(key, seen(("concatenate", 0, *key[2:]), None) if min(ndims) > 1 else None)
    return result


@decompose(np.hstack)
def hstack(tup: Any, *, dtype: Any = None, casting: Any = "same_kind") -> Any:
    """``np.hstack``: concatenate along axis 1 (axis 0 for 1-D arrays)."""
    arrays = list(tup)
    axis = 0 if arrays[0].ndim == 1 else 1
    if dtype is None and casting == "same_kind":  # np.concatenate's call, seen: its lookup
        key = seen_key("concatenate", axis, tup)
        run = None if key is None else seen(key, None)
        if run is not None:
            return run(tup)
    return np.concatenate(arrays, axis=axis, dtype=dtype, casting=casting)


@decompose(np.flip)
def flip(m: Any, axis: Any = None) -> Any:
    """``np.flip``: ``m[::-1]`` along each axis (:mod:`dmesh.ops.indexing.basic`).

    An unsharded axis is a negative-step view of each block. A sharded axis,
    over one mesh dim or several, is flipped in place of its blocks: the
    holder of block ``j`` of ``k`` sends it, reversed, to the holder of block
    ``k - 1 - j`` (one message each, no gather), and the new boundaries are
    the old ones mirrored, so uneven blocks stay where they are cheapest.
    """
    axes = range(m.ndim) if axis is None else normalize_axis_tuple(axis, m.ndim)
    return m[tuple(slice(None, None, -1 if ax in axes else 1) for ax in range(m.ndim))]


@decompose(np.roll)
def roll(a: Any, shift: Any, axis: Any = None) -> Any:
    """``np.roll``: axis after axis, each rank rolling what it holds.

    Along an axis no mesh dim shards, every block holds the whole axis and is
    rolled in place of itself (no message). Along a sharded axis the result
    keeps the input's block boundaries and only the rows that change holder
    travel, in one message (:func:`dmesh.ops.kernels.roll.roll_blocks`; a
    partial array's slices are joined instead). Without an axis the
    flattened array is rolled and reshaped back, its blocks following the
    input's so that the reshape stays a view.
    """
    if axis is None and a.ndim == 1 and type(shift) is int:  # already flat: axis 0
        axis = 0
    if axis is None:
        flat = np.ravel(a)
        rolled = _roll_axis(flat, int(np.sum(np.asarray(shift, dtype=np.int64))), 0, join)
        return np.reshape(rolled if rolled is not flat else flat.copy(), a.shape)
    if type(shift) is int and type(axis) is int:  # the common call: one axis, one shift
        ndim = a.ndim
        # (in range: the axis as is; NumPy's normalize_axis_tuple, 1.5 us, only to raise)
        ax = axis % ndim if -ndim <= axis < ndim else normalize_axis_tuple(axis, ndim)[0]
        rolled = _roll_axis(a, shift, ax, join)
        return rolled if rolled is not a else a.copy()  # NumPy returns a new array
    shifts, axes = np.broadcast_arrays(np.asarray(shift), np.asarray(axis))
    if shifts.ndim > 1 or shifts.dtype.kind not in "iu" or axes.dtype.kind not in "iu":
        raise ArgumentError(f"np.roll: shift and axis must be ints or 1-D sequences of ints; "
                            f"got shift={shift!r}, axis={axis!r}")  # fmt: skip
    totals = [0] * a.ndim
    for s, ax in zip(shifts.reshape(-1), axes.reshape(-1)):
        totals[normalize_axis_tuple(int(ax), a.ndim)[0]] += int(s)
    result = a
    for ax, total in enumerate(totals):
        result = _roll_axis(result, total, ax, join)
    return result if result is not a else a.copy()  # NumPy returns a new array


def _roll_axis(a: Any, shift: int, axis: int, join: Any) -> Any:
    n = a.shape[axis]
    if n == 0 or shift % n == 0:
        return a
    shift %= n
    cut = a.spec.layout.bounds[axis]
    recorder = _hooks.recorder
    if (
        recorder is not None
        and recorder.records(a)
        and not any(p.is_partial() for p in a.placements)
    ):
        # dmesh.compile traces: the roll is a node on the block, made as below when the
        # plan runs (its messages follow from the spec: roll.rolled_block).
        func = functools.partial(rolled_block, shift=shift, axis=axis)
        what = f"np.roll(shift={shift}, axis={axis})"
        return recorder.block_call(func, a, what, lambda: a.dtype)
    if cut is not None:  # a sharded axis: rows change holder in place, one message
        rolled = roll_blocks(a, shift, axis)
        if rolled is not None:
            return rolled
    else:  # every block holds the whole axis: each rank rolls its own (terms too: roll
        # permutes elements, so it commutes with the sum, min or max of partial terms)
        block = a._local
        return DArray(roll_whole(block, shift, axis), a._spec)
    head = (slice(None),) * axis
    pieces = [a[head + (slice(n - shift, None),)], a[head + (slice(0, n - shift),)]]
    return join(pieces, axis, cut)
