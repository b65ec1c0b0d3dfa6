"""``dmesh.implicit_replication()``: let plain arrays mix with DArrays as replicated values."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["implicit_replication", "implicit_replication_active"]

_depth = [0]


@contextmanager
def implicit_replication() -> Iterator[None]:
    """Inside this block, a NumPy array mixed with DArrays is taken as replicated.

    Every rank must then hold the same array (as with ``distribute(x, mesh,
    [Replicate()] * mesh.ndim)``, which no rank checks). Outside it, mixing
    raises an error that says how to convert.
    """
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1


def implicit_replication_active() -> bool:
    """Whether an :func:`implicit_replication` block is open."""
    return _depth[0] > 0
