"""The one dispatch pipeline: prepare the operands, run on the blocks, wrap the result.

Every NumPy call on DArrays goes through the same three steps, whichever
door it came in by (a ufunc, its ``out=``/``where=`` forms, a ufunc method, a
NumPy function, an operator donating a temporary's block):

1. **prepare** (:func:`prepare`): make plain arrays replicated inside
   ``dmesh.implicit_replication()``, check that the DArray operands share a
   mesh and that the others are scalars, and ask propagation for the layouts
   (a :class:`Step`: the rule, the call as the rule saw it, the decision);
2. **run** (:func:`align`, then the rule's ``run`` or the callable): move the operands whose layout
   the decision changes, then compute this rank's block;
3. **wrap** (:func:`wrap`): the block and the decided result spec make the
   result DArray.

A call whose operand specs (or scalar types) and simple keywords were seen
before skips step 1: the :class:`Step` is kept in **one** cache keyed by
``(callable, operand specs or scalar types, keywords)`` (:func:`lookup`,
:func:`remember`), bounded because specs hold meshes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from dmesh import _hooks
from dmesh.collectives import tracing
from dmesh.collectives.errors import ArgumentTypeError, ShardingError
from dmesh.context import implicit_replication_active
from dmesh.convert import distribute
from dmesh.core.placement import Replicate
from dmesh.core.plan import local_crop
from dmesh.core.scalars import KEY_SCALARS, KIND_TYPED
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops import aligned, registry
from dmesh.ops.fused import fuse, fuse_binary, fuse_unary, wrap
from dmesh.ops.propagation import Decision, decide
from dmesh.ops.registry import Call, Rule

__all__ = [
    "SCALARS", "Step", "align", "lookup", "perform", "prepare", "remember",
    "steps", "wrap",
]  # fmt: skip

SCALARS = (int, float, complex, bool, np.generic)


class Step(NamedTuple):
    """What a call on operands of known specs does: its rule, call and decision (cached)."""

    rule: Rule
    call: registry.Call  # qualified: the docs hold dmesh.scaling.Call too
    decision: Decision
    run: Any = None  # the rule's run (None: the callable itself), read on every call
    # One DArray operand that stays in place and a rule's run: steps 2 and 3
    # fused into one closure, ``fast(func, x) -> DArray`` (see :func:`fuse`);
    # or a plain call on two operands that stay in place, ``fast(func, x, y)``
    # (see :func:`fuse_binary`), or one computed in pieces (:func:`fuse_shifted`).
    fast: Any = None
    # Whether a moving ufunc call may be computed in pieces (``aligned.possible``:
    # from the layouts alone); False skips ``aligned.run``'s checks on every call.
    piecewise: bool = True
    # Where every moving operand's move needs no message (a replicated
    # wavenumber array against a sharded spectrum): per operand, the index of
    # its block that is its block in the decided layout (None: stays), read as
    # a view instead of a redistributed copy (see :func:`local_views`).
    views: tuple[tuple[slice, ...] | None, ...] | None = None


# The one cache: a call's key (dmesh._call_keys: the callable, its operands'
# specs or scalar types, its keywords by value) -> Step.
# Hot paths read it as ``steps.get(key)`` (one call less than lookup()).
steps: dict[tuple[Any, ...], Step] = {}
_cache = steps
CACHE_LIMIT = 4096


def lookup(key: tuple[Any, ...]) -> Step | None:
    """The step remembered for ``key``, or None."""
    return _cache.get(key)


def remember(key: tuple[Any, ...], step: Step) -> None:
    """Keep ``step`` for later calls with ``key`` (the cache is cleared when full)."""
    if len(_cache) >= CACHE_LIMIT:  # bounded: it holds specs, and through them meshes
        _cache.clear()
    _cache[key] = step


def prepare(
    rule: Rule, operands: Sequence[Any], static: tuple[Any, ...], name: str
) -> tuple[list[Any], Any, Step]:
    """Step 1: the operands (plain arrays replicated where allowed), their mesh and the step."""
    operands = replicate_arrays(operands)
    mesh, specs, shapes = check_operands(name, operands)
    dtypes = tuple(
        s.dtype if s is not None else getattr(x, "dtype", type(x)) for s, x in zip(specs, operands)
    )
    call = Call(shapes, tuple(s is not None for s in specs), static, dtypes)
    run = rule.run if rule.specialize is None else rule.specialize(call)
    decision = decide(rule, call, specs)
    single = len(operands) == 1 and specs[0] is not None and not decision.any_move
    fast = None
    if single:
        fast = fuse(run, call, decision) if run is not None else fuse_unary(decision)
    if fast is None and run is None and len(operands) == 2 and not decision.any_move:
        fast = fuse_binary(decision, specs[0] is not None, specs[1] is not None)
    piecewise = aligned.possible(decision, specs)
    # (a rule's run may write into a moved operand's block, its own copy)
    views = local_views(decision, specs, mesh) if run is None else None
    if fast is None and run is None and len(operands) == 2 and (views is not None or piecewise):
        # Moving operands, but cheaply: crops of the blocks (a replicated operand
        # against a sharded one) or pieces of shifted slices, also one closure.
        cell: list[Step] = []
        fused = fuse_viewed(cell, mesh) if views is not None else fuse_shifted(cell, mesh)
        step = Step(rule, call, decision, run, fused, piecewise, views)
        cell.append(step)
        return operands, mesh, step
    return operands, mesh, Step(rule, call, decision, run, fast, piecewise, views)


def local_views(
    decision: Decision, specs: Sequence[DArraySpec | None], mesh: Any
) -> tuple[tuple[slice, ...] | None, ...] | None:
    """Per operand, the index of its block that is its block in ``decision``'s layout,
    where every moving operand moves without a message (``dmesh.core.plan.local_crop``);
    else None. The operands are only read, so a view of the block serves: no copy,
    no planner on the way. Whether it is None depends on the layouts alone, so
    every rank takes the same path."""
    if not decision.any_move or mesh is None or mesh.coordinate is None:
        return None
    views: list[tuple[slice, ...] | None] = []
    for spec, target, move in zip(specs, decision.operands, decision.moves):
        if not move or spec is None or target is None:
            views.append(None)
            continue
        if mesh is not spec.mesh:
            return None
        index = local_crop(spec.layout, target, mesh.coordinate)
        if index is None:
            return None
        views.append(index)
    return tuple(views)


def fuse_shifted(cell: list[Step], mesh: Any) -> Any:
    """A two-operand ufunc call whose moved operands are computed in pieces (shifted
    slices: ``Z[2:, 1:-1] + Z[:-2, 1:-1]``), as one closure ``fast(func, x, y)``
    straight to :func:`aligned.run` under the step in ``cell``; where that does
    not apply (it says so alike on every rank), :func:`perform` as before."""

    def shifted(func: Any, x: Any, y: Any) -> DArray:
        step = cell[0]
        if type(func) is np.ufunc:
            result = aligned.run(func, step.decision, [x, y], mesh, -1, step)
            if result is not None:
                return result
        return perform(func, step, (x, y), mesh)

    return shifted


def fuse_viewed(cell: list[Step], mesh: Any) -> Any:
    """A two-operand ufunc call whose every move is a crop of the rank's own block
    (``1j * ky * w_hat``: a replicated row against a column-sharded spectrum), as one
    closure ``fast(func, x, y)`` reading views (:func:`perform`'s first branch); a
    debug tool watching or ``dmesh.compile`` recording takes :func:`perform`."""

    def viewed(func: Any, x: Any, y: Any) -> DArray:
        step = cell[0]
        if tracing.hooked or _hooks.recorder is not None:  # (perform's own conditions)
            return perform(func, step, (x, y), mesh)
        left, right = step.views  # type: ignore[misc]
        if type(x) is DArray:
            x = x._local if left is None else x._local[left]
        if type(y) is DArray:
            y = y._local if right is None else y._local[right]
        result = func(x, y)
        if type(result) is np.ndarray:
            return DArray(result, step.decision.result_spec(mesh, result.dtype))
        return wrap(result, step.decision, mesh)

    return viewed


def align(operands: Sequence[Any], decision: Decision) -> list[Any]:
    """Step 2a: the operands' blocks in the decided layouts (collective when one moves)."""
    if not decision.any_move:  # the common repeated call: nothing moves
        # (a DArray subclass too: a traced stand-in must say it has no block)
        return [x._local if type(x) is DArray or isinstance(x, DArray) else x for x in operands]
    if len(operands) == 1:  # np.sqrt(s) of a partial s: the one operand moves
        return [operands[0].with_layout(decision.operands[0]).local]
    return [
        (x.with_layout(target).local if move else x.local) if target is not None else x
        for x, target, move in zip(operands, decision.operands, decision.moves)
    ]


def perform(
    func: Any,
    step: Step,
    operands: Sequence[Any],
    mesh: Any,
    kwargs: dict[str, Any] | None = None,
    donor: int = -1,
) -> DArray:
    """Steps 2 and 3 for a prepared or remembered call.

    ``donor`` (an operand's index, or -1) names a temporary whose block may
    hold the result (``dmesh._elision``): it is used when that operand stays
    in place and its block already has the result's shape and dtype. The
    steps are written out here rather than called: this is every cached
    call's path, and each Python call costs a tenth of a microsecond.
    """
    decision = step.decision
    views = step.views
    if (
        views is not None
        and not kwargs
        and type(func) is np.ufunc
        and _hooks.recorder is None
        and not tracing.hooked
    ):
        # Every move is a crop of the rank's own block: the ufunc reads views.
        blocks = [
            (x._local if index is None else x._local[index]) if isinstance(x, DArray) else x
            for x, index in zip(operands, views)
        ]
    elif decision.any_move:
        if step.piecewise and step.run is None and not kwargs and type(func) is np.ufunc:
            # Shifted slices of one array: computed in pieces, only crossing cells
            # sent; into a donated temporary's block where it fits.
            piecewise = aligned.run(func, decision, list(operands), mesh, donor, step)
            if piecewise is not None:
                return piecewise
        blocks = align(operands, decision)
    elif len(operands) == 1:  # np.sum(a)
        x = operands[0]
        blocks = [x._local if type(x) is DArray or isinstance(x, DArray) else x]
    else:
        blocks = [x._local if type(x) is DArray or isinstance(x, DArray) else x for x in operands]
    run = step.run
    if (
        donor >= 0
        and not decision.moves[donor]
        and _donation_fits(step, donor, func, blocks, operands)
    ):
        result = func(*blocks, out=blocks[donor])
    elif run is not None:
        result = run(func, blocks, step.call)
    else:
        result = func(*blocks, **kwargs) if kwargs else func(*blocks)
    if type(result) is not np.ndarray and (
        isinstance(result, np.generic) or not hasattr(result, "shape")
    ):  # a 0-d result: NumPy gives a scalar
        result = np.asarray(result)
    return DArray(result, decision.result_spec(mesh, result.dtype))


# (id(step), donor) -> (step, whether the donor's block fits the result). The
# specs that key a step fix its blocks' shapes and dtypes, and NumPy 2 types
# Python scalars by kind, not value (NEP 50), so the answer holds for every
# later call of the step whose other operands are DArrays or scalars of
# dmesh.core.scalars.KEY_SCALARS (a 0-d ndarray's dtype is not in the key:
# checked each time). The step is kept in the entry so that its id cannot be
# reused while the entry lives.
_donations: dict[tuple[int, int], tuple[Step, bool]] = {}


def _donation_fits(
    step: Step, donor: int, ufunc: np.ufunc, blocks: list[Any], operands: Sequence[Any]
) -> bool:
    """Whether ``blocks[donor]`` can hold ``ufunc(*blocks)`` (remembered where that is sound)."""
    if not KIND_TYPED or not all(type(x) is DArray or type(x) in KEY_SCALARS for x in operands):
        return _fits(ufunc, blocks, blocks[donor])
    entry = _donations.get((id(step), donor))
    if entry is not None and entry[0] is step:
        return entry[1]
    fits = _fits(ufunc, blocks, blocks[donor])
    if len(_donations) >= CACHE_LIMIT:
        _donations.clear()
    _donations[id(step), donor] = (step, fits)
    return fits


def _fits(ufunc: np.ufunc, blocks: list[Any], out: Any) -> bool:
    """Whether ``ufunc(*blocks)`` has ``out``'s shape and dtype (so ``out=`` changes nothing)."""
    if ufunc.nout != 1:
        return False
    try:
        shape = np.broadcast_shapes(*(np.shape(b) for b in blocks))
        dtypes = tuple(b.dtype if hasattr(b, "dtype") else type(b) for b in blocks)
        dtype = ufunc.resolve_dtypes((*dtypes, None))[-1]
    except (TypeError, ValueError):  # no loop for these types: the plain call says why
        return False
    return bool(shape == out.shape and dtype == out.dtype)


def replicate_arrays(inputs: Sequence[Any]) -> list[Any]:
    """Inside ``dmesh.implicit_replication()``: plain arrays become replicated DArrays."""
    mesh = next((x.mesh for x in inputs if isinstance(x, DArray)), None)
    if mesh is None or not implicit_replication_active():
        return list(inputs)
    replicated = [Replicate()] * mesh.ndim
    return [
        distribute(x, mesh, replicated) if isinstance(x, np.ndarray) and x.ndim else x
        for x in inputs
    ]


def check_operands(
    name: str, inputs: Sequence[Any]
) -> tuple[Any, tuple[DArraySpec | None, ...], tuple[tuple[int, ...], ...]]:
    """The operands' mesh, specs (None for scalars) and shapes; raises for foreign operands."""
    mesh = None
    specs: list[DArraySpec | None] = []
    shapes: list[tuple[int, ...]] = []
    for i, x in enumerate(inputs):
        if isinstance(x, DArray):
            if mesh is None:
                mesh = x.mesh
            elif x.mesh is not mesh:
                raise ShardingError(
                    f"np.{name}: operands {0} and {i} are on different meshes ({mesh!r} and "
                    f"{x.mesh!r}); redistribute one onto the other's mesh first"
                )
            specs.append(x.spec)
            shapes.append(x.shape)
        elif isinstance(x, SCALARS) or (isinstance(x, np.ndarray) and x.ndim == 0):
            specs.append(None)
            shapes.append(())
        else:
            raise ArgumentTypeError(
                f"np.{name}: operand {i} is a {type(x).__name__} of shape "
                f"{getattr(x, 'shape', '?')}, mixed with DArrays; make it a DArray first, e.g. "
                "dmesh.distribute(x, mesh, placements) (every rank holds x) or "
                "dmesh.distribute(x, mesh, placements, src=0), or use it inside "
                "`with dmesh.implicit_replication():`"
            )
    return mesh, tuple(specs), tuple(shapes)
