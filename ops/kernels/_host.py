"""Host staging for kernels written with NumPy: device (CuPy) blocks in, device blocks out.

The sort kernels index, search and merge with NumPy on the host; on a
``"cuda"`` mesh their input blocks are copied to host memory first and the
result blocks copied back, so they give the same answers on GPUs (the data
crosses PCIe twice; a CuPy-native sample sort would not).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.darray import DArray

__all__ = ["on_host", "to_device"]


def on_host(a: Any) -> tuple[Any, Any]:
    """``a`` with its block in host memory (unchanged if it is there), and its array module."""
    if not isinstance(a, DArray):
        return a, np
    xp = array_module(a.local)
    if xp is np:
        return a, np
    return DArray(xp.asnumpy(a.local), a.spec), xp


def to_device(result: Any, xp: Any) -> Any:
    """``result`` (a DArray or a tuple of them and other values) with blocks moved to ``xp``."""
    if xp is np:
        return result
    if isinstance(result, DArray):
        return DArray(xp.asarray(result.local), result.spec)
    if isinstance(result, tuple):
        return type(result)(to_device(item, xp) for item in result)
    return result
