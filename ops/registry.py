"""The op registry: one declaration per op or family of ops.

A rule maps NumPy callables to a *strategy function*: from the global shapes of
the DArray operands (and a description of the call) to the rows that are
acceptable on **one** mesh dimension, ``(output, *inputs)`` placements. The
framework (``ops.propagation``) expands rows over all mesh dims, prices each
combination and picks the cheapest (DTensor's single-mesh-dim strategies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dmesh.collectives.errors import ArgumentError
from dmesh.core.placement import Placement

__all__ = [
    "NOTHING", "Call", "Implementations", "Row", "Rule", "decompose", "decompositions",
    "implementations", "keyword_form", "partial_survives", "register", "registered", "rule_for",
    "run_forms", "special_form",
]  # fmt: skip

Row = tuple[Placement, ...]  # (output, *inputs) on one mesh dimension


@dataclass(frozen=True)
class Call:
    """What a rule sees of a call: the operand shapes and its static arguments.

    ``shapes`` holds one entry per array operand, in order; Python scalars and
    0-d arrays have shape ``()`` and ``darray[i]`` False (they are replicated
    values, e.g. the 1 of ``a + 1``). ``static`` is a hashable summary of the
    keyword arguments that matter. Rules give a placement for every operand;
    a non-DArray operand's is always ``Replicate()``. ``dtypes`` holds each
    operand's dtype, or for a Python scalar its type (``int``, ``float``...:
    NumPy gives it the other operands' dtype, NEP 50): partial rows depend on it, since a
    sum of partial terms survives a change of integer width only if nothing
    wrapped around in the narrower type.
    """

    shapes: tuple[tuple[int, ...], ...]
    darray: tuple[bool, ...]
    static: tuple[Any, ...] = ()
    dtypes: tuple[Any, ...] = ()


Parse = Callable[[tuple[Any, ...], dict[str, Any]], tuple[list[Any], tuple[Any, ...]]]
Run = Callable[[Any, list[Any], Call], Any]
DimMap = Callable[[Call], tuple[tuple[int | None, ...], ...]]


def partial_survives(op: str, source: Any, result: Any) -> bool:
    """Whether ``Partial(op)`` terms of dtype ``source`` still combine once cast to ``result``.

    Max and min commute with every cast NumPy makes (casts are monotone).
    Sums and products of integers wrap around in their own width, and a
    bool sum is a logical or, so their terms must keep the dtype; floats and
    complex only round (unknown dtypes, None, are refused).
    """
    if source is None or result is None:
        return False
    if op in ("max", "min") or source == result:
        return True
    return bool(source.kind in "fc" and result.kind in "fc")


def broadcast_dims(call: Call) -> tuple[tuple[int | None, ...], ...]:
    """Elementwise: operand dim ``e`` is output dim ``e + (out ndim - operand ndim)``."""
    ndim = max((len(s) for s in call.shapes), default=0)
    return tuple(tuple(e + ndim - len(s) for e in range(len(s))) for s in call.shapes)


@dataclass(frozen=True)
class Rule:
    """A registered op family.

    ``rows`` gives the acceptable one-mesh-dim rows, ``out_shape`` the global
    result shape. For NumPy functions (``__array_function__``), ``parse``
    turns ``(args, kwargs)`` into the array operands and a hashable static
    part, rejecting what is not supported, and ``run`` computes this rank's
    block from the operands' blocks (by default the function itself).
    ``dim_map`` tells which output dim each operand dim becomes (None: none,
    e.g. a reduced axis), so that blocks can be aligned. ``specialize``, when
    given, returns the ``run`` for one parsed call: the dispatch pipeline
    keeps it with the cached decision, so the work that depends only on the
    call (keyword arguments, the ufunc to use) is done once, not per call.
    """

    name: str
    rows: Callable[[Call], Sequence[Row]]
    out_shape: Callable[[Call], tuple[int, ...]]
    parse: Parse | None = None
    run: Run | None = None
    dim_map: DimMap = broadcast_dims
    specialize: Callable[[Call], Run] | None = None


@dataclass(frozen=True)
class Implementations:
    """Everything registered for one callable (a NumPy function, a ufunc, or
    ``(ufunc, method)`` for a ufunc method), and the one order every door tries it in.

    1. ``keyword_form``, when the call passes one of ``keywords`` (a reduction's
       ``where=``, ``out=``, ``initial=``): the call rewritten in calls that have
       rules (:func:`keyword_form`);
    2. ``decomposition``: the callable written in NumPy calls on DArrays (``np.var``
       is a mean, a subtraction, a square and a mean: :func:`decompose`); it
       replaces a rule, so a callable has one or the other;
    3. ``special_form``: a call the rule does not take (``np.where(c)`` alone), which
       returns ``NotImplemented`` for the calls the rule takes (:func:`special_form`);
       never beside a decomposition, which takes every call;
    4. ``rule``: the sharding rule (:func:`register`), run by the pipeline (eagerly)
       or recorded (``dmesh.compile``).

    A NumPy function with none of these runs NumPy's own implementation on its
    DArrays where it has one (``dmesh.ops.numpy_implementations``). Steps 1-3
    are :func:`run_forms`; every door (``dmesh.ops.dispatch`` and the tracer of
    ``dmesh.ops.compiler``) calls it, then takes the rule.
    """

    rule: Rule | None = None
    decomposition: Callable[..., Any] | None = None
    special_form: Callable[..., Any] | None = None
    keyword_form: Callable[..., Any] | None = None
    keywords: frozenset[str] = frozenset()

    def takes_keywords(self, kwargs: dict[str, Any]) -> bool:
        """Whether the keyword form takes a call passing ``kwargs``."""
        return self.keyword_form is not None and not self.keywords.isdisjoint(kwargs)


NOTHING = Implementations()

# The one registry: callable -> what is registered for it.
_entries: dict[Any, Implementations] = {}


def implementations(func: Any) -> Implementations:
    """What is registered for ``func`` (``NOTHING``, an empty entry, when nothing is)."""
    return _entries.get(func, NOTHING)


def rule_for(func: Any) -> Rule | None:
    """The rule registered for ``func``, or None."""
    return _entries.get(func, NOTHING).rule


def registered() -> dict[Any, Rule]:
    """Every callable with a rule, and its rule (for the consistency tests)."""
    return {f: e.rule for f, e in _entries.items() if e.rule is not None}


def decompositions() -> dict[Any, Callable[..., Any]]:
    """Every callable with a decomposition, and the decomposition."""
    return {f: e.decomposition for f, e in _entries.items() if e.decomposition is not None}


def run_forms(
    entry: Implementations, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``func(*args, **kwargs)`` by the first of steps 1-3 of :class:`Implementations`
    that takes it, or ``NotImplemented`` where none does (the rule's turn)."""
    if kwargs and entry.takes_keywords(kwargs):
        return entry.keyword_form(func, *args, **kwargs)  # type: ignore[misc]
    if entry.decomposition is not None:
        return entry.decomposition(*args, **kwargs)
    if entry.special_form is not None:
        return entry.special_form(*args, **kwargs)  # (NotImplemented: the rule's call)
    return NotImplemented


def _name(func: Any) -> str:
    if isinstance(func, tuple):
        return ".".join(getattr(f, "__name__", str(f)) for f in func)
    return str(getattr(func, "__name__", func))


def _add(func: Any, how: str, **fields: Any) -> None:
    """Register ``fields`` for ``func``; an implementation that another would shadow (or
    that would shadow one) is an ``ArgumentError`` naming both."""
    entry = _entries.get(func, NOTHING)
    taken = {
        "rule": ("rule", "decomposition"),
        "decomposition": ("rule", "decomposition", "special_form"),
        "special_form": ("special_form", "decomposition"),
        "keyword_form": ("keyword_form",),
    }[how]
    for other in taken:
        if getattr(entry, other) is not None:
            raise ArgumentError(
                f"{how}: {_name(func)!r} already has a {other.replace('_', ' ')}; a callable "
                "gets one rule or one decomposition (a special form only beside a rule, one "
                "keyword form): the dispatcher would never reach one of them"
            )
    _entries[func] = replace(entry, **fields)


def register(
    *funcs: Any,
    name: str,
    out_shape: Callable[[Call], tuple[int, ...]],
    parse: Parse | None = None,
    run: Run | None = None,
    dim_map: DimMap = broadcast_dims,
    specialize: Callable[[Call], Run] | None = None,
) -> Callable[[Callable[[Call], Sequence[Row]]], Callable[[Call], Sequence[Row]]]:
    """Register ``rows`` as the strategy of every callable in ``funcs``; twice is an error,
    and so is a rule for a callable with a decomposition.

    A key may also be ``(ufunc, "reduce")`` for a ufunc method.
    """

    def decorate(rows: Callable[[Call], Sequence[Row]]) -> Callable[[Call], Sequence[Row]]:
        rule = Rule(name, rows, out_shape, parse, run, dim_map, specialize)
        for func in funcs:
            _add(func, "rule", rule=rule)
        return rows

    return decorate


def decompose(*funcs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``impl`` to run in place of each of ``funcs`` on DArrays.

    ``impl`` is written with NumPy calls on its DArray arguments, so it runs as
    a sequence of ops that have rules (``var`` is a mean, a subtraction, a
    square and a mean). A callable with a rule, a special form or a
    decomposition already is an error.
    """

    def decorate(impl: Callable[..., Any]) -> Callable[..., Any]:
        for func in funcs:
            _add(func, "decomposition", decomposition=impl)
        return impl

    return decorate


def keyword_form(
    *funcs: Any, keywords: set[str]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``impl(func, *args, **kwargs)`` for calls of ``funcs`` passing one of ``keywords``.

    For keywords a rule does not take (``where=``, ``out=``, ``initial=`` of
    reductions): the call is rewritten in terms of calls that have rules, and
    calls without these keywords keep the rule and its caches.
    """

    def decorate(impl: Callable[..., Any]) -> Callable[..., Any]:
        for func in funcs:
            _add(func, "keyword_form", keyword_form=impl, keywords=frozenset(keywords))
        return impl

    return decorate


def special_form(*funcs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``impl(*args, **kwargs)`` for calls of ``funcs`` that their rule does not take.

    ``impl`` returns ``NotImplemented`` to leave a call to the rule
    (``np.where(c)`` with one argument is ``np.nonzero(c)``; with three it is
    the rule's). Consulted only when the call is not in the dispatch cache, so
    calls the rule takes keep their speed.
    """

    def decorate(impl: Callable[..., Any]) -> Callable[..., Any]:
        for func in funcs:
            _add(func, "special_form", special_form=impl)
        return impl

    return decorate
