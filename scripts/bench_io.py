"""Benchmark: dmesh.save / dmesh.load of a row-sharded array beside np.save / np.load.

At 2 ranks, a 1 GiB float64 array (16384 x 8192) sharded by rows; the
baseline is ``np.save`` / ``np.load`` of the whole array on rank 0 alone, in
the same run and alternating with ours. Reported: the median time of the
slowest rank and its throughput (GiB/s of file).

* save: ``dmesh.save`` against ``np.save`` (neither syncs: the page cache
  takes the file), and ``dmesh.save(sync=True)`` (what checkpoints use)
  against ``np.save`` followed by ``os.fsync`` (the same guarantee); each save
  writes a new file.
* load: with the file in the page cache (right after writing it), and, where
  this process may write ``/proc/sys/vm/drop_caches`` (root), cold: the cache
  dropped before each load. ``np.load`` allocates a new 1 GiB array per call,
  which is above the 1 GiB mmap threshold ``collectives`` sets, so it faults in
  fresh pages every time, while dmesh's 512 MiB blocks come back from the
  heap; a third column therefore times reading the same bytes on rank 0 into
  a reused buffer (``readinto``): the I/O alone, without the allocation.

The files go to ``build/bench-io/`` and are deleted afterwards; the size is
halved until three files fit on the disk with room to spare (noted in the
output). Results go to ``build/bench/io.json``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_timing import median_time, one_rank_time, write_results
from mpi4py import MPI

import dmesh
from dmesh import Shard

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30
REPEATS = 7


def drop_page_cache() -> bool:
    """Write back and drop the page cache (Linux, root); False where not allowed."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    except OSError:
        return False
    return True


def pick_size(directory: Path) -> tuple[int, str]:
    """Bytes of the array: 1 GiB, halved until 3 files and 2 GiB of slack fit."""
    free = shutil.disk_usage(directory).free
    size = GIB
    while size > 16 * 2**20 and 3 * size + 2 * GIB > free:
        size //= 2
    note = "" if size == GIB else f" (disk has {free / GIB:.1f} GiB free: smaller array)"
    return size, note


def main() -> int:
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    directory = ROOT / "build" / "bench-io"
    if rank == 0:
        directory.mkdir(parents=True, exist_ok=True)
    comm.Barrier()
    size, note = comm.bcast(pick_size(directory) if rank == 0 else None, 0)
    cols = 8192
    rows = size // (8 * cols)
    shape = (rows, cols)
    mesh = dmesh.init_mesh(comm=comm)
    # Each rank makes only its rows; rank 0 also makes the whole array for NumPy.
    bounds = np.linspace(0, rows, p + 1).astype(int)
    start, stop = bounds[rank], bounds[rank + 1]
    block = np.arange(start * cols, stop * cols, dtype=np.float64).reshape(-1, cols)
    a = dmesh.from_local(block, mesh, [Shard(0)])
    full = np.arange(rows * cols, dtype=np.float64).reshape(shape) if rank == 0 else None
    ours, theirs = directory / "dmesh.npy", directory / "numpy.npy"

    def fresh(path: Path) -> None:
        # Each save writes a new file, as np.save does, and starts with no dirty
        # pages of earlier writes left for its own sync to flush.
        if rank == 0:
            if path.exists():
                path.unlink()
            os.sync()
        comm.Barrier()

    def np_save_synced() -> None:
        np.save(theirs, full)
        fd = os.open(theirs, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    cold = comm.bcast(drop_page_cache() if rank == 0 else None, 0)
    samples: dict[str, list[float]] = {}
    buffer = np.empty_like(full) if rank == 0 else None

    def read_into() -> None:  # the bytes np.load reads, into a buffer reused between calls
        with open(theirs, "rb") as f:
            f.seek(os.path.getsize(theirs) - size)
            f.readinto(memoryview(buffer).cast("B"))  # type: ignore[arg-type]

    cases: list[tuple[str, Callable[[], Any], Callable[[], Any], Callable[[], Any]]] = [
        ("save", lambda: dmesh.save(ours, a), lambda: np.save(theirs, full), lambda: None),
        ("save (synced)", lambda: dmesh.save(ours, a, sync=True), np_save_synced,
         lambda: None),
        ("load (page cache)", lambda: dmesh.load(ours, mesh), lambda: np.load(theirs),
         lambda: None),
    ]  # fmt: skip
    if cold:
        cases.append(
            ("load (cold cache)", lambda: dmesh.load(ours, mesh), lambda: np.load(theirs),
             lambda: comm.bcast(drop_page_cache() if rank == 0 else None, 0))
        )  # fmt: skip

    def timed(name: str, fn: Callable[[], Any], path: Path | None, before: Callable[[], Any],
              one_rank: bool) -> None:  # fmt: skip
        if path is not None:
            fresh(path)
        before()
        sample = one_rank_time(comm, fn) if one_rank else median_time(comm, fn, 1)
        samples.setdefault(name, []).append(sample)

    # Whoever runs first after the previous case meets the state it left (an
    # emptied page cache makes the next writer fault in fresh pages on this
    # VM), so ours and the baselines take turns at going first.
    for repeat in range(REPEATS):
        for name, fn, base, before in cases:
            save = name.startswith("save")
            turns = [(name + " dmesh", fn, ours if save else None, False),
                     (name + " numpy", base, theirs if save else None, True)]  # fmt: skip
            if not save:
                turns.append((name + " readinto", read_into, None, True))
            shift = repeat % len(turns)
            for key, call, path, one_rank in turns[shift:] + turns[:shift]:
                timed(key, call, path, before, one_rank)
    loaded = dmesh.load(ours, mesh)
    ok = comm.allreduce(bool(np.array_equal(loaded.local, block)), op=MPI.LAND)
    if rank == 0:
        ok = ok and bool(np.array_equal(np.load(ours, mmap_mode="r")[-3:], full[-3:]))

    rows_out = []
    for name, *_ in cases:
        ours_t = statistics.median(samples[name + " dmesh"])
        base_t = statistics.median(samples[name + " numpy"])
        rows_out.append({"case": name, "bytes": size, "dmesh_s": ours_t, "numpy_s": base_t,
                         "dmesh_gib_s": size / GIB / ours_t, "numpy_gib_s": size / GIB / base_t,
                         "speedup": base_t / ours_t})  # fmt: skip
        if name + " readinto" in samples:
            rows_out[-1]["readinto_s"] = statistics.median(samples[name + " readinto"])
    if rank == 0:
        shutil.rmtree(directory)
        print(f"parallel .npy I/O at {p} ranks: {size / GIB:.2f} GiB float64 {shape}, rows "
              f"sharded, vs np.save/np.load on rank 0{note}; median of {REPEATS}")  # fmt: skip
        if not cold:
            print("(page cache could not be dropped: every load reads cached pages)")
        print(f"{'case':<26} {'dmesh':>18} {'numpy (1 rank)':>18} {'speed-up':>9} "
              f"{'readinto (1 rank)':>18}")  # fmt: skip
        for r in rows_out:
            mine = f"{r['dmesh_s']:.2f} s {r['dmesh_gib_s']:.2f} GiB/s"
            base = f"{r['numpy_s']:.2f} s {r['numpy_gib_s']:.2f} GiB/s"
            line = f"{r['case']:<26} {mine:>18} {base:>18} {r['speedup']:>8.2f}x"
            if "readinto_s" in r:
                line += f" {r['readinto_s']:.2f} s {size / GIB / r['readinto_s']:.2f} GiB/s"
            print(line)
        print("round trip bit-exact:", ok)
        result = {"ranks": p, "shape": shape, "cold_cache": cold, "rows": rows_out, "exact": ok}
        write_results("io", result)
    mesh.close()
    comm.Free()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
