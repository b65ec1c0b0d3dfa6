"""Parallel ``.npy`` files: :func:`save` and :func:`load` with collective MPI-IO.

The file is NumPy's own format (``numpy.lib.format``): a header, then the
array's elements in C order (or, for ``fortran_order`` files, in the C order
of the transpose). No rank ever holds more than its block. Every rank sets a
file view that shows it only its block (an MPI subarray of the global shape,
or a plain displacement when the block is one contiguous run), then all ranks
move their blocks in the same collective calls (``Write_at_all`` /
``Read_at_all``), so the MPI library can merge neighbouring requests.

Counts in MPI calls are C ints: a block is moved in pieces of at most
``_CHUNK_BYTES`` per call, and every rank makes as many calls as the largest
block needs (a number every rank computes from the layout alone), so blocks
of more than ``2**31`` elements work and the progress bar moves.
"""

from __future__ import annotations

import importlib
import io
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from mpi4py import MPI

from dmesh.collectives import tracing
from dmesh.collectives.agreement import raise_if_any_failed
from dmesh.collectives.device import to_host
from dmesh.collectives.dtypes import SUPPORTED_CODES
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.collectives.headers import broadcast_bytes
from dmesh.convert import to_mesh_device
from dmesh.core.layout import Layout
from dmesh.core.placement import Shard
from dmesh.core.spec import DArraySpec
from dmesh.creation import _make_partial, _resolve
from dmesh.darray import DArray

__all__ = ["load", "read_header", "save"]

# Bytes one rank moves in one collective call: far below the 2**31-element
# limit of MPI counts for every itemsize, large enough that the calls' own
# cost (a synchronization each) stays small beside the transfer.
_CHUNK_BYTES = 64 * 2**20
# Files above this size show a tqdm bar on rank 0 when stdout is a terminal.
_PROGRESS_BYTES = 256 * 2**20

_format: Any = np.lib.format  # untyped in NumPy's stubs for some names


class _Header(NamedTuple):
    """What a ``.npy`` header says: the array and where its data starts."""

    shape: tuple[int, ...]
    dtype: np.dtype  # as stored in the file (byte order included)
    fortran_order: bool
    offset: int


def save(path: str | os.PathLike[str], a: DArray, *, sync: bool = False) -> None:
    """Write ``a`` to ``path`` as a standard ``.npy`` file (readable by ``np.load``).

    Collective over ``a.mesh``: every member writes its own block in place,
    nothing is gathered. ``Partial`` placements are reduced first; of the
    ranks holding copies of a block (replicas along mesh dims that do not
    shard the array), only the one at coordinate 0 of those dims writes it.
    The header is NumPy's (version 1.0, as ``np.save`` picks for these dtypes;
    2.0 for a header over 64 KiB), the data in C order and native byte order,
    which the header records. An existing file is overwritten and truncated.
    When ``save`` returns on the mesh's ranks the file is complete; with
    ``sync=True`` it is also on storage (``MPI_File_sync``: what checkpoints
    need; ``np.save`` does not sync either, and syncing costs a disk write
    the page cache would otherwise absorb). Unlike ``np.save``, no ``.npy``
    suffix is added to ``path``.
    On a rank outside the mesh it does nothing.

    Raises
    ------
    ArgumentTypeError
        On every rank, before any I/O, for a non-DArray, a bad ``path`` type or
        a dtype that has no ``.npy`` form here (object and other non-numeric
        dtypes).
    ArgumentError
        If the file cannot be opened for writing.
    """
    if not isinstance(a, DArray):
        raise ArgumentTypeError(f"save: expected a DArray, got {type(a).__name__}")
    path = _check_path(path, "save")
    if not isinstance(sync, bool):
        raise ArgumentTypeError(f"save: sync must be True or False, got {sync!r}")
    dtype = a.dtype
    if dtype.char not in SUPPORTED_CODES or not dtype.isnative:
        why = "Python objects would need pickle" if dtype.hasobject else "not a numeric dtype"
        raise ArgumentTypeError(
            f"save: dtype {dtype} cannot be written ({why}); dmesh.save writes bool, integer, "
            "float and complex arrays; convert with a.astype(...) first"
        )
    mesh = a.mesh
    if not mesh.is_member:
        return
    a = a.reduce_partials()
    layout = a.spec.layout
    coord = mesh.coordinate
    # One writer per block: replicas along non-sharding mesh dims stay silent.
    writer = all(c == 0 for c, p in zip(coord, layout.placements) if not isinstance(p, Shard))
    block = np.asarray(
        to_host(a.local), order="C"
    )  # staged through the host;  # (ascontiguousarray would make 0-d arrays 1-d)
    header = _header_bytes(a.shape, dtype)
    comm = mesh.comm()
    nbytes = math.prod(a.shape) * dtype.itemsize
    fh = _open(comm, path, MPI.MODE_WRONLY | MPI.MODE_CREATE, "save")
    try:
        fh.Set_size(len(header) + nbytes)  # truncates an older, longer file
        if comm.Get_rank() == 0:
            fh.Write_at(0, header)
        box = layout.block(coord) if writer else None
        label = _label(comm, "save", path, len(header) + nbytes)
        if tracing.hooked:  # in pieces of at most 64 MiB: recorded as one write
            tracing.direct("file_write_at_all", comm, block.nbytes * (box is not None), 0)
        _move(fh, fh.Write_at_all, block, a.shape, box, _largest_block(layout), len(header), label)
        if sync:
            fh.Sync()  # on storage before anyone returns (checkpoints rely on it)
    finally:
        fh.Close()


def load(path: str | os.PathLike[str], mesh: Any = None, placements: Any = None) -> DArray:
    """Read the ``.npy`` file at ``path`` into a DArray on ``mesh`` with ``placements``.

    Collective over ``mesh`` (default: the 1-D mesh over ``COMM_WORLD``):
    every member reads only its block, whatever mesh or program wrote the
    file (``np.save`` included). ``placements`` default to ``Shard(0)`` on
    the first mesh dim and ``Replicate()`` elsewhere, as for
    :func:`dmesh.distribute`; ``Partial`` placements hold the value at
    coordinate 0. Files in Fortran order are read exactly (each block is read
    from the transposed layout the file holds); files in non-native byte
    order are converted to native order after reading. On a CUDA mesh the
    block is read into host memory, then copied to the GPU. Rank 0 reads and
    checks the header and shares it, so a bad file raises the same error on
    every member; a rank outside the mesh reads the header alone and gets an
    empty block.

    Raises
    ------
    ArgumentError
        On every rank: the file is missing or unreadable, is not a ``.npy``
        file, or is shorter than its header says.
    UnsupportedError
        On every rank: the file holds Python objects (reading them would need
        pickle, which ``load`` never uses) or another non-numeric dtype.
    """
    path = _check_path(path, "load")
    mesh, _ = _resolve(mesh, None, 0)  # the mesh alone: placements need the header
    # A non-member joins no collective: it reads the header for the global shape itself.
    header = _agree_header(path, mesh.comm()) if mesh.is_member else read_header(path)
    shape = header.shape
    mesh, placements = _resolve(mesh, placements, len(shape))
    dtype = header.dtype.newbyteorder("=")
    layout = Layout.balanced(mesh.shape, placements, shape)
    spec = DArraySpec(mesh, layout, dtype)
    if not mesh.is_member:
        return DArray(to_mesh_device(np.empty(spec.local_shape(), dtype), mesh), spec)
    box = layout.block(mesh.coordinate)  # Partial dims are read whole, like Replicate
    file_shape = shape
    if header.fortran_order:  # the file holds the transpose in C order
        box, file_shape = box[::-1], shape[::-1]
    block = np.empty(tuple(stop - start for start, stop in box), header.dtype)
    comm = mesh.comm()
    nbytes = header.offset + math.prod(shape) * header.dtype.itemsize
    label = _label(comm, "load", path, nbytes)
    fh = _open(comm, path, MPI.MODE_RDONLY, "load")
    if tracing.hooked:
        tracing.direct("file_read_at_all", comm, 0, block.nbytes)
    try:
        _move(fh, fh.Read_at_all, block, file_shape, box, _largest_block(layout), header.offset,
              label)  # fmt: skip
    finally:
        fh.Close()
    if header.fortran_order:
        block = block.T
    block = block.astype(dtype, order="C", copy=False)  # C order, native bytes
    return DArray(_make_partial(to_mesh_device(block, mesh), mesh, placements), spec)


# -- header ------------------------------------------------------------------------
def _header_bytes(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """The header ``np.save`` writes for a C-order array of ``shape`` and ``dtype``."""
    fields = {"descr": _format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    out = io.BytesIO()
    try:
        _format.write_array_header_1_0(out, fields)
    except ValueError:  # over 65535 bytes: np.save's choice is 2.0 (3.0 is for UTF-8 names)
        out = io.BytesIO()
        _format.write_array_header_2_0(out, fields)
    return out.getvalue()


def read_header(path: str) -> _Header:
    """Parse and check ``path``'s header; local (raises ArgumentError or UnsupportedError)."""
    try:
        with open(path, "rb") as f:
            try:
                version = _format.read_magic(f)
                if version not in ((1, 0), (2, 0), (3, 0)):
                    raise ValueError(f"unknown format version {version}")
                # 3.0 differs from 2.0 only by UTF-8 field names, which no
                # dtype load accepts, so 2.0's reader serves both.
                reader = _format.read_array_header_1_0
                if version != (1, 0):
                    reader = _format.read_array_header_2_0
                shape, fortran_order, dtype = reader(f)
            except (ValueError, EOFError) as exc:
                raise ArgumentError(
                    f"load: {path!r} is not a valid .npy file ({exc}); write one with np.save "
                    "or dmesh.save"
                ) from exc
            offset = f.tell()
            size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise ArgumentError(f"load: cannot read {path!r}: {exc.strerror or exc}") from exc
    if dtype.hasobject:
        raise UnsupportedError(
            f"load: {path!r} holds Python objects (dtype {dtype}); reading them needs pickle "
            "(np.load(..., allow_pickle=True) on a trusted file), which dmesh.load never uses"
        )
    if dtype.char not in SUPPORTED_CODES:
        raise UnsupportedError(
            f"load: {path!r} has dtype {dtype}; dmesh.load reads bool, integer, float and "
            "complex arrays"
        )
    expected = offset + math.prod(shape) * dtype.itemsize
    if size < expected:
        raise ArgumentError(
            f"load: {path!r} is truncated: {size} bytes, but its header ({dtype}, shape "
            f"{shape}) needs {expected}; the file was not completely written"
        )
    return _Header(tuple(shape), dtype, bool(fortran_order), offset)


def _agree_header(path: str, comm: MPI.Intracomm) -> _Header:
    """Rank 0's reading of the header on every rank, or its error raised on every rank."""
    error: Exception | None = None
    text = b""
    if comm.Get_rank() == 0:  # one reader: every rank sees the same header
        try:
            h = read_header(path)
            fields = {"shape": h.shape, "descr": h.dtype.str, "fortran": h.fortran_order,
                      "offset": h.offset}  # fmt: skip
            text = json.dumps(fields).encode()
        except Exception as exc:  # ArgumentError, UnsupportedError: raised on every rank
            error = exc
    raise_if_any_failed(comm, error)
    fields = json.loads(broadcast_bytes(comm, text, 0).decode())
    shape = tuple(fields["shape"])
    return _Header(shape, np.dtype(fields["descr"]), fields["fortran"], fields["offset"])


# -- data ------------------------------------------------------------------------
def _largest_block(layout: Layout) -> int:
    """Elements in the layout's largest block, the same number on every rank.

    A mesh dim shards at most one array dim, so every combination of per-dim
    block lengths occurs at some coordinate: the largest block is the product
    of the largest lengths (also for the transposed layout of Fortran files).
    """
    return math.prod(max(layout.sizes(d)) for d in range(len(layout.shape)))


def _move(
    fh: MPI.File,
    call: Callable[[int, Any], Any],
    block: np.ndarray,
    shape: tuple[int, ...],
    box: tuple[tuple[int, int], ...] | None,
    largest: int,
    offset: int,
    label: str | None,
) -> None:
    """Move ``block``, the part ``box`` of the file's array of ``shape``, by ``call``.

    ``box`` None means nothing to move (a replica that does not write). Every
    rank makes the calls the ``largest`` block needs, moving what it has; the
    rank given a ``label`` shows a progress bar.
    """
    itemsize = block.dtype.itemsize
    chunk = max(1, _CHUNK_BYTES // itemsize)
    calls = -(-largest // chunk)
    count = 0 if box is None else block.size
    # The element as opaque bytes: the "native" representation converts nothing,
    # and not every MPI library has a type for every dtype (Open MPI 4.1 has none
    # for float16, whose view it refuses).
    etype = MPI.BYTE.Create_contiguous(itemsize).Commit()
    filetype = None
    flat = block.reshape(-1)
    bar = _progress_bar(label, calls)
    try:
        if box is None or count == 0:  # any view, zero elements (subarray sizes must be >= 1)
            fh.Set_view(offset, etype, etype, "native")
        else:
            displacement, filetype = _view(shape, box, etype)
            fh.Set_view(offset + displacement * itemsize, etype, filetype or etype, "native")
        for k in range(calls):
            start = min(k * chunk, count)
            stop = min(start + chunk, count)
            call(start, [flat[start:stop], stop - start, etype])
            if bar is not None:
                bar.update(1)
    finally:
        etype.Free()
        if filetype is not None:
            filetype.Free()
        if bar is not None:
            bar.close()


def _view(
    shape: tuple[int, ...], box: tuple[tuple[int, int], ...], etype: MPI.Datatype
) -> tuple[int, MPI.Datatype | None]:
    """The file view showing ``box`` of ``shape``: (displacement in elements, filetype).

    A dim is merged into the one outside it when the box takes it whole or
    takes one index of the outer dim: then the two are one run of the merged
    dim. A block that is one run of the file (a row block, a 1-D range) needs
    no derived type (filetype None); others get a subarray of few dims.
    """
    if not shape:
        return 0, None
    sizes, starts, subs = [shape[0]], [box[0][0]], [box[0][1] - box[0][0]]
    for n, (start, stop) in zip(shape[1:], box[1:]):
        if stop - start == n or subs[-1] == 1:
            starts[-1] = starts[-1] * n + start
            subs[-1] *= stop - start
            sizes[-1] *= n
        else:
            sizes.append(n)
            starts.append(start)
            subs.append(stop - start)
    if len(sizes) == 1:
        return starts[0], None
    # mpi4py uses MPI-4's large-count constructor where the library has one.
    filetype = etype.Create_subarray(sizes, subs, starts, order=MPI.ORDER_C).Commit()
    return 0, filetype


# -- helpers -------------------------------------------------------------------------
def _check_path(path: Any, what: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentTypeError(f"{what}: path must be a str or os.PathLike, got {path!r}")
    return os.fspath(path)


def _open(comm: MPI.Intracomm, path: str, mode: int, what: str) -> MPI.File:
    try:
        return MPI.File.Open(comm, path, mode)
    except MPI.Exception as exc:  # ROMIO shares the opener's error code with every rank
        raise ArgumentError(f"{what}: cannot open {path!r}: {exc.Get_error_string()}") from exc


def _label(comm: MPI.Intracomm, what: str, path: str, nbytes: int) -> str | None:
    """The progress bar's label on rank 0 for a file over ``_PROGRESS_BYTES``, else None."""
    if comm.Get_rank() != 0 or nbytes <= _PROGRESS_BYTES:
        return None
    return f"{what} {os.path.basename(path)}"


def _progress_bar(label: str | None, calls: int) -> Any:
    """A tqdm bar of ``calls`` steps when ``label`` is given and stdout is a terminal.

    None otherwise, and when tqdm is not installed (it is optional).
    """
    if label is None or not _on_terminal():
        return None
    try:
        tqdm = importlib.import_module("tqdm").tqdm  # optional: imported only when shown
    except ImportError:
        return None
    return tqdm(desc=label, total=calls, unit="chunk", leave=False)


def _on_terminal() -> bool:
    return sys.stdout.isatty()
