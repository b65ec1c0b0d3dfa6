"""Between NumPy arrays and DArrays: ``distribute`` and ``from_local``."""

from __future__ import annotations

from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh._device import device_module
from dmesh.collectives import tracing
from dmesh.collectives.agreement import raise_if_any_failed, raise_root_error
from dmesh.collectives.device import array_module, is_device_array, to_host, to_module
from dmesh.collectives.dtypes import check_dtype
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.collectives.headers import MAX_DIMS, all_gather_headers, decode_header, encode_header
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Shard
from dmesh.core.spec import DArraySpec
from dmesh.creation import _make_partial, _replicated_partials, _resolve, default_mesh
from dmesh.darray import DArray
from dmesh.mesh import DeviceMesh
from dmesh.redistribution import transfer

__all__ = ["blocks_on_host", "blocks_to", "distribute", "from_local", "to_mesh_device"]


def distribute(
    array: Any, mesh: Any = None, placements: Any = None, src: int | None = None
) -> DArray:
    """Split a full array into a DArray on ``mesh`` with ``placements``.

    With ``src=None`` every rank passes the same full array and keeps its own
    block (no communication). With ``src=r`` (a rank of ``mesh.comm()``), only
    rank ``r`` needs the data (the others may pass ``None``): its shape and
    dtype are broadcast, then each rank receives only its block, in one
    ``Alltoallv`` (collective over the mesh). Placements default to
    ``Shard(0)`` on the first mesh dim. ``Partial`` placements hold the value
    at mesh coordinate 0 and the reduction's identity elsewhere.
    """
    if src is None:
        array = _as_array(array)
        mesh, placements = _resolve(mesh, placements, array.ndim)
        layout = Layout.balanced(mesh.shape, placements, tuple(array.shape))
        spec = DArraySpec(mesh, layout, array.dtype)
        if mesh.coordinate is None:
            return DArray(array_module(array).empty(spec.local_shape(), array.dtype), spec)
        block = to_mesh_device(array[layout.slices(mesh.coordinate)].copy(), mesh)
        return DArray(_make_partial(block, mesh, placements), spec)
    return _distribute_from(array, mesh, placements, src)


def _as_array(array: Any) -> Any:
    if not is_device_array(array):
        array = np.asarray(array)
    check_dtype(array.dtype, "array")
    return array


def to_mesh_device(block: Any, mesh: Any) -> Any:
    """``block`` on the mesh's device: CuPy on a ``"cuda"`` mesh, else NumPy (copied if needed)."""
    return to_module(block, device_module(mesh.device))


def blocks_on_host(a: Any) -> tuple[Any, Any]:
    """``a`` with its block in host memory, and the array module to return it to.

    For kernels written with NumPy (the sample sort): stage with this, compute,
    and hand the result to :func:`blocks_to`. Values that are not DArrays pass
    through unchanged (module ``numpy``).
    """
    if not isinstance(a, DArray):
        return a, np
    xp = array_module(a.local)
    return (a, np) if xp is np else (DArray(to_host(a.local), a.spec), xp)


def blocks_to(result: Any, xp: Any) -> Any:
    """``result`` (a DArray, or a tuple of them and other values) with blocks moved to ``xp``."""
    if xp is np:
        return result
    if isinstance(result, DArray):
        return DArray(to_module(result.local, xp), result.spec)
    if isinstance(result, tuple):
        return type(result)(blocks_to(item, xp) for item in result)
    return result


def _distribute_from(array: Any, mesh: Any, placements: Any, src: int) -> DArray:
    mesh = default_mesh() if mesh is None else mesh
    if not isinstance(mesh, DeviceMesh):
        raise ArgumentTypeError(f"mesh: expected a DeviceMesh or None, got {type(mesh).__name__}")
    if not mesh.is_member:
        raise ArgumentError(
            "distribute(src=...): this rank is not a member of the mesh; call it on the "
            "mesh's ranks only (the others cannot learn the array's shape)"
        )
    comm = coll.resolve_group(mesh.comm())
    if not isinstance(src, int) or not 0 <= src < comm.Get_size():
        raise ArgumentError(
            f"src={src!r}: not a rank of the mesh; allowed: 0 to {comm.Get_size() - 1}"
        )
    header = np.zeros(2 + MAX_DIMS, dtype=np.int64)
    error = None
    if comm.Get_rank() == src:
        try:
            array = _as_array(array)
            header[:] = encode_header(array.shape, array.dtype)
        except Exception as exc:  # announced to every rank, then raised everywhere
            error, header[0] = exc, -1
    if tracing.hooked:
        tracing.direct("broadcast", comm, header.nbytes * (comm.Get_rank() == src), header.nbytes)
    comm.Bcast(header, src)
    if header[0] < 0:  # src announced an invalid array: every rank raises its error
        raise_root_error(comm, src, error, "distribute")
    shape, dtype, _ = decode_header(header)
    mesh, placements = _resolve(mesh, placements, len(shape))
    layout = Layout.balanced(mesh.shape, placements, shape)
    spec = DArraySpec(mesh, layout, dtype)
    xp = array_module(array) if comm.Get_rank() == src else np
    if not shape:  # a 0-d array: one value for everyone
        value = coll.broadcast(array if comm.Get_rank() == src else None, src, comm)
        return DArray(_make_partial(to_mesh_device(value, mesh), mesh, placements), spec)
    # The source layout: all of dim 0 on rank src of a 1-D view of the mesh.
    nranks = comm.Get_size()
    cut = tuple(0 if c <= src else shape[0] for c in range(nranks + 1))
    source = Layout.with_bounds((nranks,), (Shard(0),), shape, [cut] + [None] * (len(shape) - 1))
    target = Layout(
        layout.mesh_shape, _replicated_partials(layout.placements), shape, layout.bounds
    )
    local = array if comm.Get_rank() == src else xp.empty((0, *shape[1:]), dtype)
    ranks = tuple(range(nranks))
    block = transfer(local, source, ranks, target, ranks, comm, layout.local_shape(mesh.coordinate))
    return DArray(_make_partial(to_mesh_device(block, mesh), mesh, placements), spec)


def from_local(block: Any, mesh: Any = None, placements: Any = None, shape: Any = None) -> DArray:
    """A DArray made of each rank's ``block``, with no data moved.

    Without ``shape``, the ranks exchange their block shapes (collective over
    the mesh): blocks may be uneven, even empty, and the DArray keeps those
    boundaries; trailing dims and dtypes must agree, and a mismatch raises the
    same error on every rank. With ``shape``, the blocks must be those of the
    balanced layout (checked collectively). The DArray uses ``block`` as is.
    """
    block = _as_array(block)
    mesh, placements = _resolve(mesh, placements, block.ndim)
    block = to_mesh_device(block, mesh)
    if not mesh.is_member:
        dims = tuple(block.shape) if shape is None else tuple(shape)
        layout = Layout.balanced(mesh.shape, placements, dims)
        return DArray(block, DArraySpec(mesh, layout, block.dtype))
    comm = coll.resolve_group(mesh.comm())
    if shape is not None:
        layout = Layout.balanced(mesh.shape, placements, tuple(int(n) for n in shape))
        expected = layout.local_shape(mesh.coordinate)
        problem = None
        if tuple(block.shape) != expected:
            problem = ArgumentError(
                f"with shape={tuple(shape)} and placements {placements} the blocks must be "
                f"those of the balanced layout; this rank's block is {tuple(block.shape)}, "
                f"expected {expected}. Pass shape=None to keep uneven blocks"
            )
        raise_if_any_failed(comm, problem, "from_local")
        return DArray(block, DArraySpec(mesh, layout, block.dtype))
    headers = all_gather_headers(comm, block.shape, block.dtype)
    layout = _layout_from_blocks(mesh, placements, [h[0] for h in headers], [h[1] for h in headers])
    return DArray(block, DArraySpec(mesh, layout, block.dtype))


def _layout_from_blocks(
    mesh: Any, placements: Any, shapes: list[tuple[int, ...]], dtypes: list[np.dtype]
) -> Layout:
    """The layout the ranks' block shapes describe; the same verdict on every rank."""
    ndim = len(shapes[0])
    for rank, (shape, dtype) in enumerate(zip(shapes, dtypes)):
        if len(shape) != ndim or dtype != dtypes[0]:
            raise ArgumentError(
                f"from_local: the blocks must agree in ndim and dtype; rank 0 has "
                f"{dtypes[0]}{list(shapes[0])}, rank {rank} has {dtype}{list(shape)}"
            )
    coords = list(np.ndindex(*mesh.shape))
    global_shape: list[int] = []
    bounds: list[tuple[int, ...] | None] = []
    base = Layout(mesh.shape, placements, (0,) * ndim, (None,) * ndim)
    for d in range(ndim):
        mesh_dims = sharding_mesh_dims(placements, d)
        if not mesh_dims:
            lengths = {shape[d] for shape in shapes}
            if len(lengths) != 1:
                raise ArgumentError(
                    f"from_local: dim {d} is not sharded, so every block must have the same "
                    f"length along it; got {[s[d] for s in shapes]} (rank order)"
                )
            global_shape.append(lengths.pop())
            bounds.append(None)
            continue
        by_block: dict[int, int] = {}
        for coord, shape in zip(coords, shapes):
            number = base.block_number(coord, d)
            if by_block.setdefault(number, shape[d]) != shape[d]:
                raise ArgumentError(
                    f"from_local: ranks holding the same block of dim {d} (replicas along the "
                    f"other mesh dims) must agree in its length; got {[s[d] for s in shapes]}"
                )
        cut = [0]
        for number in range(len(by_block)):
            cut.append(cut[-1] + by_block[number])
        global_shape.append(cut[-1])
        bounds.append(tuple(cut))
    return Layout.with_bounds(mesh.shape, placements, tuple(global_shape), bounds)
