"""The checkpoint format: ``manifest.json``, its entries, and checksums that ignore the layout.

A checkpoint directory holds one standard ``<name>.npy`` per array and
``manifest.json``: format and library versions, the mesh at save time, each
array's shape, dtype (``dtype.str``), placements (``S(0)``, ``R``,
``P(sum)``) and checksum, and the user's metadata. Nothing is pickled.

Checksums do not depend on the rank count or the placements: the data region
of each file (after the ``.npy`` header) is cut by file offset into chunks of
``chunk_bytes`` (recorded in the manifest); the chunks of all files are split
evenly over the ranks, each rank hashes its own (BLAKE2b, 16 bytes), the
digests are all-gathered in chunk order, and a file's checksum is the BLAKE2b
of its ordered digest list. Loading recomputes them the same way before
returning, so a changed byte anywhere is found.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from dmesh.collectives import tracing
from dmesh.collectives.agreement import raise_if_any_failed
from dmesh.collectives.dtypes import SUPPORTED_CODES
from dmesh.collectives.errors import DMeshError
from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.io import npy as npy_io
from dmesh.mesh import DeviceMesh

__all__ = [
    "CHUNK_BYTES",
    "DIGEST",
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "NAME",
    "CheckpointError",
    "Entry",
    "agree",
    "build_manifest",
    "checksums",
    "data_offsets",
    "parse_manifest",
    "read_manifest",
    "saved_placements",
]

FORMAT, FORMAT_VERSION, MANIFEST = "dmesh-checkpoint", 1, "manifest.json"
# Checksum chunk size for new checkpoints; each manifest records its own.
CHUNK_BYTES = 4 << 20
DIGEST = 16  # bytes of a chunk's BLAKE2b digest
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")  # a file name, never a path


class CheckpointError(DMeshError):
    """A checkpoint that cannot be saved or loaded: missing, truncated, corrupt or inconsistent."""


@dataclass(frozen=True)
class Entry:
    """One array as the manifest describes it."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    placements: tuple[str, ...]
    checksum: str = ""

    @property
    def nbytes(self) -> int:
        """Bytes of the array's data in its file (the header not counted)."""
        return math.prod(self.shape) * self.dtype.itemsize


def build_manifest(
    mesh: DeviceMesh, entries: list[Entry], sums: list[str], meta_text: str, chunk_bytes: int
) -> dict[str, Any]:
    """The manifest of a checkpoint whose checksums used chunks of ``chunk_bytes``."""
    try:
        version = importlib_metadata.version("dmesh")
    except importlib_metadata.PackageNotFoundError:
        version = "unknown"
    arrays = {
        e.name: {"shape": list(e.shape), "dtype": e.dtype.str, "placements": list(e.placements),
                 "checksum": total}
        for e, total in zip(entries, sums)
    }  # fmt: skip
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": version,
        "mesh": {"shape": list(mesh.shape), "names": list(mesh.names)},
        "checksum": {"algorithm": "blake2b-chunks", "chunk_bytes": chunk_bytes},
        "arrays": arrays,
        "metadata": json.loads(meta_text),
    }


def read_manifest(path: Path) -> bytes:
    """The manifest file's bytes in checkpoint directory ``path``; CheckpointError if absent.

    A missing directory names the ``.old-*`` directory an interrupted save
    left beside it, if there is one.
    """
    if not path.is_dir():
        old = sorted(p.name for p in path.parent.glob(f"{path.name}.old-*"))
        hint = f" ({old[0]} holds the checkpoint an interrupted save replaced)" if old else ""
        raise CheckpointError(f"load_checkpoint: {path} is not an existing directory{hint}")
    try:
        return (path / MANIFEST).read_bytes()
    except FileNotFoundError:
        raise CheckpointError(
            f"load_checkpoint: {path / MANIFEST} is missing: {path} is not a complete checkpoint"
        ) from None


def parse_manifest(text: bytes, path: Path) -> tuple[list[Entry], Any, int]:
    """The entries, the metadata and the checksum chunk size, every field checked."""

    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"load_checkpoint: {path / MANIFEST}: {why}")

    try:
        doc = json.loads(text.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError alike
        raise bad(f"not valid JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise bad(f"not a {FORMAT} manifest")
    if doc.get("format_version") != FORMAT_VERSION:
        raise bad(
            f"format version {doc.get('format_version')!r}; this dmesh reads {FORMAT_VERSION}"
        )
    checksum, arrays = doc.get("checksum"), doc.get("arrays")
    chunk = checksum.get("chunk_bytes") if isinstance(checksum, dict) else None
    if not isinstance(chunk, int) or chunk <= 0 or not isinstance(arrays, dict):
        raise bad("missing or malformed 'checksum' or 'arrays'")
    entries = []
    for name, item in arrays.items():
        try:
            shape = tuple(_json_int(n) for n in item["shape"])
            placements = tuple(str(p) for p in item["placements"])
            entry = Entry(name, shape, np.dtype(item["dtype"]), placements, str(item["checksum"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise bad(f"array {name!r}: malformed entry ({type(exc).__name__}: {exc})") from exc
        if not NAME.fullmatch(name) or min(shape, default=0) < 0:
            raise bad(f"array {name!r}: bad name or shape {list(shape)}")
        if entry.dtype.hasobject:
            raise bad(f"array {name!r} has an object dtype, which needs pickle; not loaded")
        if entry.dtype.char not in SUPPORTED_CODES:
            raise bad(f"array {name!r}: dtype {entry.dtype} is not supported by DArrays")
        entries.append(entry)
    return entries, doc.get("metadata", {}), chunk


def _json_int(value: Any) -> int:
    """``value`` as an int if JSON holds an integer there (not a bool or float)."""
    if type(value) is not int:
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def data_offsets(path: Path, entries: list[Entry]) -> list[int]:
    """Rank 0: where each file's data starts, its header and size checked against the manifest."""
    offsets = []
    for entry in entries:
        file = path / f"{entry.name}.npy"
        if not file.is_file():
            raise CheckpointError(f"load_checkpoint: {file} is missing")
        try:  # the .npy reader's own checks: format, object dtype, truncation
            header = npy_io.read_header(str(file))
        except DMeshError as exc:
            raise CheckpointError(f"load_checkpoint: {exc}") from exc
        if header.shape != entry.shape or header.dtype != entry.dtype or header.fortran_order:
            order = " (Fortran order)" if header.fortran_order else ""
            raise CheckpointError(
                f"load_checkpoint: {file}: its header says {header.dtype.str}"
                f"{list(header.shape)}{order}, the manifest {entry.dtype.str}{list(entry.shape)}"
            )
        if file.stat().st_size != header.offset + entry.nbytes:
            raise CheckpointError(
                f"load_checkpoint: {file}: {file.stat().st_size - header.offset} bytes of data, "
                f"the manifest says {entry.nbytes}"
            )
        offsets.append(header.offset)
    return offsets


def saved_placements(entry: Entry, mesh_ndim: int) -> list[Placement]:
    """The placements at save time if they fit a mesh of ``mesh_ndim`` dims, else the default."""
    saved: list[Placement] = []
    for text in entry.placements if len(entry.placements) == mesh_ndim else ():
        match = re.fullmatch(r"S\((\d+)\)|P\((\w+)\)|R", text)
        try:
            saved.append(
                Replicate() if match is None or text == "R"
                else Shard(int(match[1])) if match[1] else Partial(match[2])
            )  # fmt: skip
        except DMeshError:  # an op this dmesh does not know
            break
        if match is None or (match[1] and int(match[1]) >= len(entry.shape)):
            break
    if len(saved) == mesh_ndim:
        return saved
    first: Placement = Shard(0) if entry.shape else Replicate()
    return [first] + [Replicate()] * (mesh_ndim - 1)


def checksums(comm: MPI.Comm, path: Path, entries: list[Entry], chunk: int) -> list[str]:
    """Each file's checksum, the same on every rank; raises on every rank for a bad file."""
    offsets, error = np.zeros(len(entries), np.int64), None
    if comm.Get_rank() == 0:
        try:
            offsets[:] = data_offsets(path, entries)
        except Exception as exc:
            error = exc
    agree(comm, error)
    if tracing.hooked:
        tracing.direct("broadcast", comm, offsets.nbytes * (comm.Get_rank() == 0), offsets.nbytes)
    comm.Bcast(offsets, 0)
    # Chunk k of the whole checkpoint is chunk k - starts[i] of file i.
    starts = np.cumsum([0] + [-(-e.nbytes // chunk) for e in entries])
    size, rank, total = comm.Get_size(), comm.Get_rank(), int(starts[-1])
    counts = [total // size + (r < total % size) for r in range(size)]
    first = sum(counts[:rank])
    mine = np.zeros((counts[rank], DIGEST), np.uint8)
    try:
        for i, entry in enumerate(entries):
            lo, hi = max(first, starts[i]), min(first + counts[rank], starts[i + 1])
            if lo >= hi:
                continue
            with open(path / f"{entry.name}.npy", "rb") as f:
                for k in range(lo, hi):
                    start = int(k - starts[i]) * chunk
                    length = min(chunk, entry.nbytes - start)
                    data = os.pread(f.fileno(), length, int(offsets[i]) + start)
                    if len(data) != length:
                        raise CheckpointError(f"load_checkpoint: {f.name}: truncated")
                    mine[k - first] = np.frombuffer(
                        hashlib.blake2b(data, digest_size=DIGEST).digest(), np.uint8
                    )
    except Exception as exc:  # reported after the gather, which every rank must join
        error = exc
    digests = np.empty((total, DIGEST), np.uint8)
    if tracing.hooked:
        tracing.direct("all_gather", comm, mine.nbytes, digests.nbytes)
    comm.Allgatherv(mine, [digests, [n * DIGEST for n in counts]])
    agree(comm, error)
    out = []
    for i, entry in enumerate(entries):
        h = hashlib.blake2b(f"{entry.nbytes}:{chunk}:".encode(), digest_size=32)
        h.update(digests[starts[i] : starts[i + 1]].tobytes())
        out.append(h.hexdigest())
    return out


def agree(comm: MPI.Comm, error: BaseException | None) -> None:
    """Raise on every rank the error of the lowest rank that has one; return if none has.

    dmesh's own errors keep their class; anything else (an ``OSError``...)
    arrives as a :class:`CheckpointError` naming its class.
    """
    raise_if_any_failed(comm, error, fallback=CheckpointError, kinds=(CheckpointError,))
