"""Op registry, sharding rules, propagation and dispatch (the top layer).

Importing it registers every rule and installs the dispatcher behind
DArray's ``__array_ufunc__``/``__array_function__`` (``dmesh`` imports it
last in its ``__init__``: the one documented upward link, see
``dmesh/_hooks.py``).
"""

from ops import kernels, rules
from ops.dispatch import install
from ops.kernels import argextreme, fft, linalg, scan, sort, take, views
from ops.registry import Call, Row, Rule, register, registered, rule_for

install()

__all__ = [
    "Call", "Row", "Rule", "argextreme", "fft", "kernels", "linalg", "register", "registered",
    "rule_for", "rules", "scan", "sort", "take", "views",
]  # fmt: skip
