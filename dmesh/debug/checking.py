"""``checking()``: compare every collective across its ranks before it runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from dmesh.collectives import tracing

__all__ = ["checking"]


@contextmanager
def checking() -> Iterator[None]:
    """Inside this block, collectives are compared across ranks before they run.

    Before each collective the ranks of its communicator exchange a digest of
    (collective, dtype, the shape they must agree on, group size, calling
    file and function). When the digests differ, every rank raises
    :class:`~dmesh.CollectiveMismatchError` naming what each rank called,
    instead of hanging or pairing the wrong calls. The exchange is one small
    ``Allgather`` per collective, so leave it off for timing.

    Enter it on every rank at the same point (it changes the messages sent).
    ``DMESH_CHECK=1`` turns checking on for the whole run. Blocks nest.

    What is compared is the caller's file and function, not its line: code
    such as ``broadcast(data if rank == 0 else None)`` written on two lines of
    one function passes.
    """
    tracing.set_checking(True)
    try:
        yield
    finally:
        tracing.set_checking(False)
