"""Op registry, sharding rules, propagation and dispatch (the top layer).

Importing it registers every rule and installs the dispatcher behind
DArray's ``__array_ufunc__``/``__array_function__`` (``dmesh`` imports it
last in its ``__init__``: the one documented upward link, see
``dmesh/_hooks.py``).
"""

if __name__ != "dmesh.ops":  # the repository's ops/ folder, imported by its folder name
    raise ImportError(
        f"this is dmesh's ops layer, imported as {__name__!r}; import it as "
        "'dmesh.ops' (the repository folder ops/ installs as dmesh/ops)"
    )


from dmesh.ops import indexing, kernels, rules
from dmesh.ops.dispatch import install
from dmesh.ops.kernels import argextreme, fft, linalg, scan, sort, take, views
from dmesh.ops.registry import Call, Row, Rule, register, registered, rule_for

install()
indexing.install()

__all__ = [
    "Call", "Row", "Rule", "argextreme", "fft", "indexing", "kernels", "linalg", "register",
    "registered", "rule_for", "rules", "scan", "sort", "take", "views",
]  # fmt: skip
