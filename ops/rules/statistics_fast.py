"""The decompositions of ``var``, ``std`` and the 2-norm, replayed on the blocks from a plan.

The decompositions of :mod:`~dmesh.ops.rules.statistics` run five or six
dispatched ops per call (mean, subtract, square, sum, divide or square root,
and the moves of the partial sums between them), each re-planned: 20-50 us
where NumPy takes 1-10 (at 1 rank, 1,000 elements). Their first call runs
them as written; its result's spec, with the argument values, makes a
:class:`Replay`: the same block arithmetic and the same moves, without
dispatching. So a later call gives the general path's specs and bits
(``dmesh.compile`` records the general path, and its calls must give the
eager call's bytes) and makes only the collectives the math needs:

- ``var``/``std``: each block's share of the mean (its sum over the global
  count, as the ``mean`` rule computes it), made whole by one move (an
  ``Allreduce`` over the mesh dims that shard a reduced axis), then each
  block's sum of squared deviations, moved, and divided by
  ``max(n - ddof, 0)``; the square root for ``std``;
- ``norm`` of a vector (``ord`` None or 2: the dot product of the block with
  itself, as NumPy, so one rank gives NumPy's bits), of the whole array or
  Frobenius: each block's sum of ``|x|**2``, moved, its square root.

The moves are the dispatcher's: the mean goes where its pricing puts it for
``a - mean`` (asked once, of the pipeline's pure decision; a call whose
pricing moves ``a`` instead, as for a small array or a dim sharded over two
mesh dims, is not replayed), the sums into the layout the first call's
result has (an ``Allreduce`` for a scalar, a reduce-scatter onto a free
dim), by the same planner. Where no reduced axis is sharded over more than
one rank nothing moves. Other calls stay on the general path: ``Partial``
placements, blocks that are no NumPy arrays (CuPy), a recording
``dmesh.compile`` or a watching debug tool, other norm orders, float16 and
longdouble data, ``dtype=`` other than float32 or float64 (or any with
complex data), and ``n - ddof <= 0`` (whose warnings and infinities the
general path gives as it always has).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmesh import _hooks
from dmesh.collectives import tracing
from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.pipeline import prepare
from dmesh.ops.registry import rule_for

__all__ = [
    "MISSING",
    "Replay",
    "norm_replay",
    "plan_norm",
    "plan_var",
    "planned",
    "remember",
    "var_replay",
]

_LIMIT = 1024  # plans hold specs, and through them meshes: bounded
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_DATA = frozenset("?bBhHiIlLqQ") | frozenset("fdFD")  # bool, ints, float32/64, complex64/128
_FRO = ("fro", "f")  # the Frobenius norm's names
# Positional (block, axis, dtype, out, keepdims), as the sum rule calls it (the stubs
# name keepdims keyword-only).
_add_reduce: Any = np.add.reduce
MISSING = object()  # no plan yet: the first call runs the general path and makes one


@dataclass(frozen=True, slots=True)
class Replay:
    """One planned call: how this rank's block becomes the result's block."""

    spec: DArraySpec  # the result's (the general path's)
    axes: tuple[int, ...]  # the reduced axes, sorted (as the mean rule passes them)
    axis: Any  # the same as the sum rule passes them to ufunc.reduce (None: all)
    keepdims: bool
    moves: bool  # whether a move communicates (then the mesh must be open)
    mean: tuple[DArraySpec, Layout] | None  # var: the mean's partial spec and its move's target
    sums: DArraySpec  # the block sums' spec (Partial where a sharded axis is reduced)
    target: Layout | None  # where the general path moves the sums (None: they stay)
    dot: bool  # norm: of a vector, by its dot product with itself (as NumPy)
    count: int  # var: the mean's divisor, the global count
    freedom: Any  # var: the squares' divisor, max(count - ddof, 0)
    dtype: Any  # var: dtype= of the sums (None: NumPy's default)
    mean_dtype: Any  # var: the dtype the mean's sum accumulates in (None: the data's)


_var_plans: dict[tuple[Any, ...], Replay | None] = {}
_norm_plans: dict[tuple[Any, ...], Replay | None] = {}


def planned(x: Any, key: tuple[Any, ...], norm: bool) -> Any:
    """The plan of ``x``'s spec with ``key`` (the other arguments, with their types, so
    that ``axis=True`` and ``axis=1`` stay apart): a :class:`Replay`, None (the general
    path) or :data:`MISSING`.

    None also where ``x`` is no DArray with a NumPy block, while ``dmesh.compile``
    records or a debug tool watches (they see the general path's ops), or where an
    argument is unhashable.
    """
    if type(x) is not DArray or type(x._local) is not np.ndarray:
        return None
    if _hooks.recorder is not None or tracing.hooked:
        return None
    try:
        plan: Any = (_norm_plans if norm else _var_plans).get((x._spec, key), MISSING)
    except TypeError:
        return None
    if plan is not None and plan is not MISSING and plan.moves and plan.spec.mesh.closed:
        return None  # (the general path says what a closed mesh allows)
    return plan


def remember(x: DArray, key: tuple[Any, ...], plan: Replay | None, norm: bool) -> None:
    """Keep ``plan`` for ``x``'s spec with ``key`` (None: such calls keep the general path)."""
    plans = _norm_plans if norm else _var_plans
    if len(plans) >= _LIMIT:
        plans.clear()
    plans[(x._spec, key)] = plan


def _axes(axis: Any, ndim: int) -> tuple[int, ...] | None:
    """``axis`` (None, an int or a tuple) as sorted distinct axes; None where it is not one."""
    items = tuple(range(ndim)) if axis is None else axis if type(axis) is tuple else (axis,)
    axes = []
    for item in items:
        index = operator.index(item)
        if not -ndim <= index < ndim:
            return None
        axes.append(index % ndim)
    return tuple(sorted(set(axes))) if len(set(axes)) == len(axes) else None


def _partial(spec: DArraySpec, axes: tuple[int, ...], keepdims: bool, dtype: np.dtype) -> Any:
    """The spec of the block sums over ``axes`` as the reduction rule makes them: a mesh
    dim that shards a reduced axis holds ``Partial("sum")`` terms; kept axes keep their
    mesh dims and bounds."""
    mesh = spec.mesh
    kept = [d for d in range(spec.ndim) if d not in axes]
    placements: list[Placement] = []
    for p in spec.placements:
        if isinstance(p, Shard) and p.dim in axes:
            placements.append(Partial("sum"))
        elif isinstance(p, Shard):
            placements.append(Shard(p.dim if keepdims else kept.index(p.dim)))
        else:
            placements.append(p)
    shape: list[int] = []
    bounds: list[Any] = []
    for d, n in enumerate(spec.shape):
        if d not in axes:
            shape.append(n)
            bounds.append(spec.layout.bounds[d])
        elif keepdims:
            shape.append(1)
            bounds.append(None)
    layout = Layout.with_bounds(mesh.shape, tuple(placements), tuple(shape), bounds)
    return DArraySpec(mesh, layout, dtype)


def _terms(spec: DArraySpec) -> bool:
    """Whether ``spec`` holds partial terms over more than one rank (a term alone is the
    value: moving it to ``Replicate`` copies the block, which a replay need not do)."""
    shape = spec.mesh.shape
    return any(p.is_partial() and shape[m] > 1 for m, p in enumerate(spec.placements))


def _replicated(spec: DArraySpec) -> Layout:
    """``spec``'s layout with its ``Partial`` mesh dims made ``Replicate`` (bounds kept)."""
    layout = spec.layout
    placements = tuple(Replicate() if p.is_partial() else p for p in layout.placements)
    return Layout(layout.mesh_shape, placements, layout.shape, layout.bounds)


def _subtraction_target(a: DArray, mean: DArraySpec) -> Layout | None:
    """Where the dispatcher moves a mean of spec ``mean`` for ``a - mean`` (the pipeline's
    own decision, pure), where it moves nothing else; else None. Its pricing may move
    ``a`` instead (a small array, a dim sharded over two mesh dims): not replayed."""
    rule = rule_for(np.subtract)
    if rule is None:
        return None
    placeholder = DArray(np.empty(mean.local_shape(), mean.dtype), mean)
    decision = prepare(rule, [a, placeholder], (), "subtract")[2].decision
    target = decision.operands[1]
    if decision.operands[0] != a._spec.layout or decision.result != a._spec.layout:
        return None
    if target is None or any(p.is_partial() for p in target.placements):
        return None
    return target


def _usable(spec: DArraySpec, result: Any) -> bool:
    """A spec and a general result a plan can be made of (every rank decides alike)."""
    mesh = spec.mesh
    return (
        type(result) is DArray
        and mesh.is_member
        and not mesh.closed
        and spec.dtype.char in _DATA
        and result.dtype in _FLOATS
        and not any(p.is_partial() for p in spec.placements)
        and not any(p.is_partial() for p in result.placements)
    )


def plan_var(a: DArray, axis: Any, dtype: Any, ddof: Any, keepdims: Any, result: Any) -> Any:
    """The :class:`Replay` of ``np.var(a, axis, dtype, ddof=, keepdims=)`` whose general
    path gave ``result``, or None."""
    spec = a._spec
    if not _usable(spec, result) or (dtype is not None and spec.dtype.kind == "c"):
        return None
    try:
        wanted = None if dtype is None else np.dtype(dtype)
        axes = _axes(axis, spec.ndim)
        count = int(np.prod([spec.shape[d] for d in axes or ()], dtype=np.int64))
        freedom = max(count - ddof, 0)  # (the general path's divisor, a Python number)
        if axes is None or count == 0 or not freedom > 0 or wanted not in (None, *_FLOATS):
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    mean_dtype = wanted if wanted is not None else np.float64 if spec.dtype.kind in "biu" else None
    mean_spec = _partial(spec, axes, True, np.dtype(mean_dtype or spec.dtype))
    mean = None
    if any(p.is_partial() for p in mean_spec.placements):
        target = _subtraction_target(a, mean_spec)
        if target is None:
            return None
        if _terms(mean_spec) or target != _replicated(mean_spec):
            mean = (mean_spec, target)
    return _replay(
        spec, axes, bool(keepdims), result, mean, count, freedom, wanted, mean_dtype, False
    )


def plan_norm(x: DArray, ord: Any, axis: Any, keepdims: Any, result: Any) -> Any:
    """The :class:`Replay` of ``np.linalg.norm(x, ord, axis, keepdims)`` (a vector 2-norm, a
    Frobenius norm, or either of the whole array) whose general path gave ``result``, or None."""
    spec = x._spec
    if not _usable(spec, result):
        return None
    ndim = spec.ndim
    try:
        if axis is None:
            axes: tuple[int, ...] | None = tuple(range(ndim))
            ok = ord is None or (ord in _FRO and ndim == 2) or (ord == 2 and ndim == 1)
        else:
            axes = _axes(axis, ndim)
            vector = axes is not None and len(axes) == 1 and not isinstance(ord, str)
            ok = (vector and ord in (None, 2)) or (
                axes is not None and len(axes) == 2 and (ord is None or ord in _FRO)
            )
    except (TypeError, ValueError):
        return None
    if not ok or axes is None:
        return None
    return _replay(spec, axes, bool(keepdims), result, None, 0, 0, None, None, axis is None)


def _replay(
    spec: DArraySpec,
    axes: tuple[int, ...],
    keepdims: bool,
    result: DArray,
    mean: tuple[DArraySpec, Layout] | None,
    count: int,
    freedom: Any,
    dtype: Any,
    mean_dtype: Any,
    full: bool,
) -> Replay | None:
    dot = full and spec.ndim == 1  # (the general path's vector norm: np.dot(x, x))
    sums = _partial(spec, axes, keepdims and not dot, result.dtype)
    partial = _terms(sums)
    target: Layout | None = result._spec.layout  # (where the dispatcher moved the sums)
    if dot and keepdims:  # the square root of the replicated dot product, reshaped to (1,)
        target = _replicated(sums) if partial else None
        if result.shape != (1,) or any(type(p) is Shard for p in result.placements):
            return None
    elif result.shape != sums.shape:
        return None
    elif not partial and target == _replicated(sums):
        target = None  # (terms of one rank each: the block is the value)
    moves = mean is not None or target is not None
    axis = None if spec.ndim and len(axes) == spec.ndim else axes  # (as the sum rule passes it)
    return Replay(
        result._spec, axes, axis, keepdims, moves, mean, sums, target, dot, count, freedom,
        dtype, mean_dtype,
    )  # fmt: skip


def _finished(sums: Any, plan: Replay) -> Any:
    """The block sums, moved from their spec where the general path moves them."""
    if plan.target is None:
        return sums
    return DArray(sums, plan.sums).with_layout(plan.target)._local


def var_replay(plan: Replay, block: Any, root: bool) -> DArray:
    """``np.var`` (``np.std`` with ``root``) of this rank's ``block`` by ``plan`` (collective
    where it moves): the general path's block arithmetic, step by step."""
    # The mean rule's term: the block's sum over the global count (ints summed in float64).
    mean = _add_reduce(block, plan.axes, plan.mean_dtype, None, True) / plan.count
    if plan.mean is not None:
        mean = DArray(_block(mean), plan.mean[0]).with_layout(plan.mean[1])._local
    deviation = _block(block - mean)
    if deviation.dtype.kind == "c":  # |d|**2 as the real and imaginary parts' squares
        real, imag = deviation.real, deviation.imag
        squared = real * real + imag * imag
    else:
        squared = np.multiply(deviation, deviation, out=deviation)
    sums = _add_reduce(squared, plan.axis, plan.dtype, None, plan.keepdims)
    value = _finished(sums, plan) / plan.freedom
    return DArray(_block(np.sqrt(value) if root else value), plan.spec)


def norm_replay(plan: Replay, block: Any) -> DArray:
    """``np.linalg.norm`` of this rank's ``block`` by ``plan`` (collective where it moves)."""
    if block.dtype.kind not in "fc":
        block = block.astype(np.float64)  # (NumPy: x.astype(float))
    complex_data = block.dtype.kind == "c"
    if plan.dot:  # NumPy's x.dot(x), or re.dot(re) + im.dot(im), of the block
        if complex_data:
            real, imag = block.real, block.imag
            sums = np.asarray(real.dot(real) + imag.dot(imag))
        else:
            sums = np.asarray(block.dot(block))
        root = _block(np.sqrt(_finished(sums, plan)))
        return DArray(root.reshape(1) if plan.keepdims else root, plan.spec)
    if complex_data:
        real, imag = block.real, block.imag
        squared = real * real + imag * imag
    else:
        squared = block * block
    sums = _add_reduce(squared, plan.axis, None, None, plan.keepdims)
    return DArray(_block(np.sqrt(_finished(sums, plan))), plan.spec)


def _block(value: Any) -> Any:
    """A result as a block: NumPy gives a scalar where an array has no dims left."""
    return value if type(value) is np.ndarray else np.asarray(value)
