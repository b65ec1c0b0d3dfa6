"""dmesh.save_checkpoint and dmesh.load_checkpoint: round trips, atomicity, corruption.

A checkpoint saved on one mesh ((2, 2) at 4 ranks, else all ranks) is loaded
on others (all ranks, a subset mesh whose non-member must not hang, one-rank
``COMM_SELF`` meshes) bit for bit; damaged checkpoints (a flipped byte, a
truncated or missing file, a manifest that disagrees) and failed saves (a rank
raising part-way, metadata that is not JSON) raise on every rank and leave the
previous checkpoint loadable.

Every rank makes the same sequence of collective assertions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import CheckpointError, Partial, Replicate, Shard
from dmesh.io import checkpoint
from helpers import assert_all, assert_equal_all, assert_raises_all

WORLD = MPI.COMM_WORLD.Get_size()
SAVE_SHAPE = (2, 2) if WORLD == 4 else (WORLD,)
RNG = np.random.default_rng(11)
# Uneven (7, 5, 3) and empty (0 rows) blocks on 2-4 ranks; a 0-d array; a
# partial value (saved reduced).
DATA = {
    "u": RNG.standard_normal((7, 5)),
    "v": np.arange(6, dtype=np.int32) - 3,
    "w": (RNG.standard_normal((3, 4, 2)) + 1j * RNG.standard_normal((3, 4, 2))),
    "p": RNG.standard_normal((5, 3)),
    "flags": np.array([True, False, False, True]),
    "empty": np.zeros((0, 3), np.float32),
    "scalar": np.array(2.5),
}
PLACEMENTS = {
    1: {"u": [Shard(0)], "v": [Shard(0)], "w": [Replicate()], "p": [Partial("sum")],
        "flags": [Shard(0)], "empty": [Shard(0)], "scalar": [Replicate()]},
    2: {"u": [Shard(0), Shard(1)], "v": [Replicate(), Shard(0)], "w": [Shard(2), Shard(0)],
        "p": [Partial("sum"), Shard(1)], "flags": [Shard(0), Shard(0)],
        "empty": [Shard(0), Replicate()], "scalar": [Replicate(), Replicate()]},
}  # fmt: skip
METADATA = {"step": 7, "lr": 0.125, "tags": ["a", "b"], "nested": {"ok": True, "none": None}}


@pytest.fixture
def mesh(comm: MPI.Intracomm) -> Iterator[dmesh.DeviceMesh]:
    with dmesh.init_mesh(SAVE_SHAPE, comm=comm) as m:
        yield m


def make_arrays(mesh: dmesh.DeviceMesh, scale: float = 1.0) -> dict[str, dmesh.DArray]:
    placements = PLACEMENTS[mesh.ndim]
    return {
        name: dmesh.distribute(
            data * scale if data.dtype.kind in "fc" else data, mesh, placements[name]
        )
        for name, data in DATA.items()
    }


def check_arrays(comm: MPI.Intracomm, arrays: dict[str, dmesh.DArray], scale: float = 1.0) -> None:
    """Every array is its DATA (times ``scale``) bit for bit, names in the saved order."""
    assert_all(comm, list(arrays) == list(DATA), f"names {list(arrays)}")
    for name, data in DATA.items():
        expected = data * scale if data.dtype.kind in "fc" else data
        a = arrays[name]
        full = a.full_array()  # collective (empty on non-members)
        got = full if a.mesh.is_member else expected
        assert_equal_all(comm, got, expected)
        assert_all(comm, a.shape == data.shape and a.dtype == data.dtype, f"{name}: {a!r}")


def on_rank0(comm: MPI.Intracomm, action: Any) -> None:
    """Damage a file on rank 0 only, then let every rank see it."""
    if comm.Get_rank() == 0:
        action()
    comm.Barrier()


def leftovers(comm: MPI.Intracomm, tmp: Path) -> list[str]:
    """Temporary or set-aside directories in ``tmp`` (the same list on every rank)."""
    names = sorted(p.name for p in tmp.iterdir() if ".tmp-" in p.name or ".old-" in p.name)
    return comm.bcast(names, 0)  # type: ignore[no-any-return]


def edit_manifest(path: Path, change: Any) -> None:
    doc = json.loads((path / "manifest.json").read_text())
    change(doc)
    (path / "manifest.json").write_text(json.dumps(doc))


def test_round_trip_keeps_placements_and_metadata(
    comm: MPI.Intracomm, tmp: Path, mesh: dmesh.DeviceMesh
) -> None:
    dmesh.save_checkpoint(tmp / "ck", make_arrays(mesh), METADATA)
    arrays, metadata = dmesh.load_checkpoint(tmp / "ck", mesh)
    assert_all(comm, metadata == METADATA, f"metadata {metadata}")
    check_arrays(comm, arrays)
    for name, placements in PLACEMENTS[mesh.ndim].items():
        got = list(arrays[name].placements)
        assert_all(comm, got == placements, f"{name}: {got} != {placements}")
    manifest = json.loads((tmp / "ck" / "manifest.json").read_text())
    assert_all(comm, manifest["mesh"]["shape"] == list(SAVE_SHAPE), str(manifest["mesh"]))
    assert_all(comm, manifest["arrays"]["u"]["dtype"] == "<f8", str(manifest["arrays"]["u"]))
    assert_all(
        comm,
        sorted(p.name for p in (tmp / "ck").iterdir())
        == sorted([f"{name}.npy" for name in DATA] + ["manifest.json"]),
        "files",
    )
    # Standard .npy files: NumPy reads them without pickle.
    u = np.load(tmp / "ck" / "u.npy", allow_pickle=False)
    assert_equal_all(comm, u, DATA["u"])


def test_load_on_other_meshes(comm: MPI.Intracomm, tmp: Path, mesh: dmesh.DeviceMesh) -> None:
    dmesh.save_checkpoint(tmp / "ck", make_arrays(mesh), METADATA)
    shapes = [(WORLD,)] + ([(WORLD - 1,)] if WORLD > 1 else [])  # the last: a subset mesh
    for shape in shapes:
        with dmesh.init_mesh(shape, comm=comm) as other:
            arrays, metadata = dmesh.load_checkpoint(tmp / "ck", other)
            check_arrays(comm, arrays)
            assert_all(comm, metadata == METADATA, f"metadata on {shape}")
            # Placements at save time where they fit the mesh, else Shard(0).
            want = [Replicate()] if len(shape) == len(SAVE_SHAPE) else [Shard(0)]
            got = list(arrays["w"].placements)
            assert_all(comm, got == want, f"w on {shape}: {got}")
    with dmesh.init_mesh((1,), comm=MPI.COMM_SELF) as alone:  # every rank loads it whole
        arrays, metadata = dmesh.load_checkpoint(tmp / "ck", alone)
        check_arrays(comm, arrays)


def test_save_from_a_subset_mesh(comm: MPI.Intracomm, tmp: Path) -> None:
    with dmesh.init_mesh((max(WORLD - 1, 1),), comm=comm) as subset:
        arrays = make_arrays(subset)
        dmesh.save_checkpoint(tmp / "ck", arrays, {"from": "subset"})  # non-members return
    with dmesh.init_mesh(comm=comm) as line:
        loaded, metadata = dmesh.load_checkpoint(tmp / "ck", line)
        check_arrays(comm, loaded)
        assert_all(comm, metadata == {"from": "subset"}, str(metadata))


def test_explicit_placements(comm: MPI.Intracomm, tmp: Path, mesh: dmesh.DeviceMesh) -> None:
    dmesh.save_checkpoint(tmp / "ck", make_arrays(mesh))
    with dmesh.init_mesh(comm=comm) as line:
        arrays, metadata = dmesh.load_checkpoint(tmp / "ck", line, [Replicate()])
        check_arrays(comm, arrays)
        assert_all(comm, metadata == {}, str(metadata))
        assert_all(comm, all(a.placements == (Replicate(),) for a in arrays.values()), "R")
        arrays, _ = dmesh.load_checkpoint(tmp / "ck", line, {"u": [Shard(1)], "p": [Replicate()]})
        check_arrays(comm, arrays)
        assert_all(comm, arrays["u"].placements == (Shard(1),), repr(arrays["u"]))
        assert_all(comm, arrays["v"].placements == (Shard(0),), repr(arrays["v"]))
        assert_raises_all(
            comm,
            dmesh.ArgumentError,
            dmesh.load_checkpoint,
            tmp / "ck",
            line,
            {"uu": [Shard(0)]},
            match="did you mean 'u'",
        )
        assert_raises_all(
            comm,
            dmesh.ArgumentError,
            dmesh.load_checkpoint,
            tmp / "ck",
            line,
            [Shard(1)],
            match="Shard",
        )


def test_overwrite(comm: MPI.Intracomm, tmp: Path, mesh: dmesh.DeviceMesh) -> None:
    dmesh.save_checkpoint(tmp / "ck", make_arrays(mesh), {"step": 1})
    dmesh.save_checkpoint(tmp / "ck", make_arrays(mesh, 2.0), {"step": 2})
    arrays, metadata = dmesh.load_checkpoint(tmp / "ck", mesh)
    check_arrays(comm, arrays, 2.0)
    assert_all(comm, metadata == {"step": 2}, str(metadata))
    assert_all(comm, leftovers(comm, tmp) == [], str(leftovers(comm, tmp)))
    # A directory that is not a checkpoint is never replaced.
    on_rank0(comm, lambda: (tmp / "mine").mkdir() or (tmp / "mine" / "notes.txt").write_text("x"))
    assert_raises_all(
        comm,
        CheckpointError,
        dmesh.save_checkpoint,
        tmp / "mine",
        make_arrays(mesh),
        match="not a checkpoint",
    )
    assert_all(comm, (tmp / "mine" / "notes.txt").read_text() == "x", "notes.txt changed")
    assert_all(comm, leftovers(comm, tmp) == [], str(leftovers(comm, tmp)))


def flip(file: Path, position: int) -> None:
    data = bytearray(file.read_bytes())
    data[position] ^= 0x10
    file.write_bytes(bytes(data))


def test_corrupted_byte_is_detected(
    comm: MPI.Intracomm, tmp: Path, mesh: dmesh.DeviceMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 64-byte chunks: the 280 data bytes of u are 5 chunks, hashed by several ranks.
    monkeypatch.setattr(checkpoint, "CHUNK_BYTES", 64)
    dmesh.save_checkpoint(tmp / "ck", make_arrays(mesh))
    file = tmp / "ck" / "u.npy"
    size = file.stat().st_size
    for position in (size - 280, size - 150, size - 1):  # first, a middle and the last data byte
        on_rank0(comm, lambda: flip(file, position))  # noqa: B023 (called at once)
        assert_raises_all(
            comm,
            CheckpointError,
            dmesh.load_checkpoint,
            tmp / "ck",
            mesh,
            match="u.npy: checksum mismatch",
        )
        on_rank0(comm, lambda: flip(file, position))  # noqa: B023 (called at once)
        arrays, _ = dmesh.load_checkpoint(tmp / "ck", mesh)
        check_arrays(comm, arrays)


def test_checksum_does_not_depend_on_ranks_or_placements(
    comm: MPI.Intracomm, tmp: Path, mesh: dmesh.DeviceMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "CHUNK_BYTES", 64)
    dmesh.save_checkpoint(tmp / "a", make_arrays(mesh))
    with dmesh.init_mesh(comm=comm) as line:
        replicated = {
            name: dmesh.distribute(data, line, [Replicate()]) for name, data in DATA.items()
        }
        dmesh.save_checkpoint(tmp / "b", replicated)
    sums = [
        {
            n: e["checksum"]
            for n, e in json.loads((tmp / d / "manifest.json").read_text())["arrays"].items()
        }
        for d in ("a", "b")
    ]
    assert_all(comm, sums[0] == sums[1], f"{sums}")
    # The scheme, computed here in one process from the file.
    file = tmp / "a" / "u.npy"
    raw = file.read_bytes()[-DATA["u"].nbytes :]
    digests = b"".join(
        hashlib.blake2b(raw[k : k + 64], digest_size=16).digest() for k in range(0, len(raw), 64)
    )
    expected = hashlib.blake2b(f"{len(raw)}:64:".encode() + digests, digest_size=32).hexdigest()
    assert_all(comm, sums[0]["u"] == expected, f"{sums[0]['u']} != {expected}")


def test_damaged_files_are_detected(comm: MPI.Intracomm, tmp: Path, mesh: dmesh.DeviceMesh) -> None:
    ck = tmp / "ck"

    def expect(match: str) -> None:
        assert_raises_all(comm, CheckpointError, dmesh.load_checkpoint, ck, mesh, match=match)

    def fresh() -> None:
        dmesh.save_checkpoint(ck, make_arrays(mesh))

    fresh()
    on_rank0(comm, lambda: (ck / "v.npy").write_bytes((ck / "v.npy").read_bytes()[:-1]))
    expect("v.npy.*truncated")
    on_rank0(comm, lambda: (ck / "v.npy").unlink())
    expect("v.npy is missing")
    on_rank0(comm, lambda: (ck / "v.npy").write_bytes(b"not a numpy file at all"))
    expect("v.npy.*not a valid .npy")
    fresh()
    on_rank0(comm, lambda: edit_manifest(ck, lambda d: d["arrays"]["u"].update(shape=[7, 4])))
    expect(r"u.npy: its header says <f8\[7, 5\], the manifest <f8\[7, 4\]")
    fresh()
    on_rank0(comm, lambda: edit_manifest(ck, lambda d: d["arrays"]["u"].update(dtype="<i8")))
    expect("u.npy: its header says <f8")
    fresh()
    on_rank0(comm, lambda: edit_manifest(ck, lambda d: d["arrays"]["u"].update(dtype="|O")))
    expect("object dtype")
    fresh()  # an object array written with pickle: refused, never unpickled
    on_rank0(comm, lambda: np.save(ck / "v.npy", np.array([{}, None], object), allow_pickle=True))
    expect("v.npy.*Python objects")
    on_rank0(comm, lambda: (ck / "manifest.json").write_text("{not json"))
    expect("not valid JSON")
    on_rank0(comm, lambda: (ck / "manifest.json").unlink())
    expect("manifest.json is missing")
    expect_missing = tmp / "nowhere"
    assert_raises_all(
        comm,
        CheckpointError,
        dmesh.load_checkpoint,
        expect_missing,
        mesh,
        match="nowhere is not an existing directory",
    )


@pytest.mark.parametrize("failing_array", ["u", "scalar"])
def test_interrupted_save_leaves_the_previous_checkpoint(
    comm: MPI.Intracomm,
    tmp: Path,
    mesh: dmesh.DeviceMesh,
    monkeypatch: pytest.MonkeyPatch,
    failing_array: str,
) -> None:
    dmesh.save_checkpoint(tmp / "ck", make_arrays(mesh), {"step": 1})

    def crash(stage: str, name: str) -> None:
        if name == failing_array:
            raise RuntimeError(f"injected failure before writing {name}")

    if comm.Get_rank() == comm.Get_size() - 1:  # one rank fails, the others must not hang
        monkeypatch.setattr(checkpoint, "_fault_hook", crash)
    for target in ("ck", "new"):
        assert_raises_all(
            comm,
            CheckpointError,
            dmesh.save_checkpoint,
            tmp / target,
            make_arrays(mesh, 3.0),
            {"step": 2},
            match=f"rank {WORLD - 1}: RuntimeError: injected failure before "
            f"writing {failing_array}",
        )
    monkeypatch.setattr(checkpoint, "_fault_hook", None)
    arrays, metadata = dmesh.load_checkpoint(tmp / "ck", mesh)
    check_arrays(comm, arrays)
    assert_all(comm, metadata == {"step": 1}, str(metadata))
    assert_all(comm, not (tmp / "new").exists(), "a failed first save left a directory")
    assert_all(comm, leftovers(comm, tmp) == [], str(leftovers(comm, tmp)))


def test_bad_metadata_raises_everywhere_before_writing(
    comm: MPI.Intracomm, tmp: Path, mesh: dmesh.DeviceMesh
) -> None:
    arrays = make_arrays(mesh)
    save = dmesh.save_checkpoint
    for metadata in ({"x": object()}, {"n": np.int64(3)}):
        assert_raises_all(
            comm, dmesh.ArgumentError, save, tmp / "ck", arrays, metadata,
            match="not JSON-serializable",
        )  # fmt: skip
    assert_raises_all(comm, dmesh.ArgumentTypeError, save, tmp / "ck", arrays, [1, 2])
    if WORLD > 1:  # ranks that disagree: all raise, none hangs
        last = comm.Get_rank() == WORLD - 1
        assert_raises_all(
            comm,
            dmesh.ArgumentError,
            save,
            tmp / "ck",
            arrays,
            {"x": object()} if last else {},
            match="not JSON-serializable",
        )
        assert_raises_all(
            comm,
            dmesh.ArgumentError,
            save,
            tmp / "ck",
            arrays,
            {"rank": comm.Get_rank()},
            match=r"metadata argument on rank\(s\)",
        )
    assert_all(comm, sorted(p.name for p in tmp.iterdir()) == [], "something was written")


def test_bad_arguments(comm: MPI.Intracomm, tmp: Path, mesh: dmesh.DeviceMesh) -> None:
    arrays = make_arrays(mesh)
    save = dmesh.save_checkpoint
    assert_raises_all(
        comm,
        dmesh.ArgumentError,
        save,
        tmp / "ck",
        {"../u": arrays["u"]},
        match="cannot name a file",
    )
    assert_raises_all(
        comm,
        dmesh.ArgumentTypeError,
        save,
        tmp / "ck",
        {"u": arrays["u"], "n": DATA["u"]},
        match="not a DArray",
    )
    assert_raises_all(comm, dmesh.ArgumentTypeError, save, tmp / "ck", {})
    assert_raises_all(
        comm, CheckpointError, save, tmp / "no" / "ck", arrays, match="is not an existing directory"
    )
    assert_raises_all(comm, dmesh.ArgumentTypeError, dmesh.load_checkpoint, tmp, "mesh")
    assert_all(comm, sorted(p.name for p in tmp.iterdir()) == [], "something was written")
