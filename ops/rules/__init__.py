"""Sharding rules, one module per op family; importing this registers them all."""

from dmesh.ops.rules import (
    contractions,
    creation_like,
    creation_nep35,
    elementwise,
    elementwise_functions,
    gufuncs,
    joining,
    metadata,
    norms,
    products,
    reduction_keywords,
    reductions,
    shape,
    statistics,
    tensordot,
)

__all__ = [
    "contractions",
    "creation_like",
    "creation_nep35",
    "elementwise",
    "elementwise_functions",
    "gufuncs",
    "joining",
    "metadata",
    "norms",
    "products",
    "reduction_keywords",
    "reductions",
    "shape",
    "statistics",
    "tensordot",
]
