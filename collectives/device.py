"""NumPy or CuPy: which array module a buffer belongs to, and how it reaches MPI.

CuPy is never imported here: an array is a CuPy array only if CuPy is already
in ``sys.modules`` (the array-api-compat approach), so ``import collectives``
stays free of GPU libraries.

Device buffers go to MPI directly when the MPI library is CUDA-aware, after
synchronizing the current stream: CuPy kernels run asynchronously, and MPI
reads memory with no knowledge of streams, so without the synchronization it
may send data the kernel has not written yet. Otherwise they are staged
through host memory. Awareness is decided once per communicator (see
:func:`cuda_aware`).
"""

from __future__ import annotations

import ctypes
import os
import sys
from types import ModuleType
from typing import Any

import numpy as np
from mpi4py import MPI

from dmesh.collectives.errors import ArgumentError

_aware_by_comm: dict[int, bool] = {}


def cupy_module() -> ModuleType | None:
    """CuPy if the program has imported it, else ``None``."""
    return sys.modules.get("cupy")


def is_device_array(x: Any) -> bool:
    """True for a ``cupy.ndarray``."""
    cp = cupy_module()
    return cp is not None and isinstance(x, cp.ndarray)


def array_module(x: Any) -> ModuleType:
    """``cupy`` for device arrays, ``numpy`` otherwise."""
    cp = cupy_module()
    if cp is not None and isinstance(x, cp.ndarray):
        return cp
    return np


def to_host(x: Any) -> np.ndarray:
    """``x`` as a NumPy array: a CuPy array is copied to host memory, others are not copied.

    The one host-staging step of dmesh: kernels written with NumPy (sample
    sort, the small matrices of TSQR, index routing), ``.npy`` writes and
    ``full_array`` on a CPU mesh use it.
    """
    if type(x) is np.ndarray:
        return x
    if is_device_array(x):
        return np.asarray(x.get())
    return np.asarray(x)


def to_module(x: Any, xp: ModuleType) -> Any:
    """``x`` as an array of ``xp`` (``numpy`` or ``cupy``); copied only across devices.

    The way back from :func:`to_host` (``xp`` is then the module
    :func:`array_module` named before staging).
    """
    if xp is np:
        return to_host(x)
    return xp.asarray(x)


class Transport:
    """How the buffers of one call reach MPI: host arrays, device pointers or staging."""

    __slots__ = ("direct", "on_device", "xp")

    def __init__(self, on_device: bool, direct: bool, xp: ModuleType) -> None:
        self.on_device = on_device
        self.direct = direct
        self.xp = xp

    def staged(self) -> Transport:
        """This transport, but through host memory (for reduce ops MPI runs on the host only)."""
        return Transport(self.on_device, False, self.xp) if self.direct else self

    def outgoing(self, buf: Any) -> Any:
        """What to hand MPI as a send buffer."""
        if not self.on_device:
            return buf
        if self.direct:
            self.xp.cuda.get_current_stream().synchronize()
            return buf
        return self.xp.asnumpy(buf)

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """A receive buffer MPI can write to (C-contiguous)."""
        if self.on_device and self.direct:
            return self.xp.empty(shape, dtype)
        return np.empty(shape, dtype)

    def incoming(self, buf: Any) -> Any:
        """The received buffer as an array of the caller's module."""
        if self.on_device and not self.direct:
            return self.xp.asarray(buf)
        return buf


HOST = Transport(False, False, np)


def transport_for(x: Any, comm: MPI.Intracomm) -> Transport:
    """The transport for arrays like ``x`` on ``comm``."""
    if type(x) is np.ndarray:
        return HOST
    cp = cupy_module()
    if cp is None or not isinstance(x, cp.ndarray):
        return HOST
    return Transport(True, cuda_aware(comm), cp)


def transport_for_device(on_device: bool, comm: MPI.Intracomm) -> Transport:
    """The transport for a call whose data lives on the GPU (``on_device``) or not.

    For ranks that learn the device from a header (``broadcast``/``scatter``
    receivers): CuPy is imported here only when the sender's data is on a GPU.
    """
    if not on_device:
        return HOST
    import cupy

    return Transport(True, cuda_aware(comm), cupy)


def cuda_aware(comm: MPI.Intracomm) -> bool:
    """Whether device buffers can be passed to MPI on ``comm`` (collective on first call).

    ``DMESH_GPU_AWARE_MPI=0|1`` forces the answer. Otherwise, when the library
    says it is not CUDA-aware (``MPIX_Query_cuda_support``, offered by MPICH and
    Open MPI) the answer is no, without touching device memory from MPI (a
    non-aware library would crash reading it). Else a functional probe sends a
    device buffer to this rank itself and checks what arrived; the ranks then
    agree (logical and), so every rank takes the same path.
    """
    forced = os.environ.get("DMESH_GPU_AWARE_MPI")
    if forced is not None:  # read on every call, so that it can be changed at run time
        if forced not in ("0", "1"):
            raise ArgumentError(f"DMESH_GPU_AWARE_MPI must be 0 or 1, got {forced!r}")
        return forced == "1"
    key = comm.py2f()
    known = _aware_by_comm.get(key)
    if known is None:
        local = _library_says_aware() and _probe(comm)
        known = bool(comm.allreduce(local, op=MPI.LAND))
        _aware_by_comm[key] = known
    return known


def _library_says_aware() -> bool:
    for path in _loaded_mpi_libraries():
        try:
            query = ctypes.CDLL(path).MPIX_Query_cuda_support
        except (AttributeError, OSError):
            continue
        query.restype = ctypes.c_int
        return bool(query())
    return True  # the library does not say: let the probe decide


def _loaded_mpi_libraries() -> list[str]:
    """Paths of the MPI shared libraries mapped into this process (Linux)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libmpi" in line and "/" in line}
    except OSError:
        return []
    return sorted(paths)


def _probe(comm: MPI.Intracomm) -> bool:
    cp = cupy_module()
    if cp is None:
        return False
    sent = cp.arange(16, dtype=cp.float64)
    received = cp.zeros(16, dtype=cp.float64)
    cp.cuda.get_current_stream().synchronize()
    rank = comm.Get_rank()
    try:
        comm.Sendrecv(sent, dest=rank, sendtag=7, recvbuf=received, source=rank, recvtag=7)
    except MPI.Exception:
        return False
    return bool((received == sent).all())
