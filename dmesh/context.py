"""Process-wide settings: implicit replication of plain arrays, temporary elision.

* ``dmesh.implicit_replication()``: let plain arrays mix with DArrays as
  replicated values;
* :func:`set_temporary_elision` (or ``DMESH_ELIDE=0`` in the environment):
  whether DArray arithmetic reuses a temporary operand's block, as NumPy does
  (on by default; ``dmesh._elision`` says how it knows that is safe).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError

__all__ = ["implicit_replication", "implicit_replication_active", "set_temporary_elision"]

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


def _read_elide() -> bool:
    text = os.environ.get("DMESH_ELIDE", "").strip().lower()
    if text in ("0", "false", "no", "off"):
        return False
    if text in ("", "1", "true", "yes", "on"):
        return True
    raise ArgumentError(
        f"DMESH_ELIDE={text!r}: expected 1 (reuse temporaries' blocks in DArray arithmetic, "
        "the default) or 0 (do not)"
    )


# [whether temporary elision is on]: a list so that the operators read one
# item, the cheapest check on their path.
elide_state = [_read_elide()]


def set_temporary_elision(enabled: bool) -> bool:
    """Turn temporary elision in DArray arithmetic on or off; returns the previous setting.

    On (the default), ``a * b + c`` writes the sum into the block of the
    temporary ``a * b`` when only the Python expression refers to it, as
    NumPy does (``dmesh._elision`` says how C code holding a DArray is told
    apart). Rank-local, no communication: ranks may differ and still compute
    the same values.
    Where the interpreter cannot elide (not CPython, 3.14 and later,
    free-threaded builds) it stays off whatever the setting.
    """
    if not isinstance(enabled, bool):
        raise ArgumentTypeError(
            f"set_temporary_elision: enabled must be True or False, got {enabled!r}"
        )
    previous = elide_state[0]
    elide_state[0] = enabled
    return previous
