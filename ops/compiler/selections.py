"""Boolean-mask selections in a whole trace: ``X[mask].mean(axis=0)`` as one node.

A selection's length is its mask's count, known only from the data, so no op on it
can be planned before the plan runs, except a reduction over its rows, whose
result's shape is known from ``X``'s. ``X[mask]`` with a boolean stand-in ``mask`` of
``X``'s leading length, ``X`` of floats or complex numbers, gives a
:class:`MaskedRows`, which only reduces (``sum``, ``mean``, ``max``, ``min`` over axis
0, as a method or a NumPy function). The reduction is recorded as one node that runs
eager's own ``X[mask]`` and reduction on the blocks (the counts' all-gather inside
it), so the plan's bits are eager's.

Its result's spec is eager's for a selection of one row per block (the reductions'
decisions follow from placements, not lengths), found at trace time on zeros, with
no message; the node compares the spec of each result with it, and a difference
raises on every rank (every rank decides alike). Anything else done with a
MaskedRows breaks the graph, and the function then runs in segments or eagerly:
its length, its values, arithmetic, indexing. Only whole traces make them
(segments record ops whose Python runs eagerly between them).
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from dmesh.collectives.errors import ShardingError
from dmesh.core.layout import Layout
from dmesh.core.placement import Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.compiler.nodes import describe
from dmesh.ops.indexing.masks import row_placements

if TYPE_CHECKING:
    from dmesh.ops.compiler.trace import StandIn, Tracer

__all__ = ["MaskedRows", "masked_rows"]

# NumPy's reductions a selection's rows may go through, by name.
_REDUCTIONS = {np.sum: "sum", np.mean: "mean", np.max: "max", np.min: "min"}
_REDUCTIONS.update({np.amax: "max", np.amin: "min"})


def masked_rows(tracer: Tracer, a: StandIn, mask: StandIn) -> MaskedRows | None:
    """``a[mask]`` as a :class:`MaskedRows` where ``mask`` (a stand-in of ``tracer``'s
    trace) is a boolean array of ``a``'s leading length; None for any other key."""
    if not (
        tracer.detached
        and tracer.records(mask)
        and mask.dtype == np.bool_
        and mask.ndim == 1
        and a.ndim >= 1
        and a.dtype.kind in "fc"  # (an integer mean, a bool sum change dtype: their terms
        and mask.shape[0] == a.shape[0]  # are reduced first, a message the prediction
    ):  # of the spec must not send)
        return None
    return MaskedRows(tracer, a, mask)


class MaskedRows:
    """``a[mask]`` in a trace: only a reduction over its rows can be recorded."""

    __slots__ = ("_array", "_mask", "_tracer")

    def __init__(self, tracer: Tracer, array: StandIn, mask: StandIn) -> None:
        self._tracer = tracer
        self._array = array
        self._mask = mask

    def sum(self, axis: Any = None, **kwargs: Any) -> Any:
        """``a[mask].sum(axis=0)``, recorded."""
        return self._reduce(np.sum, axis, kwargs)

    def mean(self, axis: Any = None, **kwargs: Any) -> Any:
        """``a[mask].mean(axis=0)``, recorded."""
        return self._reduce(np.mean, axis, kwargs)

    def max(self, axis: Any = None, **kwargs: Any) -> Any:
        """``a[mask].max(axis=0)``, recorded."""
        return self._reduce(np.max, axis, kwargs)

    def min(self, axis: Any = None, **kwargs: Any) -> Any:
        """``a[mask].min(axis=0)``, recorded."""
        return self._reduce(np.min, axis, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func in _REDUCTIONS and args and args[0] is self and len(args) <= 2:
            kwargs = dict(kwargs)
            axis = args[1] if len(args) == 2 else kwargs.pop("axis", None)
            return self._reduce(func, axis, kwargs)
        self._break(f"np.{getattr(func, '__name__', func)}")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        self._break(f"np.{ufunc.__name__}")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        self._break("np.asarray()")

    def __getattr__(self, name: str) -> Any:  # shape, size, T, astype...
        self._break(f".{name}")

    def __bool__(self) -> bool:
        self._break("bool()")

    def __eq__(self, other: object) -> Any:
        self._break("==")

    def __ne__(self, other: object) -> Any:
        self._break("!=")

    __hash__ = None  # type: ignore[assignment]

    def _break(self, what: str) -> NoReturn:
        self._tracer.trace.graph_break(
            f"{what} of a boolean-mask selection (its length depends on the data)"
        )

    def _reduce(self, func: Any, axis: Any, kwargs: dict[str, Any]) -> Any:
        """The recorded ``func(a[mask], axis=0)`` (other axes and keywords break)."""
        a, mask = self._array, self._mask
        name = _REDUCTIONS[func]
        if (
            type(axis) is not int
            or axis not in (0, -a.ndim)
            or kwargs not in ({}, {"keepdims": False})
        ):
            self._break(f"{name}(axis={axis!r}, {kwargs})")
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predicted = func(_one_row_per_block(a.spec), axis=0)
        if not isinstance(predicted, DArray):
            self._break(f"{name}(axis=0) giving {type(predicted).__name__}")
        spec = predicted.spec
        node = functools.partial(
            _reduced_rows, spec=a.spec, mask_spec=mask.spec, func=func, predicted=spec
        )
        what = f"np.{name}(a[mask], axis=0) of {describe(a.spec)} by {describe(mask.spec)}"
        return self._tracer.block_map(node, a, spec, what, mask)


def _one_row_per_block(spec: DArraySpec) -> DArray:
    """Zeros laid out as eager's ``a[mask]`` of an ``a`` of ``spec`` would be, one row per
    block along dim 0 (the row layout of ``dmesh.ops.indexing.masks``)."""
    placements = tuple(row_placements(spec.placements))
    mesh = spec.mesh
    rows = math.prod(mesh.shape[m] for m, p in enumerate(placements) if isinstance(p, Shard))
    layout = Layout.balanced(mesh.shape, placements, (rows, *spec.shape[1:]))
    made = DArraySpec(mesh, layout, spec.dtype)
    return DArray(np.zeros(made.local_shape(), spec.dtype), made)


def _reduced_rows(
    block: Any, mask_block: Any, *, spec: DArraySpec, mask_spec: DArraySpec, func: Any,
    predicted: DArraySpec,
) -> Any:  # fmt: skip
    """The node: eager's ``func(a[mask], axis=0)`` on the blocks (collective: the
    selection's counts are all-gathered), checked against the spec the trace planned."""
    result = func(DArray(block, spec)[DArray(mask_block, mask_spec)], axis=0)
    if result.spec != predicted:
        raise ShardingError(
            f"compiled np.{_REDUCTIONS[func]}(a[mask], axis=0): the result is {result.spec!r}, "
            f"the trace planned {predicted!r}; use the function uncompiled"
        )
    return result._local
