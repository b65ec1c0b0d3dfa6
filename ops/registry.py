"""The op registry: one declaration per op or family of ops.

A rule maps NumPy callables to a *strategy function*: from the global shapes of
the DArray operands (and a description of the call) to the rows that are
acceptable on **one** mesh dimension, ``(output, *inputs)`` placements. The
framework (``ops.propagation``) expands rows over all mesh dims, prices each
combination and picks the cheapest (DTensor's single-mesh-dim strategies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dmesh.collectives.errors import ArgumentError
from dmesh.core.placement import Placement

__all__ = ["Call", "Row", "Rule", "partial_survives", "register", "rule_for"]

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


_rules: dict[Any, Rule] = {}


def register(
    *funcs: Any,
    name: str,
    out_shape: Callable[[Call], tuple[int, ...]],
    parse: Parse | None = None,
    run: Run | None = None,
    dim_map: DimMap = broadcast_dims,
    specialize: Callable[[Call], Run] | None = None,
) -> Callable[[Callable[[Call], Sequence[Row]]], Callable[[Call], Sequence[Row]]]:
    """Register ``rows`` as the strategy of every callable in ``funcs``; twice is an error.

    A key may also be ``(ufunc, "reduce")`` for a ufunc method.
    """

    def decorate(rows: Callable[[Call], Sequence[Row]]) -> Callable[[Call], Sequence[Row]]:
        rule = Rule(name, rows, out_shape, parse, run, dim_map, specialize)
        for func in funcs:
            if func in _rules:
                raise ArgumentError(
                    f"register: {getattr(func, '__name__', func)!r} already has the rule "
                    f"{_rules[func].name!r}; a callable gets one rule"
                )
            if func in _decompositions:  # (the dispatcher would never reach the rule)
                raise ArgumentError(
                    f"register: {getattr(func, '__name__', func)!r} already has a "
                    "decomposition; a callable gets one implementation"
                )
            _rules[func] = rule
        return rows

    return decorate


def rule_for(func: Any) -> Rule | None:
    """The rule registered for ``func``, or None."""
    return _rules.get(func)


def registered() -> dict[Any, Rule]:
    """Every registered callable and its rule (for the consistency tests)."""
    return dict(_rules)


_decompositions: dict[Any, Callable[..., Any]] = {}


def decompose(*funcs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``impl`` to run in place of each of ``funcs`` on DArrays.

    ``impl`` is written with NumPy calls on its DArray arguments, so it runs as
    a sequence of ops that have rules (``var`` is a mean, a subtraction, a
    square and a mean). Registering a callable twice is an error.
    """

    def decorate(impl: Callable[..., Any]) -> Callable[..., Any]:
        for func in funcs:
            if func in _decompositions or func in _rules:
                raise ArgumentError(
                    f"decompose: {getattr(func, '__name__', func)!r} already has a rule"
                )
            _decompositions[func] = impl
        return impl

    return decorate


def decomposition_for(func: Any) -> Callable[..., Any] | None:
    """The decomposition registered for ``func``, or None."""
    return _decompositions.get(func)


_keyword_forms: dict[Any, tuple[frozenset[str], Callable[..., Any]]] = {}


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
            if func in _keyword_forms:
                raise ArgumentError(
                    f"keyword_form: {getattr(func, '__name__', func)!r} already has one"
                )
            _keyword_forms[func] = (frozenset(keywords), impl)
        return impl

    return decorate


def keyword_form_for(func: Any, kwargs: dict[str, Any]) -> Callable[..., Any] | None:
    """The keyword form of ``func`` when ``kwargs`` holds one of its keywords, else None."""
    entry = _keyword_forms.get(func)
    if entry is None or entry[0].isdisjoint(kwargs):
        return None
    return entry[1]


_special_forms: dict[Any, Callable[..., Any]] = {}


def special_form(*funcs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``impl(*args, **kwargs)`` for calls of ``funcs`` that their rule does not take.

    ``impl`` returns ``NotImplemented`` to leave a call to the rule
    (``np.where(c)`` with one argument is ``np.nonzero(c)``; with three it is
    the rule's). Consulted only when the call is not in the dispatch cache, so
    calls the rule takes keep their speed.
    """

    def decorate(impl: Callable[..., Any]) -> Callable[..., Any]:
        for func in funcs:
            if func in _special_forms:
                raise ArgumentError(
                    f"special_form: {getattr(func, '__name__', func)!r} already has one"
                )
            _special_forms[func] = impl
        return impl

    return decorate


def special_form_for(func: Any) -> Callable[..., Any] | None:
    """The special form of ``func``, or None."""
    return _special_forms.get(func)
