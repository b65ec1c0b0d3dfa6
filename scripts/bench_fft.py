"""Benchmark: the distributed FFT (``np.fft.fftn``/``rfftn`` on DArrays) on a 1-D mesh.

At 2 ranks, slab decomposition (``Shard(0)`` in, ``Shard(1)`` out, one
all-to-all): 128^3 and 256^3 complex128 ``fftn`` and a 128^3 float64
``rfftn``, beside one-process ``numpy.fft`` on rank 0 in the same run, and
beside mpi4py-fft's ``PFFT`` on the same slab decomposition when
``mpi4py_fft`` can be imported (it is not a dependency: ``pip install
mpi4py-fft`` builds against FFTW, e.g. Debian's ``libfftw3-dev``). dmesh and
``PFFT`` (its default FFTW backend, and its NumPy backend: the same local FFT
library as dmesh) are timed in alternating batches, so that the ratio holds
on a loaded machine (``bench_timing.alternating``). Each case also times
its transpose alone (``a.redistribute(mesh, [Shard(1)])``) beside a raw
``MPI_Alltoall`` of the same bytes from a contiguous buffer (no packing): the
difference is what the redistribution path costs over the bare message.
Every result is checked against NumPy once, outside the timings.

Usage: ``mpiexec -n 2 python scripts/bench_fft.py [out.json]``
(default ``build/bench/fft.json``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_timing import alternating, median_time, one_rank_time, write_results
from bench_timing import format_seconds as _fmt
from mpi4py import MPI

import dmesh
from dmesh import Shard
from dmesh.core.placement import shorts


def raw_alltoall(comm: MPI.Intracomm, nbytes: int, repeats: int) -> float:
    """One ``MPI_Alltoall`` of ``nbytes`` per rank from a contiguous buffer."""
    p = comm.Get_size()
    send = np.ones(nbytes // 8 // p * p)
    recv = np.empty_like(send)
    return median_time(comm, lambda: comm.Alltoall(send, recv), repeats, warmup=True)


def pfft_forward(
    comm: MPI.Intracomm, n: int, real: bool, backend: str, block: np.ndarray
) -> tuple[Callable[[], Any], Callable[[], None]] | None:
    """mpi4py-fft's ``PFFT`` forward transform of ``block`` on the slab decomposition, and
    its destructor (None when ``mpi4py_fft`` is not installed)."""
    try:
        from mpi4py_fft import PFFT, newDistArray
    except ImportError:
        return None
    dtype = np.float64 if real else np.complex128
    transform = PFFT(comm, (n, n, n), axes=(0, 1, 2), dtype=dtype, slab=True, backend=backend)
    u = newDistArray(transform, False)
    u[:] = block  # the same slab as dmesh's Shard(0) block
    u_hat = newDistArray(transform, True)
    return (lambda: transform.forward(u, u_hat, normalize=False)), transform.destroy


def case(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, n: int, real: bool, repeats: int
) -> dict[str, Any]:
    rng = np.random.default_rng(n)
    full = rng.standard_normal((n, n, n))
    if not real:
        full = full + 1j * rng.standard_normal((n, n, n))
    transform = np.fft.rfftn if real else np.fft.fftn
    a = dmesh.distribute(full, mesh, [Shard(0)])
    pffts = [pfft_forward(comm, n, real, backend, a.local) for backend in ("fftw", "numpy")]
    fns = [lambda: transform(a)] + [f[0] for f in pffts if f is not None]
    times = alternating(comm, fns, 1, repeats)
    ours = times[0]
    pfft = times[1] if len(times) > 1 else None
    pfft_numpy = times[2] if len(times) > 2 else None
    for f in pffts:
        if f is not None:
            f[1]()
    got = transform(a)
    placements = got.placements
    # The check, outside the timings: each rank compares its block with NumPy's.
    expected = transform(full)
    block = expected[got.spec.layout.slices(mesh.coordinate)]
    error = float(np.max(np.abs(got.local - block)) / np.max(np.abs(expected)))
    error = comm.allreduce(error, op=MPI.MAX)
    del expected, block, got
    numpy_s = one_rank_time(comm, lambda: transform(full), repeats, warmup=True)
    # The transpose alone, on the complex data it moves (rfftn moves the half spectrum).
    shape = (n, n, n // 2 + 1) if real else (n, n, n)
    moving = dmesh.zeros(shape, mesh=mesh, placements=[Shard(0)], dtype=np.complex128)
    transpose = median_time(
        comm, lambda: moving.redistribute(mesh, [Shard(1)]), repeats, warmup=True
    )
    bare = raw_alltoall(comm, moving.local.nbytes, repeats)
    kind = "rfftn f64" if real else "fftn c128"
    return {
        "case": f"{kind} {n}^3",
        "placements": f"(S(0),) -> {shorts(placements)}",
        "dmesh_s": ours,
        "numpy_one_process_s": numpy_s,
        "speedup_vs_numpy": numpy_s / ours,
        "mpi4py_fft_s": pfft,
        "mpi4py_fft_numpy_s": pfft_numpy,
        "vs_mpi4py_fft": None if pfft is None else ours / pfft,
        "transpose_s": transpose,
        "raw_alltoall_s": bare,
        "max_relative_error": error,
    }


def main() -> int:
    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    mesh = dmesh.init_mesh(comm=comm)
    rows = [
        case(comm, mesh, 128, real=False, repeats=9),
        case(comm, mesh, 256, real=False, repeats=5),
        case(comm, mesh, 128, real=True, repeats=9),
    ]
    have_pfft = rows[0]["mpi4py_fft_s"] is not None
    if rank == 0:
        print(f"distributed FFT at {p} ranks, 1-D mesh, slab decomposition")
        print("(baseline: numpy.fft on one process, rank 0, same run)")
        if not have_pfft:
            print("mpi4py-fft not installed")
        head = f"{'case':<16} {'dmesh':>10} {'numpy 1p':>10} {'speed-up':>8}"
        head += f" {'transpose':>10} {'raw a2a':>10}"
        head += f" {'mpi4py-fft':>10} {'(numpy)':>10} {'ratio':>6}" if have_pfft else ""
        print(head + "  max rel. error")
        for r in rows:
            line = f"{r['case']:<16} {_fmt(r['dmesh_s']):>10} {_fmt(r['numpy_one_process_s']):>10}"
            line += f" {r['speedup_vs_numpy']:>8.2f} {_fmt(r['transpose_s']):>10}"
            line += f" {_fmt(r['raw_alltoall_s']):>10}"
            if have_pfft:
                line += f" {_fmt(r['mpi4py_fft_s']):>10} {_fmt(r['mpi4py_fft_numpy_s']):>10}"
                line += f" {r['vs_mpi4py_fft']:>6.2f}"
            print(f"{line}  {r['max_relative_error']:.1e}")
        write_results("fft", {"ranks": p, "mpi4py_fft": have_pfft, "rows": rows})
    ok = all(r["max_relative_error"] < 1e-12 for r in rows)
    mesh.close()
    comm.Free()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
