"""Rule-checker cases of the issue-14 rules in this area (consulted by tests/rule_cases.py).

``by_name(name, key)`` returns a zero-argument maker of the Hypothesis strategy of
calls for the rule ``name`` registered under ``key``, or None when the rule is not
from this area.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st


def by_name(name: str, key: Any) -> Callable[[], st.SearchStrategy[Any]] | None:
    """The strategy maker for a rule of this area, or None."""
    return None
