"""The rule checker: every row of every registered rule, on simulated blocks, against NumPy.

For each registered op, Hypothesis (derandomized) draws hostile calls
(``tests/rule_cases.py``); for each call, every row the rule offers is run on
one simulated mesh dim of 1 to 5 ranks with balanced, uneven and empty
blocks and every form of partial terms (``tests/rule_checker.py``), and the
combined result must be NumPy's. An op registered without cases, or whose
cases never reach a row, fails here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rule_cases import case_for
from rule_checker import RowMismatchError, check_row, numpy_result

from dmesh.collectives.errors import DMeshError
from dmesh.ops.registry import Call, registered

KEYS = list(registered())


def _name(key: Any) -> str:
    return f"{key[0].__name__}.{key[1]}" if isinstance(key, tuple) else key.__name__


def _callable(key: Any) -> Any:
    return getattr(key[0], key[1]) if isinstance(key, tuple) else key


@pytest.mark.parametrize("key", KEYS, ids=_name)
def test_every_registered_op_has_cases(key: Any) -> None:
    assert case_for(registered()[key].name, key) is not None, f"{_name(key)}: no rule-checker cases"


def _operands(rule: Any, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The operands and static part as dispatch parses them (ufuncs: the arguments, as given)."""
    if rule.parse is None:
        return list(args), tuple(sorted((k, repr(v)) for k, v in kwargs.items()))
    return rule.parse(args, kwargs)


@pytest.mark.parametrize("key", KEYS, ids=_name)
def test_rows_agree_with_numpy(key: Any) -> None:
    rule = registered()[key]
    func = _callable(key)
    strategy = case_for(rule.name, key)
    assert strategy is not None
    checked: list[int] = []

    examples = 20 if isinstance(func, np.ufunc) and not isinstance(key, tuple) else 40

    @settings(
        max_examples=examples,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(case=strategy, data=st.data())
    def check(case: Any, data: Any) -> None:
        args, kwargs, darray = case
        try:
            expected = numpy_result(lambda: func(*args, **kwargs))
        except Exception:  # NumPy refuses the call: nothing to compare
            return
        try:
            operands, static = _operands(rule, key, args, kwargs)
        except DMeshError:  # dmesh refuses it on every rank (the MPI tests check how)
            return
        if darray is None:
            darray = tuple(isinstance(x, np.ndarray) for x in operands)
        dtypes = tuple(getattr(x, "dtype", type(x)) for x in operands)  # a Python scalar's type
        call = Call(tuple(tuple(np.shape(x)) for x in operands), darray, static, dtypes)
        try:
            rows = list(rule.rows(call))
        except DMeshError:
            return

        def draw(what: str, options: Any) -> Any:
            strategy = st.sampled_from(options) if isinstance(options, list) else options
            return data.draw(strategy, label=what)

        for row in rows:
            k = draw("ranks", [1, 2, 3, 4, 5])
            check_row(rule, func, call, row, operands, np.asarray(expected), k, draw)
        checked.append(len(rows))

    check()
    assert sum(checked) > 0, f"{_name(key)}: no row was checked; its cases never reach the rule"


def test_mismatch_is_reported() -> None:
    """The checker can fail: a wrong row (sqrt keeping Partial("max")) is caught."""
    from dmesh.core.placement import Partial
    from dmesh.ops.registry import rule_for

    rule = rule_for(np.sqrt)
    assert rule is not None
    call = Call(((),), (True,), (), (np.dtype(np.float64),))
    row = (Partial("max"), Partial("max"))
    choices = iter([0, 1])  # terms: rank 0 holds the value, rank 1 the identity -inf
    with pytest.raises(RowMismatchError, match="NaN"):
        check_row(
            rule,
            np.sqrt,
            call,
            row,
            [np.float64(4.0)],
            np.float64(2.0),
            2,
            lambda what, options: next(choices) if what == "holder" else options[0],
        )


def test_a_callable_gets_one_implementation() -> None:
    """A rule for a callable that has a decomposition (or the reverse), a special form
    beside a decomposition, and any form registered twice are errors at registration,
    not shadows the dispatcher silently never reaches; a refused registration changes
    nothing."""
    from dmesh.collectives.errors import ArgumentError
    from dmesh.ops import registry
    from dmesh.ops.registry import (
        decompose,
        implementations,
        keyword_form,
        register,
        rule_for,
        special_form,
    )

    before = dict(registry._entries)
    decomposed = next(f for f in (np.var, np.std, np.amax) if implementations(f).decomposition)
    with pytest.raises(ArgumentError, match="already has a decomposition"):
        register(decomposed, name="twice", out_shape=lambda call: ())(lambda call: [])
    with pytest.raises(ArgumentError, match="already has a decomposition"):
        special_form(decomposed)(lambda *args: NotImplemented)
    ruled = np.add
    assert rule_for(ruled) is not None
    with pytest.raises(ArgumentError, match="already has a rule"):
        decompose(ruled)(lambda *args: None)
    with pytest.raises(ArgumentError, match="already has a rule"):
        register(ruled, name="twice", out_shape=lambda call: ())(lambda call: [])
    special = next(f for f, e in registry._entries.items() if e.special_form is not None)
    with pytest.raises(ArgumentError, match=r"already has a (rule|special form)"):
        decompose(special)(lambda *args: None)
    with pytest.raises(ArgumentError, match="already has a special form"):
        special_form(special)(lambda *args: NotImplemented)
    keyworded = next(f for f, e in registry._entries.items() if e.keyword_form is not None)
    with pytest.raises(ArgumentError, match="already has a keyword form"):
        keyword_form(keyworded, keywords={"out"})(lambda *args, **kw: None)
    assert rule_for(decomposed) is None
    assert implementations(ruled).decomposition is None
    assert registry._entries == before


def test_every_door_tries_the_forms_in_one_order() -> None:
    """``run_forms``: a keyword form for its keywords, then the decomposition, then the
    special form (which may decline), then the rule's turn (``NotImplemented``)."""
    from dmesh.ops.registry import Implementations, run_forms

    seen: list[str] = []

    def form(name: str, result: object = None) -> object:
        def impl(*args: object, **kwargs: object) -> object:
            seen.append(name)
            return name if result is None else result

        return impl

    both = Implementations(
        keyword_form=form("keyword"), keywords=frozenset({"where"}), decomposition=form("dec")
    )
    assert run_forms(both, np.sum, (1,), {"where": True}) == "keyword"
    assert run_forms(both, np.sum, (1,), {"axis": 0}) == "dec"
    declining = Implementations(special_form=form("special", NotImplemented))
    assert run_forms(declining, np.where, (1,), {}) is NotImplemented
    assert run_forms(Implementations(), np.add, (1, 2), {}) is NotImplemented
    assert seen == ["keyword", "dec", "special"]
