"""The file formulas of ``dmesh.scaling.io`` against ``CommMode``'s records and the files.

On every 1-D and 2-D mesh of the world size: ``dmesh.save`` of sharded,
replicated and 2-D-sharded arrays, ``dmesh.load`` into other layouts and of
files ``np.save`` wrote on one rank (C and Fortran order), and checkpoints of
several arrays saved and loaded (onto the saving mesh, and onto the 1-D one).
Shapes give even, uneven and empty blocks at 1-4 ranks; dtypes are float64,
int32, complex128 and float32. Each call's collectives must be the formula's,
exactly; the file bytes the formulas give must add up to the files' sizes and
each rank's block; the data must be NumPy's.
"""

from __future__ import annotations

import itertools
import os
from functools import partial
from pathlib import Path

import numpy as np
from mpi4py import MPI
from traffic_checks import check_traffic, rank_index, recorded

import dmesh
from dmesh import Replicate, Shard
from dmesh.core.placement import Placement
from dmesh.scaling.io import (
    ArrayFile,
    load_checkpoint_file_bytes,
    load_checkpoint_traffic,
    load_file_bytes,
    load_traffic,
    npy_header_bytes,
    save_checkpoint_file_bytes,
    save_checkpoint_traffic,
    save_file_bytes,
    save_traffic,
)
from helpers import Verdict

WORLD = MPI.COMM_WORLD.Get_size()
# (shape, dtype): 8 rows split evenly at 1, 2 and 4 ranks; 5 and 3 rows leave
# uneven blocks, and 3 rows an empty one at 4 ranks.
CASES = [((8, 3), np.float64), ((5, 2), np.int32), ((3,), np.complex128)]


def layouts(ndim: int, mesh_ndim: int) -> list[tuple[Placement, ...]]:
    """Every placement of an ``ndim``-D array over ``mesh_ndim`` mesh dims, Partial aside."""
    choices = [Replicate(), *(Shard(d) for d in range(ndim))]
    return list(itertools.product(choices, repeat=mesh_ndim))


def data_of(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    values = np.arange(1, 1 + int(np.prod(shape))).reshape(shape)
    return (values * (1 + 1j) if dtype is np.complex128 else values).astype(dtype)


def expect_block(v: Verdict, a: dmesh.DArray, full: np.ndarray, label: str) -> None:
    """``a``'s local block is ``full``'s part at this rank's coordinate."""
    block = full[a.spec.layout.slices(a.mesh.coordinate)]
    v.check(np.array_equal(np.asarray(a.local), block), f"{label}: wrong block")


def test_save_and_load(traffic_mesh: dmesh.DeviceMesh, tmp: Path) -> None:
    m = traffic_mesh
    me = rank_index(m)
    v = Verdict(m.comm())
    for shape, dtype in CASES:
        full = data_of(shape, dtype)
        options = layouts(len(shape), m.ndim)
        for k, placements in enumerate(options):
            label = f"{np.dtype(dtype)}{list(shape)} {placements}"
            path = tmp / f"a{k}.npy"
            x = dmesh.distribute(full, m, list(placements))
            _, got = recorded(partial(dmesh.save, path, x))
            check_traffic(m, save_traffic(m.shape, shape, dtype, placements), got, "save " + label)
            written = save_file_bytes(m.shape, shape, dtype, placements)
            header = npy_header_bytes(shape, dtype)
            m.comm().Barrier()  # every block is in the file
            v.check(sum(f.written for f in written) == os.path.getsize(path), f"{label}: size")
            mine = written[me].written - header * (me == 0)
            v.check(mine in (0, x.local.nbytes), f"{label}: rank {me} writes {mine} bytes")
            v.check(np.array_equal(np.load(path), full), f"{label}: file")
            # Back into another layout of the same mesh.
            into = options[(k + 1) % len(options)]
            y, got = recorded(partial(dmesh.load, path, m, list(into)))
            check_traffic(m, load_traffic(m.shape, shape, dtype, into), got, "load " + label)
            read = load_file_bytes(m.shape, shape, dtype, into)[me].read
            v.check(read == y.local.nbytes + header * (me == 0), f"{label}: read {read}")
            expect_block(v, y, full, f"load {label} into {into}")
    v.agree()


def test_load_numpy_files(traffic_mesh: dmesh.DeviceMesh, tmp: Path) -> None:
    """Files one rank wrote with ``np.save`` (another rank count), C and Fortran order."""
    m = traffic_mesh
    v = Verdict(m.comm())
    files = []
    for k, (shape, dtype) in enumerate([((5, 3), np.int32), ((4, 2), np.complex128)]):
        full = data_of(shape, dtype)
        for fortran in (False, True):
            path = tmp / f"n{k}{'f' * fortran}.npy"
            if m.comm().Get_rank() == 0:
                np.save(path, np.asfortranarray(full) if fortran else full)
            files.append((path, shape, dtype, fortran, full))
    m.comm().Barrier()
    for path, shape, dtype, fortran, full in files:
        for into in layouts(len(shape), m.ndim)[:: 2 + fortran]:
            label = f"{path.name} into {into}"
            y, got = recorded(partial(dmesh.load, path, m, list(into)))
            predicted = load_traffic(m.shape, shape, dtype, into, fortran_order=fortran)
            check_traffic(m, predicted, got, label)
            header = npy_header_bytes(shape, dtype, fortran)
            v.check(header == os.path.getsize(path) - full.nbytes, f"{label}: header")
            expect_block(v, y, full, label)
    v.agree()


def checkpoint_arrays(mesh_ndim: int) -> dict[str, tuple[np.ndarray, tuple[Placement, ...]]]:
    """Arrays of four dtypes, sharded, replicated and empty, one over 4 MiB (two chunks)."""
    first = (Shard(0),) + (Replicate(),) * (mesh_ndim - 1)
    last = (Replicate(),) * (mesh_ndim - 1) + (Shard(0),)
    both = (Shard(0), Shard(1)) if mesh_ndim == 2 else (Shard(1),)
    return {
        "a": (data_of((5, 3), np.float64), first),
        "b": (data_of((7,), np.int32), (Replicate(),) * mesh_ndim),
        "c": (data_of((3, 2), np.complex128), both),
        "e": (np.zeros((0, 3), np.float32), last),
        "big": (np.arange((4 << 20) // 8 + 3, dtype=np.float64), first),
    }


def test_checkpoint(traffic_mesh: dmesh.DeviceMesh, tmp: Path) -> None:
    m = traffic_mesh
    v = Verdict(m.comm())
    source = checkpoint_arrays(m.ndim)
    arrays = {name: dmesh.distribute(a, m, list(p)) for name, (a, p) in source.items()}
    files = [ArrayFile(a.shape, a.dtype, p) for a, p in source.values()]
    directory = tmp / "ck"
    _, got = recorded(lambda: dmesh.save_checkpoint(directory, arrays, {"step": 3}))
    check_traffic(m, save_checkpoint_traffic(m.shape, files), got, "save_checkpoint")
    m.comm().Barrier()
    manifest = os.path.getsize(directory / "manifest.json")
    on_disk = sum(os.path.getsize(f) for f in directory.iterdir())
    saved = save_checkpoint_file_bytes(m.shape, files, manifest)
    v.check(sum(f.written for f in saved) == on_disk, f"written {saved}, files {on_disk}")
    headers = sum(npy_header_bytes(f.shape, f.dtype) for f in files)
    data = sum(a.nbytes for a, _ in source.values())
    v.check(sum(f.read for f in saved) == data + headers, f"read back {saved}")

    # Loaded into other placements on the same mesh.
    into = {name: p[::-1] for name, (_, p) in source.items()}
    loaded = [ArrayFile(a.shape, a.dtype, into[name]) for name, (a, _) in source.items()]
    got_arrays, got = recorded(
        lambda: dmesh.load_checkpoint(directory, m, {k: list(p) for k, p in into.items()})
    )
    result, metadata = got_arrays
    predicted = load_checkpoint_traffic(m.shape, loaded, manifest)
    check_traffic(m, predicted, got, "load_checkpoint")
    v.check(metadata == {"step": 3}, f"metadata {metadata}")
    blocks = sum(m.comm().allgather(sum(a.local.nbytes for a in result.values())))
    read = load_checkpoint_file_bytes(m.shape, loaded, manifest)
    total = manifest + 2 * headers + data + blocks
    v.check(sum(f.read for f in read) == total, f"load reads {read}, expected {total} in all")
    for name, (full, _) in source.items():
        expect_block(v, result[name], full, f"load_checkpoint {name}")
    v.agree()


def test_checkpoint_onto_another_mesh(traffic_mesh: dmesh.DeviceMesh, tmp: Path) -> None:
    """Saved on the 1-D mesh of the world, loaded with default placements on ``traffic_mesh``."""
    m = traffic_mesh
    v = Verdict(m.comm())
    source = {k: a for k, (a, _) in checkpoint_arrays(1).items() if k != "big"}
    directory = tmp / "ck1"
    with dmesh.init_mesh((WORLD,), comm=m.comm()) as line:
        arrays = {k: dmesh.distribute(a, line, [Shard(0)]) for k, a in source.items()}
        dmesh.save_checkpoint(directory, arrays)
    manifest = os.path.getsize(directory / "manifest.json")
    # The saved (S(0),) fits a 1-D mesh; a 2-D one gets the default (S(0), R).
    default = (Shard(0),) + (Replicate(),) * (m.ndim - 1)
    loaded = [ArrayFile(a.shape, a.dtype, default) for a in source.values()]
    (result, _), got = recorded(lambda: dmesh.load_checkpoint(directory, m))
    check_traffic(m, load_checkpoint_traffic(m.shape, loaded, manifest), got, "load elsewhere")
    for name, full in source.items():
        expect_block(v, result[name], full, f"load_checkpoint {name}")
    v.agree()
