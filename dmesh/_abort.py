"""An uncaught exception on one rank aborts the whole job.

Without this, a rank that dies of an exception leaves the others blocked in
their next collective until the job's time limit. :func:`install` (called when
``dmesh`` is imported) wraps ``sys.excepthook``: it prints the rank and the
traceback to stderr, each line prefixed with ``[rank R]`` and flushed, waits
half a second for the launcher to forward it, then calls
``MPI.COMM_WORLD.Abort(1)``.

- Installed only when ``COMM_WORLD`` has more than one rank (a lone rank exits
  normally) and not when ``DMESH_ABORT_ON_ERROR=0`` (interactive use, where a
  traceback should leave the session alive).
- ``KeyboardInterrupt`` aborts too: a Ctrl-C that reaches one rank ends the
  job. ``SystemExit`` never reaches ``sys.excepthook``; ``sys.exit`` is an
  ordinary exit.
- A hook installed before dmesh's (IPython's, a user's) still does the
  printing; dmesh adds the rank header and the abort.
- ``threading.excepthook`` is left alone: an exception in a worker thread ends
  that thread, not the rank's program, which goes on (and may still raise).
- Under pytest nothing changes: pytest catches the exceptions of tests,
  collection and its own internals, so ``sys.excepthook`` is not reached.
- Once MPI is finalized (an exception raised from a late ``atexit`` handler)
  no MPI call is made; the hook only prints.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from types import TracebackType

from mpi4py import MPI

ENV_VAR = "DMESH_ABORT_ON_ERROR"
ABORT_GRACE_SECONDS = 0.5


def _mpi_usable() -> bool:
    return bool(MPI.Is_initialized()) and not MPI.Is_finalized()


def _write(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # a closed or broken stderr must not prevent the abort
        pass


def install() -> None:
    """Wrap ``sys.excepthook`` so an uncaught exception aborts the job (once)."""
    if os.environ.get(ENV_VAR, "1") == "0" or getattr(sys.excepthook, "_dmesh_abort", False):
        return
    if not _mpi_usable() or MPI.COMM_WORLD.Get_size() <= 1:
        return
    previous = sys.excepthook
    rank = MPI.COMM_WORLD.Get_rank()
    size = MPI.COMM_WORLD.Get_size()

    def excepthook(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        prefix = f"[rank {rank}] "
        _write(
            f"{prefix}dmesh: uncaught {exc_type.__name__} on rank {rank} of {size}; "
            f"aborting the job (set {ENV_VAR}=0 to disable)\n"
        )
        if previous is sys.__excepthook__:
            lines = "".join(traceback.format_exception(exc_type, exc, tb)).splitlines()
            _write("".join(f"{prefix}{line}\n" for line in lines))
        else:
            try:
                previous(exc_type, exc, tb)
            finally:
                _write("")
        if _mpi_usable():
            # Let the launcher forward what was printed: MPI_Abort kills the
            # job at once, and a CI run once saw a 3-rank job end with exit 1
            # and an empty stderr, the traceback lost in MPICH's proxy.
            time.sleep(ABORT_GRACE_SECONDS)
            MPI.COMM_WORLD.Abort(1)

    excepthook._dmesh_abort = True  # type: ignore[attr-defined]
    sys.excepthook = excepthook
