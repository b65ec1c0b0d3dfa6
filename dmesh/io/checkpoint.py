"""Checkpoints: named DArrays and a metadata dict, saved atomically and checked on load.

A checkpoint is a directory holding one standard ``<name>.npy`` per array
(written and read in parallel by :mod:`dmesh.io.npy`) and ``manifest.json``:
format and library versions, the mesh at save time, each array's shape, dtype
(``dtype.str``), placements (``S(0)``, ``R``, ``P(sum)``) and checksum, and
the user's metadata. Nothing is pickled: JSON for the manifest, raw ``.npy``
for the data.

Atomicity. :func:`save_checkpoint` writes into a sibling
``<directory>.tmp-<token>`` (token drawn by rank 0, broadcast). Every rank
writes and syncs its blocks, reads back its share for the checksums, and the
ranks agree that all succeeded. Only then does rank 0 write and fsync the
manifest and commit: an existing checkpoint is renamed to
``<directory>.old-<token>``, the new one renamed into place (the commit
point), the parent directory fsynced and the old one removed. A failure on any
rank before the commit point makes every rank raise, and rank 0 removes the
temporary directory: the previous checkpoint is untouched. A crash between the
two renames leaves the previous checkpoint whole in ``<directory>.old-<token>``.

The manifest and the checksums are described in :mod:`dmesh.io.manifest`.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from dmesh.collectives import tracing
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, DMeshError, suggest
from dmesh.collectives.headers import broadcast_bytes
from dmesh.core.placement import Placement, normalize_placements
from dmesh.darray import DArray
from dmesh.io import npy as npy_io
from dmesh.io.manifest import (
    CHUNK_BYTES,
    DIGEST,
    MANIFEST,
    NAME,
    CheckpointError,
    Entry,
    agree,
    build_manifest,
    checksums,
    parse_manifest,
    read_manifest,
    saved_placements,
)
from dmesh.mesh import DeviceMesh

__all__ = ["CheckpointError", "load_checkpoint", "save_checkpoint"]

# For tests: called on every rank as ``_fault_hook("write", name)`` before each
# array is written; raising there is a rank failing part-way through a save.
_fault_hook: Callable[[str, str], None] | None = None


def save_checkpoint(
    directory: str | os.PathLike[str], arrays: Mapping[str, DArray], metadata: Any = None
) -> None:
    """Save ``arrays`` and ``metadata`` into ``directory``, replacing it atomically. Collective.

    Parameters
    ----------
    directory : str or path
        The checkpoint directory; its parent must exist. A checkpoint already
        there is replaced only once the new one is complete.
    arrays : dict of str to DArray
        Names (letters, digits, ``_ . -``, not starting with ``.`` or ``-``)
        to arrays on meshes over the same ranks; each becomes ``<name>.npy``.
    metadata : dict or None
        JSON-serializable user data (step, configuration); every rank must
        pass the same.

    Raises
    ------
    ArgumentError, ArgumentTypeError
        On every rank, before anything is written: bad names or arrays,
        metadata that is not JSON, or arguments that differ between ranks.
    CheckpointError
        On every rank when writing fails on any rank; the previous checkpoint
        in ``directory`` is then left as it was.

    Notes
    -----
    Ranks outside the arrays' mesh return at once.
    """
    target = _as_path(directory, "save_checkpoint")
    if not isinstance(arrays, Mapping) or not isinstance(next(iter(arrays.values()), 0), DArray):
        raise ArgumentTypeError(
            "save_checkpoint: arrays must be a dict of names to DArrays, at least one (its mesh "
            f"says which ranks save); got {type(arrays).__name__}"
        )
    mesh = next(iter(arrays.values())).mesh
    if not mesh.is_member:
        return
    comm = mesh.comm()
    error: BaseException | None = None
    entries: list[Entry] = []
    meta_text = ""
    try:
        entries = _describe(arrays, mesh)
        meta_text = _metadata_text(metadata)
    except DMeshError as exc:  # ranks may see different arguments: settled by the vote
        error = exc
    agree(comm, error)
    _same_everywhere(
        comm,
        {"directory": str(target), "arrays": repr(entries), "metadata": meta_text},
    )
    token = secrets.token_hex(8) if comm.Get_rank() == 0 else ""
    if comm.Get_rank() == 0:
        try:
            _make_temp(target, token)
        except Exception as exc:
            error = exc
    agree(comm, error)
    token = broadcast_bytes(comm, token.encode()).decode()
    temp = target.with_name(f"{target.name}.tmp-{token}")
    try:
        for name, a in arrays.items():
            try:
                if _fault_hook is not None:
                    _fault_hook("write", name)
            except Exception as exc:
                error = exc
            # Agreed before each collective write, so no rank that failed
            # leaves the others waiting inside one.
            agree(comm, error)
            try:
                npy_io.save(temp / f"{name}.npy", a, sync=True)
            except Exception as exc:
                error = exc
        agree(comm, error)
        sums = checksums(comm, temp, entries, CHUNK_BYTES)  # reads back what reached storage
        if comm.Get_rank() == 0:
            try:
                manifest = build_manifest(mesh, entries, sums, meta_text, CHUNK_BYTES)
                _commit(temp, target, token, manifest)
            except Exception as exc:
                error = exc
        agree(comm, error)
    except BaseException:
        if comm.Get_rank() == 0:  # every rank has left the writes: nothing uses temp
            shutil.rmtree(temp, ignore_errors=True)
        raise


def load_checkpoint(
    directory: str | os.PathLike[str], mesh: DeviceMesh, placements: Any = None
) -> tuple[dict[str, DArray], Any]:
    """Load a checkpoint saved by :func:`save_checkpoint` onto ``mesh``. Collective over the mesh.

    Parameters
    ----------
    directory : str or path
        The checkpoint directory.
    mesh : DeviceMesh
        Any mesh: rank count and shape need not be those at save time.
    placements : None, list of Placement, or dict of str to list of Placement
        None: each array's placements at save time when the mesh has as many
        dims (a ``Partial`` one holds the saved value at coordinate 0), else
        ``Shard(0)`` on the first mesh dim. A list: the same placements for
        every array. A dict: placements by array name, the default for the
        names it leaves out.

    Returns
    -------
    (dict of str to DArray, metadata)
        The arrays by name, in the order they were saved, and the metadata.

    Raises
    ------
    CheckpointError
        On every rank for a missing directory, manifest or file, a truncated
        file, a header that disagrees with the manifest, an unsupported
        (e.g. object) dtype or a checksum mismatch.

    Notes
    -----
    Ranks outside the mesh read only the manifest and get empty blocks.
    """
    path = _as_path(directory, "load_checkpoint")
    if not isinstance(mesh, DeviceMesh):
        raise ArgumentTypeError(
            f"load_checkpoint: mesh must be a DeviceMesh (dmesh.init_mesh), got "
            f"{type(mesh).__name__}"
        )
    if not isinstance(placements, (type(None), Mapping, list, tuple, Placement)):
        raise ArgumentTypeError(
            "load_checkpoint: placements must be None, one list of placements for every array, "
            f"or a dict of them by array name; got {type(placements).__name__}"
        )
    if not mesh.is_member:  # no communicator: the manifest alone gives shapes and dtypes
        entries, metadata, _ = parse_manifest(read_manifest(path), path)
        return _load_arrays(path, mesh, entries, placements), metadata
    comm = mesh.comm()
    text, error = b"", None
    if comm.Get_rank() == 0:  # one reader, its bytes broadcast: every rank sees one manifest
        try:
            text = read_manifest(path)
            parse_manifest(text, path)
        except Exception as exc:
            error = exc
    agree(comm, error)
    entries, metadata, chunk = parse_manifest(broadcast_bytes(comm, text), path)
    for entry, got in zip(entries, checksums(comm, path, entries, chunk)):
        if got != entry.checksum:  # the same digests on every rank: the same verdict
            raise CheckpointError(
                f"load_checkpoint: {path / (entry.name + '.npy')}: checksum mismatch (manifest "
                f"{entry.checksum}, file {got}): the data changed after it was saved"
            )
    return _load_arrays(path, mesh, entries, placements), metadata


# -- saving ------------------------------------------------------------------------------------


def _as_path(directory: Any, what: str) -> Path:
    if not isinstance(directory, (str, os.PathLike)):
        raise ArgumentTypeError(
            f"{what}: directory must be a str or path, got {type(directory).__name__}"
        )
    return Path(os.path.abspath(os.fspath(directory)))


def _describe(arrays: Mapping[str, DArray], mesh: DeviceMesh) -> list[Entry]:
    ranks = sorted(mesh.ranks.ravel().tolist())
    out = []
    for name, a in arrays.items():
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ArgumentError(
                f"save_checkpoint: array name {name!r} cannot name a file; use letters, digits "
                "and _ . - (not . or - first)"
            )
        if not isinstance(a, DArray):
            raise ArgumentTypeError(
                f"save_checkpoint: arrays[{name!r}] is a {type(a).__name__}, not a DArray; "
                "convert it with dmesh.distribute"
            )
        if a.mesh.size() != mesh.size() or sorted(a.mesh.ranks.ravel().tolist()) != ranks:
            raise ArgumentError(
                f"save_checkpoint: arrays[{name!r}] is on {a.mesh!r}, which covers other ranks "
                f"than the first array's {mesh!r}; redistribute it onto the same ranks"
            )
        out.append(Entry(name, a.shape, a.dtype, tuple(p.short() for p in a.placements)))
    return out


def _metadata_text(metadata: Any) -> str:
    if not isinstance(metadata, (dict, type(None))):
        raise ArgumentTypeError(
            f"save_checkpoint: metadata must be a dict or None, got {type(metadata).__name__}"
        )
    try:
        return json.dumps(metadata or {}, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(
            f"save_checkpoint: metadata is not JSON-serializable ({exc}); store str, int, "
            "float, bool, None, lists and dicts (NumPy scalars via .item())"
        ) from exc


def _make_temp(target: Path, token: str) -> None:
    """Rank 0: check that the target may be replaced; create the temporary sibling."""
    if not target.parent.is_dir():
        raise CheckpointError(f"save_checkpoint: {target.parent} is not an existing directory")
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise CheckpointError(f"save_checkpoint: {target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not (target / MANIFEST).is_file():
        raise CheckpointError(
            f"save_checkpoint: {target} is a non-empty directory without {MANIFEST}, not a "
            "checkpoint, so it is not replaced; choose another directory"
        )
    target.with_name(f"{target.name}.tmp-{token}").mkdir()


def _commit(temp: Path, target: Path, token: str, manifest: dict[str, Any]) -> None:
    """Rank 0: the manifest, then the renames; the commit point is ``os.replace(temp, target)``."""
    with open(temp / MANIFEST, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(temp)
    old = None
    if target.exists():  # a directory cannot be renamed over a non-empty one: move it aside
        old = target.with_name(f"{target.name}.old-{token}")
        os.replace(target, old)
    try:
        os.replace(temp, target)
    except BaseException:
        if old is not None:
            os.replace(old, target)  # put the previous checkpoint back
        raise
    _fsync_dir(target.parent)  # make the renames durable before the old copy goes
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)  # a leftover is harmless


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- loading -----------------------------------------------------------------------------------


def _load_arrays(
    path: Path, mesh: DeviceMesh, entries: list[Entry], placements: Any
) -> dict[str, DArray]:
    names = [e.name for e in entries]
    unknown = [n for n in placements if n not in names] if isinstance(placements, Mapping) else []
    if unknown:
        raise ArgumentError(
            f"load_checkpoint: placements for {unknown[0]!r}{suggest(str(unknown[0]), names)}, "
            f"which {path} does not hold; it holds {', '.join(names)}"
        )
    out = {}
    for entry in entries:
        chosen = placements.get(entry.name) if isinstance(placements, Mapping) else placements
        if chosen is None:
            chosen = saved_placements(entry, mesh.ndim)
        chosen = normalize_placements(chosen, mesh.ndim, len(entry.shape))
        out[entry.name] = npy_io.load(path / f"{entry.name}.npy", mesh, chosen)
    return out


# -- collective pieces -------------------------------------------------------------------------


def _same_everywhere(comm: MPI.Comm, values: dict[str, str]) -> None:
    """Raise ``ArgumentError`` on every rank naming what differs from rank 0's, if anything."""
    mine = [hashlib.blake2b(v.encode(), digest_size=DIGEST).digest() for v in values.values()]
    table = np.empty((comm.Get_size(), len(values) * DIGEST), np.uint8)
    if tracing.hooked:
        tracing.direct("all_gather", comm, table.shape[1], table.nbytes)
    comm.Allgather(np.frombuffer(b"".join(mine), np.uint8).copy(), table)
    for k, what in enumerate(values):
        column = table[:, k * DIGEST : (k + 1) * DIGEST]
        differ = [r for r in range(comm.Get_size()) if (column[r] != column[0]).any()]
        if differ:
            raise ArgumentError(
                f"save_checkpoint: the {what} argument on rank(s) {differ} differs from rank "
                "0's; every rank must pass the same"
            )
