"""Which device a mesh keeps its blocks on, and binding each rank to its GPU.

CuPy is imported only when a mesh asks for ``device="cuda"``, so ``import
dmesh`` never imports it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
from mpi4py import MPI

from dmesh.collectives.agreement import raise_if_any_failed
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, suggest

__all__ = ["DEVICES", "bind_cuda", "device_module", "validate_device"]

DEVICES = ("cpu", "cuda")
# Names people bring from other libraries, to point them at ours.
_DEVICE_HINTS = {"gpu": "cuda", "cupy": "cuda", "numpy": "cpu", "host": "cpu"}


def validate_device(device: object) -> str:
    """Return ``device`` if it is one of :data:`DEVICES`, else raise a teaching error."""
    if not isinstance(device, str):
        raise ArgumentTypeError(
            f"device: expected one of {list(DEVICES)}, got {type(device).__name__}: {device!r}"
        )
    if device in DEVICES:
        return device
    hint = _DEVICE_HINTS.get(device.lower())
    if device.lower().startswith("cuda:"):
        extra = "; give no index: each rank is bound to GPU local_rank % n_gpus"
    elif hint is not None:
        extra = f" (did you mean {hint!r}?)"
    else:
        extra = suggest(device, DEVICES)
    raise ArgumentError(f"device: {device!r} is not one of {list(DEVICES)}{extra}")


def device_module(device: str) -> ModuleType:
    """The array module of a mesh's ``device``: NumPy for ``"cpu"``, CuPy for ``"cuda"``.

    CuPy is imported here, on the first ``"cuda"`` request only.
    """
    return _import_cupy() if device == "cuda" else np


def _import_cupy() -> Any:
    import cupy

    return cupy


def bind_cuda(comm: MPI.Intracomm) -> None:
    """Make GPU ``local_rank % n_gpus`` current on every rank of ``comm``; collective.

    The local rank is the rank among the ranks of ``comm`` that share a node
    (``Split_type(COMM_TYPE_SHARED)``), so the ranks of a node spread over its
    GPUs.

    Raises
    ------
    ArgumentError
        On every rank, if CuPy cannot be imported or no GPU is visible on any
        rank.
    """
    problem: ArgumentError | None = None
    cupy: Any = None
    n_gpus = 0
    try:
        cupy = _import_cupy()
        n_gpus = int(cupy.cuda.runtime.getDeviceCount())
    except ImportError as exc:
        problem = ArgumentError(
            f"CuPy cannot be imported ({exc}); install the gpu extra: pip install 'dmesh[gpu]'"
        )
        problem.__cause__ = exc
    except Exception as exc:  # CuPy raises CUDARuntimeError when there is no driver
        problem = ArgumentError(f"CUDA reports no usable GPU ({type(exc).__name__}: {exc})")
        problem.__cause__ = exc
    if problem is None and n_gpus < 1:
        problem = ArgumentError(
            "no GPU is visible (check the node's GPUs and CUDA_VISIBLE_DEVICES)"
        )
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        local_rank = node.Get_rank()
    finally:
        node.Free()
    # The checks above used rank-local facts; agree on them before raising, or
    # the ranks that passed would wait forever in the next collective.
    raise_if_any_failed(comm, problem, "device='cuda'")
    cupy.cuda.Device(local_rank % n_gpus).use()
