"""Files: what ``dmesh.save``/``load`` and the checkpoints send, write and read (pure).

``dmesh.io`` moves array data with collective MPI-IO: every rank writes or
reads its own block of the ``.npy`` file, nothing is gathered. ``CommMode``
records each block transfer as one ``file_write_at_all`` (input: the block's
bytes on a rank that writes it, 0 on a silent replica) or ``file_read_at_all``
(result: the block's bytes), over the whole mesh, besides the small dmesh
collectives that agree on errors (``all_gather`` of one byte per rank) and
share headers (``broadcast``). The ``*_traffic`` functions give those records
exactly; the ``*_file_bytes`` functions give what each rank writes to and
reads from the file system (:class:`FileBytes`), which no collective records:
the ``.npy`` headers rank 0 writes and reads, the blocks, the checksum
read-back of checkpoints and their manifest.

Not recorded, and not counted here: ``MPI_File_open``, ``set_size`` and
``close`` (collective over the mesh too: a synchronisation each), the
``MPI_File_sync`` of checkpoints, and the pieces of at most 64 MiB per rank
that one recorded transfer is made of (:func:`io_calls` counts them).

Two recording conventions to know (``dmesh.collectives``): a header
``broadcast`` made of two ``Bcast`` (length, bytes) is recorded as sent
``8 + len(bytes)`` on the root and received 8 on every rank, though the
other ranks receive ``8 + len(bytes)``; the checksum offsets' broadcast
records its ``8 k`` bytes received on every rank, the root included.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dmesh.core.placement import Partial, Placement, Shard
from dmesh.scaling.traffic import Call, Traffic, block_sizes, per_rank

__all__ = [
    "CHECKSUM_CHUNK_BYTES",
    "IO_CHUNK_BYTES",
    "ArrayFile",
    "FileBytes",
    "io_calls",
    "load_checkpoint_file_bytes",
    "load_checkpoint_traffic",
    "load_file_bytes",
    "load_traffic",
    "npy_header_bytes",
    "save_checkpoint_file_bytes",
    "save_checkpoint_traffic",
    "save_file_bytes",
    "save_traffic",
]

IO_CHUNK_BYTES = 64 * 2**20  # bytes one rank moves per MPI-IO call (dmesh.io.npy)
CHECKSUM_CHUNK_BYTES = 4 << 20  # a checkpoint's checksum chunk (dmesh.io.manifest)
_DIGEST = 16  # bytes of one chunk's digest
_TOKEN = 16  # hex characters of a checkpoint's temporary-directory token
_ARGUMENTS = 3  # the values save_checkpoint checks are the same on every rank

_format: Any = np.lib.format  # untyped in NumPy's stubs for some names


@dataclass(frozen=True)
class FileBytes:
    """One rank's file-system traffic: bytes it writes and bytes it reads."""

    written: int
    read: int


@dataclass(frozen=True)
class ArrayFile:
    """One array of a checkpoint: global shape, dtype, and its placements on the mesh.

    For saving, the placements it has; for loading, the placements it is
    loaded into (``Partial`` dims read the whole block, as ``Replicate``).
    """

    shape: tuple[int, ...]
    dtype: npt.DTypeLike
    placements: tuple[Placement, ...]


# -- .npy ---------------------------------------------------------------------------
def npy_header_bytes(
    shape: Sequence[int], dtype: npt.DTypeLike, fortran_order: bool = False
) -> int:
    """Bytes of the ``.npy`` header ``np.save`` and ``dmesh.save`` write before the data.

    NumPy pads it to a multiple of 64 bytes: 128 for every array of a few
    dims (version 1.0; 2.0 when the header passes 64 KiB).
    """
    fields = {
        "descr": _format.dtype_to_descr(np.dtype(dtype)),
        "fortran_order": fortran_order,
        "shape": tuple(shape),
    }
    out = io.BytesIO()
    try:
        _format.write_array_header_1_0(out, fields)
    except ValueError:
        out = io.BytesIO()
        _format.write_array_header_2_0(out, fields)
    return len(out.getvalue())


def io_calls(block_bytes: int) -> int:
    """MPI-IO calls every rank makes to move blocks of at most ``block_bytes`` (the largest).

    ``ceil(block_bytes / 64 MiB)`` (0 for an empty array), each a
    synchronisation of the mesh; ``CommMode`` records one ``file_*_at_all``
    whatever the count.
    """
    return -(-block_bytes // IO_CHUNK_BYTES)


def save_traffic(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    dtype: npt.DTypeLike,
    placements: Sequence[Placement],
) -> list[Traffic]:
    """``dmesh.save(path, a)``'s recorded calls: one ``file_write_at_all`` per rank.

    Over the whole mesh (``p`` ranks); its input is the rank's block,
    ``n s / p_S`` bytes for even blocks (``p_S``: the product of the sharding
    mesh dims), on the one rank per block at coordinate 0 of every other mesh
    dim, and 0 on the other replicas: a replicated array is written by rank 0
    alone. Nothing else is recorded (no header exchange, no vote). A
    ``Partial`` array is reduced first, as ``redistribute`` to ``Replicate``
    would be; this formula takes no ``Partial`` placement.
    """
    if any(isinstance(p, Partial) for p in placements):
        raise ValueError(
            f"save_traffic: placements {tuple(placements)} hold a Partial; dmesh.save reduces "
            "it first (a P -> R redistribution): give the reduced placements here"
        )
    size = len(_all_ranks(mesh_shape))
    itemsize = np.dtype(dtype).itemsize

    def calls(coord: tuple[int, ...]) -> list[Call]:
        block = _block_elements(mesh_shape, placements, shape, coord) * itemsize
        return [Call("file_write_at_all", size, block * _writes(placements, coord), 0)]

    return per_rank(mesh_shape, calls)


def save_file_bytes(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    dtype: npt.DTypeLike,
    placements: Sequence[Placement],
) -> list[FileBytes]:
    """What each rank writes in ``dmesh.save``: rank 0 the header, each writer its block.

    Rank 0 writes ``H`` (:func:`npy_header_bytes`, 128 bytes for a few dims)
    plus its block; every block is written once, so the ranks together write
    the file's size, ``H + n s``. Nothing is read.
    """
    header = npy_header_bytes(shape, dtype)
    return [
        FileBytes(calls[0].sent_bytes + header * (r == 0), 0)
        for r, calls in enumerate(save_traffic(mesh_shape, shape, dtype, placements))
    ]


def load_traffic(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    dtype: npt.DTypeLike,
    placements: Sequence[Placement],
    fortran_order: bool = False,
) -> list[Traffic]:
    """``dmesh.load(path, mesh, placements)``'s recorded calls, whatever wrote the file.

    Over the whole mesh of ``p`` ranks, in order: the vote on rank 0's header
    check (``all_gather``, 1 byte in, ``p`` out), the header's broadcast
    (sent ``8 + J`` on rank 0, ``J`` about 60 bytes of JSON; ``8 + J``
    received on every rank), and ``file_read_at_all`` of the rank's block (result
    ``n s / p_S`` bytes for even blocks; a replicated or ``Partial`` dim reads
    the whole extent). ``dtype`` is the file's (its byte order included) and
    ``fortran_order`` its header's flag (``np.save`` of a Fortran array).
    """
    size = len(_all_ranks(mesh_shape))
    file_dtype = np.dtype(dtype)
    fields = {
        "shape": list(shape),
        "descr": file_dtype.str,
        "fortran": fortran_order,
        "offset": npy_header_bytes(shape, file_dtype, fortran_order),
    }
    text = len(json.dumps(fields).encode())

    def calls(coord: tuple[int, ...]) -> list[Call]:
        root = not any(coord)
        block = _block_elements(mesh_shape, placements, shape, coord) * file_dtype.itemsize
        return [
            Call("all_gather", size, 1, size),
            Call("broadcast", size, (8 + text) * root, 8 + text),
            Call("file_read_at_all", size, 0, block),
        ]

    return per_rank(mesh_shape, calls)


def load_file_bytes(
    mesh_shape: Sequence[int],
    shape: Sequence[int],
    dtype: npt.DTypeLike,
    placements: Sequence[Placement],
    fortran_order: bool = False,
) -> list[FileBytes]:
    """What each rank reads in ``dmesh.load``: rank 0 the header, every rank its block.

    The header ``H`` once (rank 0 checks it), then each rank its block, so a
    replicated array is read ``p`` times over, ``p n s`` bytes in all. Nothing
    is written.
    """
    header = npy_header_bytes(shape, dtype, fortran_order)
    traffic = load_traffic(mesh_shape, shape, dtype, placements, fortran_order)
    return [FileBytes(0, t[2].received_bytes + header * (r == 0)) for r, t in enumerate(traffic)]


# -- checkpoints -----------------------------------------------------------------------
def save_checkpoint_traffic(
    mesh_shape: Sequence[int], arrays: Sequence[ArrayFile]
) -> list[Traffic]:
    """``dmesh.save_checkpoint(directory, arrays)``'s recorded calls, all arrays on one mesh.

    Over the mesh's ``p`` ranks, for ``k`` arrays, ``2k + 10`` calls: the
    vote on the arguments, their digests' ``all_gather`` (48 bytes in,
    ``48 p`` out), the vote on the temporary directory, the token's broadcast
    (24 bytes from rank 0, recorded received 8); per array a vote, then
    ``dmesh.save``'s ``file_write_at_all`` (:func:`save_traffic`); the vote
    on the writes, then the checksums: a vote on rank 0's header checks, the
    data offsets' broadcast (``8 k`` bytes), the ``all_gather`` of the chunk
    digests (16 bytes per 4 MiB chunk of the data: rank ``r`` hashes
    ``T/p`` of the ``T = sum_i ceil(n_i s_i / 4 MiB)`` chunks, everyone
    receives ``16 T``) and a vote on the read-back; last the vote on rank 0's
    commit. Every vote is an ``all_gather`` of 1 byte in, ``p`` out.
    """
    size = len(_all_ranks(mesh_shape))
    writes = [save_traffic(mesh_shape, a.shape, a.dtype, a.placements) for a in arrays]
    chunks = block_sizes(_checksum_chunks(arrays), size)
    vote = Call("all_gather", size, 1, size)

    def calls(coord: tuple[int, ...]) -> list[Call]:
        rank = _rank(mesh_shape, coord)
        out = [
            vote,
            Call("all_gather", size, _ARGUMENTS * _DIGEST, size * _ARGUMENTS * _DIGEST),
            vote,
            Call("broadcast", size, (8 + _TOKEN) * (rank == 0), 8 + _TOKEN),
        ]
        for write in writes:
            out += [vote, *write[rank]]
        return out + [vote, *_checksum_calls(size, rank, len(arrays), chunks), vote]

    return per_rank(mesh_shape, calls)


def save_checkpoint_file_bytes(
    mesh_shape: Sequence[int], arrays: Sequence[ArrayFile], manifest_bytes: int
) -> list[FileBytes]:
    """What each rank writes and reads in ``dmesh.save_checkpoint``.

    Written: each array's ``.npy`` as :func:`save_file_bytes`, and on rank 0
    the manifest (``manifest_bytes``, about 300 bytes plus 150 per array and
    the metadata's JSON). Read: the checksum read-back, rank ``r``'s share
    of the 4 MiB data chunks (``sum_i n_i s_i / p`` for many chunks; whole
    chunks, so one rank reads all of a small checkpoint), and on rank 0 every
    header ``H_i`` (checked against the manifest before the sums).
    """
    size = len(_all_ranks(mesh_shape))
    written = [0] * size
    for a in arrays:
        for r, f in enumerate(save_file_bytes(mesh_shape, a.shape, a.dtype, a.placements)):
            written[r] += f.written
    written[0] += manifest_bytes
    read = _checksum_reads(arrays, size)
    read[0] += _headers(arrays)
    return [FileBytes(w, r) for w, r in zip(written, read)]


def load_checkpoint_traffic(
    mesh_shape: Sequence[int], arrays: Sequence[ArrayFile], manifest_bytes: int
) -> list[Traffic]:
    """``dmesh.load_checkpoint(directory, mesh, placements)``'s recorded calls.

    ``arrays`` in the manifest's order, with the placements they are loaded
    into (any mesh: the one at save time does not matter), and
    ``manifest_bytes`` the size of ``manifest.json``. Over the mesh's ``p``
    ranks, ``3k + 6`` calls: the vote on rank 0's manifest read, the
    manifest's broadcast (``8 + manifest_bytes`` from rank 0, recorded
    received 8), the checksums as in :func:`save_checkpoint_traffic` (a vote,
    the offsets' broadcast, the digests' ``all_gather``, a vote), then
    ``dmesh.load`` per array (:func:`load_traffic`: a vote, the header's
    broadcast, ``file_read_at_all`` of the block).
    """
    size = len(_all_ranks(mesh_shape))
    reads = [load_traffic(mesh_shape, a.shape, a.dtype, a.placements) for a in arrays]
    chunks = block_sizes(_checksum_chunks(arrays), size)

    def calls(coord: tuple[int, ...]) -> list[Call]:
        rank = _rank(mesh_shape, coord)
        out = [
            Call("all_gather", size, 1, size),
            Call("broadcast", size, (8 + manifest_bytes) * (rank == 0), 8 + manifest_bytes),
            *_checksum_calls(size, rank, len(arrays), chunks),
        ]
        for read in reads:
            out += read[rank]
        return out

    return per_rank(mesh_shape, calls)


def load_checkpoint_file_bytes(
    mesh_shape: Sequence[int], arrays: Sequence[ArrayFile], manifest_bytes: int
) -> list[FileBytes]:
    """What each rank reads in ``dmesh.load_checkpoint``; nothing is written.

    Rank 0 reads the manifest and every header twice (once to check the
    files before the checksums, once in ``dmesh.load``); each rank its share
    of the checksum chunks (the data once over all ranks, ``sum_i n_i s_i``)
    and then its blocks, as :func:`load_file_bytes`. So the data is read
    twice for a sharded checkpoint, ``1 + p`` times for a replicated one.
    """
    size = len(_all_ranks(mesh_shape))
    read = _checksum_reads(arrays, size)
    read[0] += manifest_bytes + _headers(arrays)
    for a in arrays:
        for r, f in enumerate(load_file_bytes(mesh_shape, a.shape, a.dtype, a.placements)):
            read[r] += f.read
    return [FileBytes(0, r) for r in read]


# -- pieces --------------------------------------------------------------------------
def _all_ranks(mesh_shape: Sequence[int]) -> range:
    return range(math.prod(mesh_shape))


def _rank(mesh_shape: Sequence[int], coord: tuple[int, ...]) -> int:
    """The rank at ``coord`` of a mesh made by ``dmesh.init_mesh`` (row-major)."""
    return int(np.ravel_multi_index(coord, tuple(mesh_shape))) if coord else 0


def _block_elements(
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    shape: Sequence[int],
    coord: tuple[int, ...],
) -> int:
    """Elements of the block at ``coord``: each sharded dim split level by level."""
    count = 1
    for d, length in enumerate(shape):
        for m, p in enumerate(placements):
            if isinstance(p, Shard) and p.dim % max(len(shape), 1) == d:
                length = block_sizes(length, mesh_shape[m])[coord[m]]
        count *= length
    return count


def _writes(placements: Sequence[Placement], coord: tuple[int, ...]) -> bool:
    """Whether the rank at ``coord`` writes its block: coordinate 0 off the sharding dims."""
    return all(c == 0 for c, p in zip(coord, placements) if not isinstance(p, Shard))


def _nbytes(a: ArrayFile) -> int:
    return math.prod(a.shape) * np.dtype(a.dtype).itemsize


def _headers(arrays: Sequence[ArrayFile]) -> int:
    return sum(npy_header_bytes(a.shape, a.dtype) for a in arrays)


def _checksum_chunks(arrays: Sequence[ArrayFile]) -> int:
    """The checkpoint's checksum chunks: each file's data cut into 4 MiB pieces."""
    return sum(-(-_nbytes(a) // CHECKSUM_CHUNK_BYTES) for a in arrays)


def _checksum_calls(size: int, rank: int, count: int, chunks: Sequence[int]) -> list[Call]:
    """The checksums' calls: vote, offsets' broadcast, digests' all_gather, vote."""
    vote = Call("all_gather", size, 1, size)
    offsets = 8 * count
    return [
        vote,
        Call("broadcast", size, offsets * (rank == 0), offsets),
        Call("all_gather", size, _DIGEST * chunks[rank], _DIGEST * sum(chunks)),
        vote,
    ]


def _checksum_reads(arrays: Sequence[ArrayFile], size: int) -> list[int]:
    """Bytes each rank reads to hash its chunks (chunk ``k`` of all files goes to one rank)."""
    lengths = [
        min(CHECKSUM_CHUNK_BYTES, _nbytes(a) - start)
        for a in arrays
        for start in range(0, _nbytes(a), CHECKSUM_CHUNK_BYTES)
    ]
    counts = block_sizes(len(lengths), size)
    starts = np.cumsum((0, *counts))
    return [sum(lengths[starts[r] : starts[r + 1]]) for r in range(size)]
