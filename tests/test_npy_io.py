"""dmesh.save and dmesh.load against np.save and np.load on one process.

Files written on one mesh are read on others (1-D, (2, 2), a subset mesh whose
non-members must not hang, one-rank ``COMM_SELF`` meshes), with every
placement kind, uneven and empty blocks, the dtypes ``.npy`` holds, files from
``np.save`` in C and Fortran order and non-native byte order, bad files that
must raise on every rank, and the chunked path that large blocks take.

Every rank makes the same sequence of collective assertions.
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from dmesh.io import npy as npy_io
from helpers import assert_all, assert_equal_all, assert_raises_all

WORLD = MPI.COMM_WORLD.Get_size()
# 7, 5 and 3 along the axes: uneven blocks on 2-4 ranks, empty ones on 4.
DATA = np.random.default_rng(5).standard_normal((7, 5, 3))

# Mesh shapes over the test's communicator: all ranks, (2, 2) at 4 ranks, and
# all ranks but the last (a subset mesh: the last rank is no member).
MESH_SHAPES = [(WORLD,)] + ([(2, 2)] if WORLD == 4 else []) + ([(WORLD - 1,)] if WORLD > 1 else [])
PLACEMENTS = {
    1: [[Shard(0)], [Shard(1)], [Shard(2)], [Replicate()], [Partial("sum")]],
    2: [
        [Shard(0), Shard(1)],
        [Shard(2), Shard(0)],
        [Shard(0), Shard(0)],
        [Replicate(), Shard(1)],
        [Partial("sum"), Shard(2)],
    ],
}


def same_bytes(actual: Any, expected: np.ndarray) -> bool:
    """Bit-exact equality: dtype, shape and the bytes of the values."""
    actual = np.asarray(actual)
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    if actual.dtype.char in "gG":  # 80-bit values in 16 bytes: the padding is arbitrary
        return bool(np.array_equal(actual, expected))
    return actual.tobytes() == np.asarray(expected).tobytes()


def check_loaded(comm: MPI.Intracomm, b: dmesh.DArray, data: np.ndarray, placements: Any) -> None:
    """``b`` holds ``data`` with ``placements``: each member its block, bit for bit."""
    assert_all(comm, b.shape == data.shape and b.dtype == data.dtype.newbyteorder("="), repr(b))
    assert_all(comm, list(b.placements) == list(placements), f"{b.placements} != {placements}")
    b = b.reduce_partials()
    if b.mesh.is_member:
        expected = data[b.spec.layout.slices(b.mesh.coordinate)].astype(b.dtype)
    else:
        expected = np.empty(b.spec.local_shape(), b.dtype)
    assert_all(comm, same_bytes(b.local, expected), f"block of {b!r} differs")


def check_file(comm: MPI.Intracomm, path: Path, data: np.ndarray) -> None:
    """The file is byte for byte what np.save writes for ``data`` (checked on rank 0)."""
    ok = True
    if comm.Get_rank() == 0:
        out = io.BytesIO()
        np.save(out, data)
        ok = path.read_bytes() == out.getvalue()
        if data.dtype.char in "gG":  # equal header, equal values (the padding is arbitrary)
            header = len(out.getvalue()) - data.nbytes
            same_header = path.read_bytes()[:header] == out.getvalue()[:header]
            ok = same_header and same_bytes(np.load(path), data)
    assert_all(comm, ok, f"{path.name} differs from np.save's file")


def load_everywhere(comm: MPI.Intracomm, path: Path, data: np.ndarray) -> None:
    """Load ``path`` on every mesh shape and placement, and on one-rank meshes."""
    for shape in MESH_SHAPES:
        with dmesh.init_mesh(shape, comm=comm) as mesh:
            for placements in PLACEMENTS[len(shape)]:
                if data.ndim == 0 and any(isinstance(p, Shard) for p in placements):
                    continue
                if any(isinstance(p, Shard) and p.dim >= data.ndim for p in placements):
                    continue
                check_loaded(comm, dmesh.load(path, mesh, placements), data, placements)
    with dmesh.init_mesh(comm=MPI.COMM_SELF) as alone:  # every rank reads the whole file
        check_loaded(comm, dmesh.load(path, alone), data, [Shard(0) if data.ndim else Replicate()])


@pytest.mark.parametrize("mesh_shape", MESH_SHAPES, ids=str)
def test_round_trip_across_meshes(comm: MPI.Intracomm, tmp: Path, mesh_shape: Any) -> None:
    path = tmp / "a.npy"
    with dmesh.init_mesh(mesh_shape, comm=comm) as mesh:
        for placements in PLACEMENTS[mesh.ndim]:
            dmesh.save(path, dmesh.distribute(DATA, mesh, placements))
            comm.Barrier()  # non-members of a subset mesh return at once
            check_file(comm, path, DATA)
            with dmesh.init_mesh(comm=comm) as line:
                check_loaded(comm, dmesh.load(path, line, [Shard(1)]), DATA, [Shard(1)])
    load_everywhere(comm, path, DATA)


def test_saved_on_one_rank(comm: MPI.Intracomm, tmp: Path) -> None:
    path = tmp / "self.npy"
    if comm.Get_rank() == 0:
        with dmesh.init_mesh(comm=MPI.COMM_SELF) as alone:
            dmesh.save(path, dmesh.distribute(DATA, alone))
    comm.Barrier()
    check_file(comm, path, DATA)
    load_everywhere(comm, path, DATA)


DTYPES = [np.float64, np.int32, np.complex128, np.bool_, np.float16, np.uint8, np.longdouble]
SHAPES = [(), (0,), (0, 3), (4, 0), (1,), (6,), (3, 4, 5), (7, 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtypes_and_shapes(comm: MPI.Intracomm, tmp: Path, dtype: Any) -> None:
    rng = np.random.default_rng(1)
    path = tmp / "d.npy"
    with dmesh.init_mesh(comm=comm) as mesh:
        for shape in SHAPES:
            values = rng.standard_normal(shape) * 100
            data = (values + 1j * values if np.dtype(dtype).kind == "c" else values).astype(dtype)
            for placements in ([Replicate()], [Shard(len(shape) - 1)]) if shape else (None,):
                dmesh.save(path, dmesh.distribute(data, mesh, placements))
                check_file(comm, path, data)
                want = [Shard(0)] if shape else [Replicate()]
                check_loaded(comm, dmesh.load(path, mesh), data, want)
                if shape:
                    check_loaded(comm, dmesh.load(path, mesh, [Shard(len(shape) - 1)]), data,
                                 [Shard(len(shape) - 1)])  # fmt: skip


NUMPY_FILES = {
    "c": DATA,
    "fortran": np.asfortranarray(DATA),
    "fortran-2d": np.asfortranarray(DATA[:, :, 0]),
    "big-endian": DATA.astype(">f8"),
    "big-endian-int-fortran": np.asfortranarray((DATA * 100).astype(">i4")),
    "complex-fortran": np.asfortranarray(DATA + 2j * DATA),
}


@pytest.mark.parametrize("name", list(NUMPY_FILES))
def test_file_from_np_save(comm: MPI.Intracomm, tmp: Path, name: str) -> None:
    data = NUMPY_FILES[name]
    path = tmp / f"{name}.npy"
    if comm.Get_rank() == 0:
        np.save(path, data)
        with open(path, "rb") as f:  # the case is what its name says
            np.lib.format.read_magic(f)
            fortran = np.lib.format.read_array_header_1_0(f)[1]
        assert fortran == ("fortran" in name)
    comm.Barrier()
    load_everywhere(comm, path, data)


def test_overwrite_truncates_and_chunks(
    comm: MPI.Intracomm, tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp / "o.npy"
    big = np.arange(4000, dtype=np.int64)
    with dmesh.init_mesh(comm=comm) as mesh:
        dmesh.save(path, dmesh.distribute(big, mesh))
        dmesh.save(path, dmesh.distribute(DATA, mesh))
        check_file(comm, path, DATA)  # no tail of the longer file is left
    # A few elements per collective call: many calls, blocks of different
    # lengths ending after different numbers of calls, as for huge blocks.
    monkeypatch.setattr(npy_io, "_CHUNK_BYTES", 24)
    for shape in MESH_SHAPES:
        with dmesh.init_mesh(shape, comm=comm) as mesh:
            placements = PLACEMENTS[mesh.ndim][1]
            dmesh.save(path, dmesh.distribute(DATA, mesh, placements))
            comm.Barrier()
            check_file(comm, path, DATA)
            check_loaded(comm, dmesh.load(path, mesh, placements), DATA, placements)
    if comm.Get_rank() == 0:
        np.save(path, np.asfortranarray(DATA))
    comm.Barrier()
    load_everywhere(comm, path, DATA)


class FakeBar:
    """Records what a tqdm bar is told."""

    made: ClassVar[list[FakeBar]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs, self.steps, self.closed = kwargs, 0, False
        FakeBar.made.append(self)

    def update(self, n: int) -> None:
        self.steps += n

    def close(self) -> None:
        self.closed = True


def test_progress_bar(comm: MPI.Intracomm, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp / "p.npy"
    monkeypatch.setattr(npy_io, "_PROGRESS_BYTES", 0)
    monkeypatch.setattr(npy_io, "_CHUNK_BYTES", 64)
    monkeypatch.setattr(npy_io, "_on_terminal", lambda: True)
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
    FakeBar.made.clear()
    calls = -(-DATA[: -(-7 // WORLD)].size // 8)  # the largest row block, 8 values a call
    with dmesh.init_mesh(comm=comm) as mesh:
        a = dmesh.distribute(DATA, mesh)
        dmesh.save(path, a)
        check_loaded(comm, dmesh.load(path, mesh), DATA, [Shard(0)])
        bars = [(b.kwargs["total"], b.steps, b.closed) for b in FakeBar.made]
        want = [(calls, calls, True)] * 2 if comm.Get_rank() == 0 else []
        assert_all(comm, bars == want, f"bars {bars}, expected {want}")
        # Without tqdm: silent, and the file is still written.
        monkeypatch.setitem(sys.modules, "tqdm", None)
        dmesh.save(path, a)
        check_file(comm, path, DATA)
    assert_all(comm, len(FakeBar.made) == (2 if comm.Get_rank() == 0 else 0))


class Trap:
    """An object whose unpickling would be seen."""

    def __reduce__(self) -> Any:
        return (print, ("unpickled",))


def test_bad_files_raise_everywhere(
    comm: MPI.Intracomm, tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pickle(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("load must never unpickle")

    monkeypatch.setattr(pickle, "load", no_pickle)
    monkeypatch.setattr(pickle, "loads", no_pickle)
    if comm.Get_rank() == 0:
        (tmp / "text.npy").write_text("not an array\n" * 10)
        (tmp / "empty.npy").write_bytes(b"")
        np.save(tmp / "short.npy", DATA)
        with open(tmp / "short.npy", "r+b") as f:
            f.truncate(os.path.getsize(tmp / "short.npy") - 8)
        np.save(tmp / "headless.npy", DATA)
        with open(tmp / "headless.npy", "r+b") as f:
            f.truncate(20)
        np.save(tmp / "objects.npy", np.array([Trap(), 1], dtype=object), allow_pickle=True)
        np.save(tmp / "strings.npy", np.array(["ab", "c"]))
    comm.Barrier()
    cases = [
        ("missing.npy", ArgumentError, "cannot read"),
        ("text.npy", ArgumentError, "not a valid .npy"),
        ("empty.npy", ArgumentError, "not a valid .npy"),
        ("headless.npy", ArgumentError, "not a valid .npy"),
        ("short.npy", ArgumentError, "truncated"),
        ("objects.npy", UnsupportedError, "pickle"),
        ("strings.npy", UnsupportedError, "dtype <U2"),
    ]
    for shape in MESH_SHAPES:
        with dmesh.init_mesh(shape, comm=comm) as mesh:
            for name, error, match in cases:
                assert_raises_all(comm, error, dmesh.load, tmp / name, mesh, match=match)
            # The mesh still works: no rank was left inside a collective.
            check_loaded(comm, dmesh.distribute(DATA, mesh), DATA, PLACEMENTS[mesh.ndim][0][:1]
                         + [Replicate()] * (mesh.ndim - 1))  # fmt: skip


def test_save_refusals(comm: MPI.Intracomm, tmp: Path) -> None:
    with dmesh.init_mesh(comm=comm) as mesh:
        a = dmesh.distribute(DATA, mesh)
        assert_raises_all(comm, ArgumentTypeError, dmesh.save, tmp / "x.npy", DATA)
        assert_raises_all(comm, ArgumentTypeError, dmesh.save, 3, a)
        objects = a.astype(object)
        assert_raises_all(comm, ArgumentTypeError, dmesh.save, tmp / "o.npy", objects,
                          match="pickle")  # fmt: skip
        missing = tmp / "no-such-dir" / "x.npy"
        assert_raises_all(comm, ArgumentError, dmesh.save, missing, a, match="cannot open")
        dmesh.save(tmp / "x.npy", a)  # nothing is left half-done
        check_file(comm, tmp / "x.npy", DATA)


def _gpu_count() -> int:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU here"
        return 0


@pytest.mark.skipif(
    not MPI.COMM_WORLD.allreduce(_gpu_count() > 0, op=MPI.LAND), reason="needs a GPU on every rank"
)
def test_cuda_mesh(comm: MPI.Intracomm, tmp: Path) -> None:
    import cupy

    path = tmp / "gpu.npy"
    with dmesh.init_mesh(comm=comm, device="cuda") as mesh:
        dmesh.save(path, dmesh.distribute(DATA, mesh, [Shard(1)]))
        check_file(comm, path, DATA)
        b = dmesh.load(path, mesh, [Shard(2)])
        assert_all(comm, isinstance(b.local, cupy.ndarray), type(b.local).__name__)
        assert_equal_all(comm, b.local.get(), DATA[b.spec.layout.slices(mesh.coordinate)])
