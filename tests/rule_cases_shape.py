"""Rule-checker cases of the issue-14 rules in this area (consulted by tests/rule_cases.py).

``by_name(name, key)`` returns a zero-argument maker of the Hypothesis strategy of
calls for the rule ``name`` registered under ``key``, or None when the rule is not
from this area.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st


@st.composite
def _concatenate_case(draw: Any) -> Any:
    """Operands of ``np.concatenate``'s rule: equal off the axis, any lengths along it."""
    from rule_cases import array, dtypes, shapes  # tests/rule_cases.py imports this module

    shape = draw(shapes(min_dims=1))
    ndim = len(shape)
    axis = draw(st.integers(-ndim, ndim - 1))
    arrays = []
    for _ in range(draw(st.integers(1, 3))):
        own = list(shape)
        own[axis] = draw(st.integers(0, 4))
        arrays.append(draw(array(draw(dtypes()), tuple(own))))
    return (arrays, axis), {}, None


def by_name(name: str, key: Any) -> Callable[[], st.SearchStrategy[Any]] | None:
    """The strategy maker for a rule of this area, or None."""
    if name == "joins.concatenate":
        return _concatenate_case
    return None
