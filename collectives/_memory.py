"""Keep large freed buffers in the heap instead of returning them to the kernel.

Functional collectives return a new array per call. With glibc's defaults an
array of several MiB is ``mmap``-ed on allocation and ``munmap``-ed on free, so
every call faults its pages in again, and MPI libraries that cache the memory
they map for shared-memory transfers lose that cache. Measured on the 2-core
dev machine at 2 ranks, MPICH 5: a 16 MiB ``Allreduce`` into a fresh array
took 12-15 ms against 5-6 ms into a preallocated one; with the settings below
both take 5-6 ms. MPI libraries that register memory (MVAPICH, Open MPI with
``leave_pinned``) change malloc's settings in the same way and for the same
reason.

Applied once when ``collectives`` is imported; ``DMESH_MALLOC_TUNING=0`` leaves
malloc alone. A no-op where libc is not glibc.
"""

from __future__ import annotations

import ctypes
import os
import sys

# mallopt parameters (glibc <malloc.h>).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_LIMIT = 1 << 30  # blocks up to 1 GiB come from (and return to) the heap

_applied = False


def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds to 1 GiB; return whether it was done."""
    global _applied
    if _applied:
        return True
    if os.environ.get("DMESH_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _applied = bool(mallopt(_M_MMAP_THRESHOLD, _LIMIT)) and bool(mallopt(_M_TRIM_THRESHOLD, _LIMIT))
    return _applied
