"""Rule-checker cases of the issue-14 rules in this area (consulted by tests/rule_cases.py).

``by_name(name, key)`` returns a zero-argument maker of the Hypothesis strategy of
calls for the rule ``name`` registered under ``key``, or None when the rule is not
from this area.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

# Operand shapes of each product gufunc: loop dims right-aligned, i/j/k/l drawn (0 to 4),
# o of length 1 (broadcast against the other operand's loop dim).
_SHAPES: dict[str, list[tuple[str, str]]] = {
    "vecdot": [("j", "j"), ("ij", "ij"), ("ij", "j"), ("j", "kij"), ("kij", "kij"), ("oij", "kij")],
    "linalg_vecdot": [("j", "j"), ("ij", "ij"), ("kij", "ij")],
    "matvec": [("ij", "j"), ("kij", "j"), ("kij", "kj"), ("ij", "kj"), ("oij", "kj")],
    "vecmat": [("j", "jk"), ("ij", "jk"), ("ij", "ijk"), ("j", "ijk")],
    "linalg_matmul": [("ij", "jk"), ("j", "jk"), ("ij", "j"), ("lij", "jk"), ("lij", "ljk"),
                      ("ij", "ljk"), ("lij", "j"), ("oij", "ljk")],
}  # fmt: skip


@st.composite
def _gufunc_case(draw: Any, func: Any, name: str) -> Any:
    from rule_cases import array, dtypes  # rule_cases imports this module: import late

    dtype = draw(dtypes("?lfdD"))
    sizes = {c: draw(st.integers(0, 4)) for c in "ijkl"} | {"o": 1}
    first, second = draw(st.sampled_from(_SHAPES[name]))
    a = draw(array(dtype, tuple(sizes[c] for c in first)))
    b = draw(array(dtype, tuple(sizes[c] for c in second)))
    return (a, b), {}, None


def by_name(name: str, key: Any) -> Callable[[], st.SearchStrategy[Any]] | None:
    """The strategy maker for a rule of this area, or None."""
    family, _, short = name.partition(".")
    if family == "gufunc" and short in _SHAPES:
        return lambda: _gufunc_case(key, short)
    return None
