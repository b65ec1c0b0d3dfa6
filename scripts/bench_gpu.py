"""Benchmark: dmesh on a ``"cuda"`` mesh beside plain CuPy, and the all-reduce's two paths.

Run where a GPU exists (``make bench`` runs it at one rank; elsewhere it
prints one line saying why it skipped and exits 0)::

    .venv/bin/mpiexec -n 1 .venv/bin/python scripts/bench_gpu.py

Each rank uses GPU ``rank % GPUs``. Cases, each timed beside its baseline in
alternating batches (``bench_timing.alternating``; every timed call ends by
synchronizing the device, so the time is the work's, not its launch's):

* array ops on a 1-D mesh, ``S(0)`` blocks, against the same CuPy code on
  one rank's block: ``a*b + c`` on 10^8 float32, a 4096^2 float32 matmul
  (``S(0) @ R``), ``fftn`` of 256^3 complex64, one 2-D heat step of 8192^2
  float32 (``map_overlap``, width 1). Target: at most 1.1x CuPy.
* a 16 MiB float32 all-reduce (``dmesh.collectives.all_reduce``) on device
  buffers, direct (``DMESH_GPU_AWARE_MPI=1``: MPI reads and writes device
  memory) and staged (``=0``: device -> host -> MPI -> host -> device),
  beside the same ``Allreduce`` through mpi4py on CuPy buffers (only where
  the library is CUDA-aware: a library that is not would read device memory
  from the host) and on NumPy buffers (the staged path's floor). Target: the
  direct path at most 1.1x raw mpi4py on device buffers; the staged path's
  cost over it is reported.

Results go to ``build/bench/gpu.json`` (``ratio`` rows, drawn with the rest).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_timing import alternating, format_seconds, write_results
from mpi4py import MPI

ARRAY_RATIO = 1.1  # dmesh / CuPy for the array ops
DIRECT_RATIO = 1.1  # direct all-reduce / raw mpi4py on device buffers
ALLREDUCE_BYTES = 16 * 2**20


def gpu_count() -> int:
    """GPUs this rank sees through CuPy (0 without CuPy, a driver or a device)."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU here"
        return 0


def heat_step(padded: Any, alpha: float = 0.1) -> Any:
    """Explicit 5-point heat step on the interior of a block padded by one cell (any module)."""
    out = padded.copy()
    c = padded[1:-1, 1:-1]
    lap = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * c
    out[1:-1, 1:-1] = c + alpha * lap
    return out


def synced(cupy: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` followed by a device synchronization (kernels run asynchronously)."""

    def call() -> Any:
        result = fn()
        cupy.cuda.get_current_stream().synchronize()
        return result

    return call


def array_cases(
    comm: MPI.Intracomm, cupy: Any
) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(case, dmesh call, CuPy call on this rank's block) for the array ops."""
    import dmesh
    from dmesh import Replicate, Shard

    p = comm.Get_size()
    mesh = dmesh.init_mesh((p,), device="cuda")
    rng = cupy.random.default_rng(comm.Get_rank())

    def sharded(block: Any) -> Any:
        return dmesh.from_local(block, mesh, [Shard(0)])

    n = 10**8 // p
    xs = [rng.standard_normal(n, dtype=cupy.float32) for _ in range(3)]
    a, b, c = (sharded(x) for x in xs)
    la, lb, lc = xs
    m = 4096
    left = rng.standard_normal((m // p, m), dtype=cupy.float32)
    right = rng.standard_normal((m, m), dtype=cupy.float32)
    dleft, dright = sharded(left), dmesh.from_local(right, mesh, [Replicate()])
    f = 256
    parts = [rng.standard_normal((f // p, f, f), dtype=cupy.float32) for _ in range(2)]
    spectrum = (parts[0] + 1j * parts[1]).astype(cupy.complex64)
    dspectrum = sharded(spectrum)
    h = 8192
    field = rng.standard_normal((h // p, h), dtype=cupy.float32)
    dfield = sharded(field)
    return [
        ("a*b + c 1e8 f32", lambda: a * b + c, lambda: la * lb + lc),
        ("matmul 4096^2 f32 S(0) @ R", lambda: dleft @ dright, lambda: left @ right),
        ("fftn 256^3 c64", lambda: np.fft.fftn(dspectrum), lambda: cupy.fft.fftn(spectrum)),
        ("heat step 8192^2 f32", lambda: dmesh.map_overlap(heat_step, dfield, 1, boundary=0.0),
         lambda: heat_step(cupy.pad(field, 1))[1:-1, 1:-1]),
    ]  # fmt: skip


def allreduce_rows(comm: MPI.Intracomm, cupy: Any) -> list[dict[str, Any]]:
    """The all-reduce's direct and staged paths beside raw mpi4py (the module docstring)."""
    import dmesh.collectives as C
    from dmesh.collectives.device import cuda_aware

    count = ALLREDUCE_BYTES // 4
    device_in = cupy.ones(count, cupy.float32)
    device_out = cupy.empty_like(device_in)
    host_in, host_out = np.ones(count, np.float32), np.empty(count, np.float32)
    saved = os.environ.pop("DMESH_GPU_AWARE_MPI", None)
    aware = cuda_aware(comm)  # the library's own answer and the probe, agreed by all ranks

    def dmesh_path(direct: bool) -> Callable[[], Any]:
        def call() -> Any:
            os.environ["DMESH_GPU_AWARE_MPI"] = "1" if direct else "0"
            return C.all_reduce(device_in, "sum", comm)

        return synced(cupy, call)

    def raw_host() -> Any:
        comm.Allreduce(host_in, host_out)
        return host_out

    def raw_device() -> Any:
        cupy.cuda.get_current_stream().synchronize()
        comm.Allreduce(device_in, device_out)
        return device_out

    rows: list[dict[str, Any]] = []
    try:
        staged, floor = alternating(comm, [dmesh_path(False), raw_host], 20)
        rows.append({"case": "all_reduce 16 MiB staged", "dmesh_s": staged, "baseline_s": floor,
                     "baseline": "mpi4py on host buffers", "ratio": staged / floor})  # fmt: skip
        if aware:
            direct, raw = alternating(comm, [dmesh_path(True), synced(cupy, raw_device)], 20)
            rows.append({"case": "all_reduce 16 MiB direct", "dmesh_s": direct, "baseline_s": raw,
                         "baseline": "mpi4py on device buffers", "ratio": direct / raw,
                         "staged_over_direct": staged / direct})  # fmt: skip
    finally:
        os.environ.pop("DMESH_GPU_AWARE_MPI", None)
        if saved is not None:
            os.environ["DMESH_GPU_AWARE_MPI"] = saved
    return rows


def main() -> int:
    comm = MPI.COMM_WORLD
    have = comm.allreduce(gpu_count() > 0, op=MPI.LAND)
    if not have:
        if comm.Get_rank() == 0:
            print("bench_gpu: skipped: no GPU on every rank (needs CuPy and a CUDA device)")
        return 0
    import cupy

    cupy.cuda.Device(comm.Get_rank() % gpu_count()).use()
    rows: list[dict[str, Any]] = []
    for case, ours, theirs in array_cases(comm, cupy):
        mine, base = alternating(comm, [synced(cupy, ours), synced(cupy, theirs)], 5, repeats=9)
        rows.append({"case": case, "dmesh_s": mine, "baseline_s": base,
                     "baseline": "CuPy on the block", "ratio": mine / base,
                     "target": ARRAY_RATIO})  # fmt: skip
    reduce_rows = allreduce_rows(comm, cupy)
    for row in reduce_rows:
        row["target"] = DIRECT_RATIO if row["case"].endswith("direct") else None
    rows += reduce_rows
    if comm.Get_rank() == 0:
        name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
        print(f"GPU benchmark at {comm.Get_size()} rank(s) on {name.decode()}")
        print(f"{'case':28} {'dmesh':>10} {'baseline':>10} {'ratio':>7}  baseline, target")
        for row in rows:
            target = f"<= {row['target']}" if row["target"] else "(stated)"
            print(f"{row['case']:28} {format_seconds(row['dmesh_s']):>10} "
                  f"{format_seconds(row['baseline_s']):>10} {row['ratio']:7.2f}  "
                  f"{row['baseline']}, {target}")  # fmt: skip
        if not any(r["case"].endswith("direct") for r in reduce_rows):
            print("all_reduce direct: not measured, the MPI library is not CUDA-aware here")
        write_results("gpu", {"ranks": comm.Get_size(), "device": name.decode(), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
