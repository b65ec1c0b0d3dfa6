"""Creation functions of the Array API standard (2024.12): DArrays on a ``device=`` Sharding.

The device is a :class:`~dmesh.darray_array_api.Sharding` (a mesh and its
placements). The default is a 1-D mesh over ``MPI.COMM_WORLD`` with
``Shard(0)``, made at the first call (collective: every rank makes that call);
0-d arrays, and the mesh dims of a Sharding whose ``Shard`` dim the array does
not have, are ``Replicate``. Each rank computes only its own block (the
factories of :mod:`dmesh.creation`), except ``asarray`` of a NumPy/CuPy array or
a Python sequence, which every rank holds already and keeps its block of.
"""

from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np

from dmesh import creation as dc
from dmesh.array_api.data_types import COMPLEX, as_dtype
from dmesh.convert import distribute
from dmesh.core.placement import Placement, Replicate, Shard
from dmesh.creation import as_shape, default_mesh
from dmesh.darray import DArray
from dmesh.darray_array_api import Sharding
from dmesh.mesh import DeviceMesh

_NP: Any = np  # NumPy's functions dispatch DArrays to their distributed rules

__all__ = [
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
]  # fmt: skip


def default_device() -> Sharding:
    """``Shard(0)`` on a 1-D mesh over ``COMM_WORLD`` (made once, collectively)."""
    return Sharding(default_mesh(), (Shard(0),))


def _placement(device: Any, ndim: int, function: str) -> tuple[DeviceMesh, list[Placement]]:
    """The mesh and placements of ``device`` for an array of ``ndim`` dims."""
    if device is None:
        device = default_device()
    if not isinstance(device, Sharding):
        raise TypeError(
            f"{function}: device must be a dmesh.array_api.Sharding(mesh, placements) or None, "
            f"got {type(device).__name__}"
        )
    placements: list[Placement] = [
        Replicate() if isinstance(p, Shard) and not -ndim <= p.dim < ndim else p
        for p in device.placements
    ]
    return device.mesh, placements


def _dtype(dtype: Any, default: Any, function: str) -> np.dtype:
    return as_dtype(default if dtype is None else dtype, function)


def _scalar_dtype(value: Any) -> np.dtype:
    """The standard's default dtype for a Python scalar."""
    if isinstance(value, builtins.bool | np.bool_):
        return np.dtype(np.bool_)
    if isinstance(value, int | np.integer):
        return np.dtype(np.int64)
    if isinstance(value, float | np.floating):
        return np.dtype(np.float64)
    if isinstance(value, complex | np.complexfloating):
        return np.dtype(np.complex128)
    raise TypeError(f"expected a Python scalar (bool, int, float, complex), got {value!r}")


def _array(x: Any, function: str) -> DArray:
    if not isinstance(x, DArray):
        raise TypeError(
            f"{function}: expected a DArray, got {type(x).__name__}; use xp.asarray first"
        )
    return x


def _shape(shape: Any, function: str) -> tuple[int, ...]:
    return as_shape(shape, f"{function}: shape")


def empty(shape: Any, *, dtype: Any = None, device: Sharding | None = None) -> DArray:
    """``dmesh.empty``: uninitialized blocks (default float64)."""
    dims = _shape(shape, "empty")
    mesh, placements = _placement(device, len(dims), "empty")
    dt = _dtype(dtype, np.float64, "empty")
    return dc.empty(dims, mesh=mesh, placements=placements, dtype=dt)


def zeros(shape: Any, *, dtype: Any = None, device: Sharding | None = None) -> DArray:
    """``dmesh.zeros``: each rank allocates its block only (default float64)."""
    dims = _shape(shape, "zeros")
    mesh, placements = _placement(device, len(dims), "zeros")
    dt = _dtype(dtype, np.float64, "zeros")
    return dc.zeros(dims, mesh=mesh, placements=placements, dtype=dt)


def ones(shape: Any, *, dtype: Any = None, device: Sharding | None = None) -> DArray:
    """``dmesh.ones`` (default float64)."""
    dims = _shape(shape, "ones")
    mesh, placements = _placement(device, len(dims), "ones")
    dt = _dtype(dtype, np.float64, "ones")
    return dc.ones(dims, mesh=mesh, placements=placements, dtype=dt)


def full(
    shape: Any, fill_value: Any, *, dtype: Any = None, device: Sharding | None = None
) -> DArray:
    """``dmesh.full`` (default dtype from the Python scalar: bool, int64, float64, complex128)."""
    dims = _shape(shape, "full")
    mesh, placements = _placement(device, len(dims), "full")
    dt = _dtype(dtype, _scalar_dtype(fill_value), "full")
    return dc.full(dims, fill_value, mesh=mesh, placements=placements, dtype=dt)


def _like(x: Any, dtype: Any, device: Any, function: str) -> dict[str, Any]:
    x = _array(x, function)
    device = x.device if device is None else device
    mesh, placements = _placement(device, x.ndim, function)
    dt = _dtype(dtype, x.dtype, function)
    return {"mesh": mesh, "placements": placements, "dtype": dt}


def empty_like(x: DArray, /, *, dtype: Any = None, device: Sharding | None = None) -> DArray:
    """``dmesh.empty`` of ``x``'s shape (dtype and device default to ``x``'s)."""
    return dc.empty(_array(x, "empty_like").shape, **_like(x, dtype, device, "empty_like"))


def zeros_like(x: DArray, /, *, dtype: Any = None, device: Sharding | None = None) -> DArray:
    """``dmesh.zeros`` of ``x``'s shape (dtype and device default to ``x``'s)."""
    return dc.zeros(_array(x, "zeros_like").shape, **_like(x, dtype, device, "zeros_like"))


def ones_like(x: DArray, /, *, dtype: Any = None, device: Sharding | None = None) -> DArray:
    """``dmesh.ones`` of ``x``'s shape (dtype and device default to ``x``'s)."""
    return dc.ones(_array(x, "ones_like").shape, **_like(x, dtype, device, "ones_like"))


def full_like(
    x: DArray, /, fill_value: Any, *, dtype: Any = None, device: Sharding | None = None
) -> DArray:
    """``dmesh.full`` of ``x``'s shape (dtype and device default to ``x``'s)."""
    _scalar_dtype(fill_value)
    kw = _like(x, dtype, device, "full_like")
    return dc.full(x.shape, fill_value, **kw)


def arange(
    start: Any,
    /,
    stop: Any = None,
    step: Any = 1,
    *,
    dtype: Any = None,
    device: Sharding | None = None,
) -> DArray:
    """``dmesh.arange``: each rank computes its block (default int64 for ints, else float64)."""
    bounds = [start, step] if stop is None else [start, stop, step]
    for b in bounds:
        if isinstance(b, builtins.bool) or not isinstance(
            b, int | float | np.integer | np.floating
        ):
            raise TypeError(f"arange: start, stop and step must be real numbers, got {b!r}")
    if step == 0:
        raise ValueError("arange: step must not be zero")
    ints = all(isinstance(b, int | np.integer) for b in bounds)
    dt = _dtype(dtype, np.int64 if ints else np.float64, "arange")
    mesh, placements = _placement(device, 1, "arange")
    return dc.arange(start, stop, step, mesh=mesh, placements=placements, dtype=dt)


def eye(
    n_rows: int,
    n_cols: int | None = None,
    /,
    *,
    k: int = 0,
    dtype: Any = None,
    device: Sharding | None = None,
) -> DArray:
    """``dmesh.eye``: ones on diagonal ``k`` (default float64)."""
    rows = _shape(n_rows, "eye")[0]
    cols = rows if n_cols is None else _shape(n_cols, "eye")[0]
    offset = operator.index(k)
    mesh, placements = _placement(device, 2, "eye")
    dt = _dtype(dtype, np.float64, "eye")
    return dc.eye(rows, cols, offset, mesh=mesh, placements=placements, dtype=dt)


def linspace(
    start: Any,
    stop: Any,
    /,
    num: int,
    *,
    dtype: Any = None,
    device: Sharding | None = None,
    endpoint: bool = True,
) -> DArray:
    """``dmesh.linspace`` (complex: real and imaginary parts apart; default float64/complex128)."""
    n = _shape(num, "linspace")[0]
    is_complex = isinstance(start, complex) or isinstance(stop, complex)
    dt = _dtype(dtype, np.complex128 if is_complex else np.float64, "linspace")
    mesh, placements = _placement(device, 1, "linspace")
    kw: dict[str, Any] = {"mesh": mesh, "placements": placements}
    if not is_complex and dt not in COMPLEX:
        return dc.linspace(start, stop, n, endpoint, dtype=dt, **kw)
    a, b = complex(start), complex(stop)
    real_dt = np.finfo(dt).dtype if dt in COMPLEX else np.dtype(np.float64)
    re = dc.linspace(a.real, b.real, n, endpoint, dtype=real_dt, **kw)
    im = dc.linspace(a.imag, b.imag, n, endpoint, dtype=real_dt, **kw)
    out: DArray = (re + 1j * im).astype(dt)
    return out


def meshgrid(*arrays: DArray, indexing: str = "xy") -> tuple[DArray, ...]:
    """``_NP.meshgrid(*arrays, indexing=)`` of 1-D DArrays of one dtype (copies, not views)."""
    for x in arrays:
        if _array(x, "meshgrid").ndim != 1:
            raise ValueError(f"meshgrid: the arrays must be 1-D, got one of shape {x.shape}")
    if len({np.dtype(x.dtype) for x in arrays}) > 1:
        raise TypeError("meshgrid: the arrays must have one dtype")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    if not arrays:
        return ()
    return tuple(_NP.meshgrid(*arrays, indexing=indexing))


def tril(x: DArray, /, *, k: int = 0) -> DArray:
    """``_NP.tril(x, k)`` on the last two axes."""
    if _array(x, "tril").ndim < 2:
        raise ValueError(f"tril: x must have at least 2 dims, got shape {x.shape}")
    out: DArray = _NP.tril(x, k=operator.index(k))
    return out


def triu(x: DArray, /, *, k: int = 0) -> DArray:
    """``_NP.triu(x, k)`` on the last two axes."""
    if _array(x, "triu").ndim < 2:
        raise ValueError(f"triu: x must have at least 2 dims, got shape {x.shape}")
    out: DArray = _NP.triu(x, k=operator.index(k))
    return out


def asarray(
    obj: Any, /, *, dtype: Any = None, device: Sharding | None = None, copy: bool | None = None
) -> DArray:
    """A DArray of ``obj``.

    A DArray: itself, or a copy (``copy=True``), a cast (``dtype=``) or a
    redistribution (``device=``; ``copy=False`` then raises ``ValueError``). A
    NumPy/CuPy array, a Python scalar or a nested sequence: the full value, which
    every rank must pass alike, distributed (``dmesh.distribute``; each rank keeps
    its block). Default dtypes: bool, int64, float64, complex128.
    """
    dt = None if dtype is None else as_dtype(dtype, "asarray")
    if device is not None and not isinstance(device, Sharding):
        _placement(device, 0, "asarray")
    if isinstance(obj, DArray):
        return _redistribute(obj, dt, device, copy)
    if isinstance(obj, builtins.bool | int | float | complex):
        dt = _scalar_dtype(obj) if dt is None else dt
    if type(obj).__module__.split(".")[0] == "cupy":
        value = obj.astype(dt, copy=bool(copy)) if dt is not None else obj
    else:
        value = np.asarray(obj, dtype=dt, copy=copy)
        as_dtype(value.dtype, "asarray")
    mesh, placements = _placement(device, value.ndim, "asarray")
    return distribute(value, mesh, placements)


def _redistribute(x: DArray, dt: np.dtype | None, device: Any, copy: bool | None) -> DArray:
    same_dtype = dt is None or dt == x.dtype
    same_device = device is None or device == x.device
    if same_dtype and same_device:
        return x.copy() if copy else x
    if copy is False:
        raise ValueError("asarray: copy=False, but the dtype or device asked for needs a new array")
    out = x if same_dtype else x.astype(dt)
    if not same_device:
        mesh, placements = _placement(device, x.ndim, "asarray")
        out = out.to_device(Sharding(mesh, tuple(placements)))
    return out


def from_dlpack(x: Any, /, *, device: Sharding | None = None, copy: bool | None = None) -> DArray:
    """A DArray from ``x``. DLPack describes one block, not a distributed array.

    A DArray is returned as :func:`asarray` would (itself, a copy or moved to
    ``device``). Another DLPack producer (a NumPy array...) is taken as the full
    array every rank holds alike, and distributed as :func:`asarray` does.
    """
    if isinstance(x, DArray):
        return asarray(x, device=device, copy=copy)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(x).__name__} is not a DLPack producer")
    value = np.from_dlpack(x) if type(x).__module__.split(".")[0] != "cupy" else x
    return asarray(value, device=device, copy=copy)
