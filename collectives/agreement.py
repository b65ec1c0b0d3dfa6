"""Agree on rank-local errors, then raise the same error on every rank.

A check that reads rank-local facts (a file only rank 0 opens, a GPU, a
block's shape) can fail on some ranks only. A rank that raised alone would
leave the others waiting in the next collective forever, so every such check
ends in one of these calls:

- :func:`raise_if_any_failed`: every rank passes its own exception or
  ``None``; the ranks vote (one ``Allgather`` of a byte each), and if any
  failed, all raise.
- :func:`raise_root_error`: the ranks already know that one rank failed (it
  announced it in a header they all received, as ``broadcast`` and
  ``scatter`` do at no extra cost); all raise that rank's error.

The error raised everywhere is that of the lowest failing rank: its class
when the class is one the ranks can name (the hierarchy of
:mod:`dmesh.collectives.errors`, or a class the caller lists in ``kinds``),
else the caller's ``fallback`` with the original class named in the text.
The message names the failing ranks first (``what: failed on rank(s) [0, 2]
of 4; rank 0: <its message>``). On a rank that failed, its own
exception is chained as the cause; on the others there is no local cause.
Nothing is pickled: the class travels as an index, the message as UTF-8.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import numpy as np
from mpi4py import MPI

from dmesh.collectives import tracing
from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    AxisArgumentError,
    CollectiveMismatchError,
    DMeshError,
    ShardingError,
    UnsupportedError,
)
from dmesh.collectives.headers import broadcast_bytes

__all__ = ["raise_if_any_failed", "raise_root_error"]

# The classes every rank can name without pickling; callers add their own.
_KNOWN: tuple[type[Exception], ...] = (
    ArgumentError,
    AxisArgumentError,
    ArgumentTypeError,
    ShardingError,
    UnsupportedError,
    CollectiveMismatchError,
    DMeshError,
)


def raise_if_any_failed(
    comm: MPI.Comm,
    error: BaseException | None,
    what: str = "",
    *,
    fallback: type[Exception] = ArgumentError,
    kinds: Sequence[type[Exception]] = (),
) -> None:
    """Return if no rank of ``comm`` has an error; else raise one on every rank. Collective.

    Parameters
    ----------
    comm : MPI.Comm
        The ranks that vote; all of them must call this, in the same order as
        their other collectives.
    error : BaseException or None
        This rank's failure, or ``None``.
    what : str
        What was being done (``"load"``, ``"device='cuda'"``), to start the
        message with; empty when the errors' own messages already say it.
    fallback : type of Exception
        The class raised for an error whose class the ranks cannot name (an
        ``OSError``, a ``RuntimeError``...); the text then starts with that
        class's name.
    kinds : sequence of Exception types
        Classes besides dmesh's hierarchy that keep their identity (say, a
        ``CheckpointError``). A class matches exactly, not by subclass.

    Raises
    ------
    Exception
        On every rank when any rank passed an error: the lowest failing rank's
        class (see above) with a message naming the failing ranks.
    """
    flags = np.zeros(comm.Get_size(), np.int8)
    mine = np.array([error is not None], np.int8)
    if tracing.hooked:
        tracing.direct("all_gather", comm, mine.nbytes, flags.nbytes)
    comm.Allgather(mine, flags)
    failed = [int(r) for r in np.flatnonzero(flags)]
    if failed:
        _raise_everywhere(comm, error, failed, what, fallback, kinds)


def raise_root_error(
    comm: MPI.Comm,
    root: int,
    error: BaseException | None,
    what: str = "",
    *,
    fallback: type[Exception] = ArgumentError,
    kinds: Sequence[type[Exception]] = (),
) -> NoReturn:
    """Raise rank ``root``'s ``error`` on every rank of ``comm``. Collective.

    For when every rank already knows that ``root`` failed (a header or a
    flag it broadcast said so), so no vote is needed; ``error`` is read on
    ``root`` only. The class and message follow the same rules as in
    :func:`raise_if_any_failed`.
    """
    _raise_everywhere(comm, error, [root], what, fallback, kinds)


def _raise_everywhere(
    comm: MPI.Comm,
    error: BaseException | None,
    failed: list[int],
    what: str,
    fallback: type[Exception],
    kinds: Sequence[type[Exception]],
) -> NoReturn:
    """The first failing rank shares its error's class and text; every rank raises it."""
    classes = (*kinds, *_KNOWN)
    first = failed[0]
    code, text = -1, ""
    if comm.Get_rank() == first:
        code = next((k for k, cls in enumerate(classes) if type(error) is cls), -1)
        if error is None:  # a caller's bug: it announced a failure it did not have
            text = "an error was announced without an exception"
        else:
            text = str(error) if code >= 0 else f"{type(error).__name__}: {error}"
    kind = np.array([code], np.int64)
    if tracing.hooked:
        tracing.direct("broadcast", comm, kind.nbytes * (comm.Get_rank() == first), kind.nbytes)
    comm.Bcast(kind, first)
    message = broadcast_bytes(comm, text.encode(), first).decode()
    cls = classes[int(kind[0])] if kind[0] >= 0 else fallback
    head = f"{what}: " if what else ""
    raised = cls(f"{head}failed on rank(s) {failed} of {comm.Get_size()}; rank {first}: {message}")
    # Chain this rank's own failure, if it had one, so its traceback is kept.
    cause = error if comm.Get_rank() in failed else None
    raise raised from cause
