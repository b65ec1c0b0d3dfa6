"""Sharding rules, one module per op family; importing this registers them all."""

from ops.rules import (
    contractions,
    elementwise,
    elementwise_functions,
    joining,
    reduction_keywords,
    reductions,
    shape,
    statistics,
)

__all__ = [
    "contractions",
    "elementwise",
    "elementwise_functions",
    "joining",
    "reduction_keywords",
    "reductions",
    "shape",
    "statistics",
]
