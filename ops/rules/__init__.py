"""Sharding rules, one module per op family; importing this registers them all."""

from ops.rules import elementwise, reductions

__all__ = ["elementwise", "reductions"]
