"""The hang watchdog (``DMESH_HANG_TIMEOUT=seconds``): report a blocked collective, abort.

A daemon thread per rank looks at the collective in progress (set by
``dmesh.collectives.tracing`` around each watched call and ``AsyncArray.wait``).
When one has been blocked longer than the timeout, the rank prints it, its
call site and the last collective it completed, waits briefly so that the
other blocked ranks print theirs, and aborts the job.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from mpi4py import MPI

from dmesh.collectives.errors import ArgumentError

__all__ = ["Watchdog", "from_environment"]


class Watchdog:
    """A daemon thread that aborts the job when one collective blocks too long."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.current: tuple[str, float] | None = None
        self.last = "none yet"
        thread = threading.Thread(target=self._run, name="dmesh-hang-watchdog", daemon=True)
        thread.start()

    def _run(self) -> None:
        period = min(max(self.timeout / 10, 0.05), 1.0)
        while True:
            time.sleep(period)
            current = self.current
            if current is None:
                continue
            text, started = current
            waited = time.monotonic() - started
            if waited < self.timeout:
                continue
            rank = MPI.COMM_WORLD.Get_rank()
            sys.stderr.write(
                f"[rank {rank}] dmesh hang watchdog: blocked for {waited:.1f} s "
                f"(DMESH_HANG_TIMEOUT={self.timeout:g}) in {text}\n"
                f"[rank {rank}] last completed collective: {self.last}\n"
                f"[rank {rank}] aborting the job (MPI.COMM_WORLD.Abort)\n"
            )
            sys.stderr.flush()
            # Let the other blocked ranks print theirs before the abort kills them.
            time.sleep(min(self.timeout, 2.0))
            MPI.COMM_WORLD.Abort(1)
            os._exit(1)  # pragma: no cover - Abort does not return


def from_environment() -> Watchdog | None:
    """A running watchdog if ``DMESH_HANG_TIMEOUT`` is set, else None."""
    text = os.environ.get("DMESH_HANG_TIMEOUT", "").strip()
    if not text:
        return None
    try:
        timeout = float(text)
    except ValueError:
        timeout = -1.0
    if not timeout > 0:
        raise ArgumentError(
            f"DMESH_HANG_TIMEOUT={text!r}: expected a number of seconds > 0; unset it to "
            "turn the hang watchdog off"
        )
    return Watchdog(timeout)
