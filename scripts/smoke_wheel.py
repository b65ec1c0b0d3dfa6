"""The smoke program that ``make package`` runs against an installed wheel.

``scripts/check_package.py`` copies this file into a temporary directory that
also holds an ``ops.py`` and a ``collectives.py`` which raise ImportError when
imported, and runs it there under ``mpiexec -n 2`` with the fresh virtual
environment's Python. Python puts the script's directory first on
``sys.path``, so any import of a top-level ``ops`` or ``collectives`` by dmesh
would pick those files up and fail: the program proves that ``dmesh`` is the
only import name the wheel needs.

It checks, on every rank, against one-process NumPy:

- dmesh was imported from the installed wheel, not from a source tree;
- a DArray op (elementwise arithmetic and a reduction over a sharded axis);
- an FFT (``np.fft.fftn`` of a sharded 2-D array);
- a checkpoint round trip (``save_checkpoint`` then ``load_checkpoint``).

Verdicts are agreed over all ranks, so every rank exits 1 together on a
failure; rank 0 prints one line per check.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import cast

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard


def _agree(comm: MPI.Intracomm, name: str, ok: bool, detail: str) -> bool:
    """Every rank's verdict on one check, and-ed over the ranks; rank 0 reports it."""
    everywhere = bool(comm.allreduce(ok, op=MPI.LAND))
    if comm.Get_rank() == 0:
        print(f"{'ok  ' if everywhere else 'FAIL'} {name}" + ("" if everywhere else f": {detail}"))
    if not ok:
        print(f"[rank {comm.Get_rank()}] {name}: {detail}", file=sys.stderr)
    return everywhere


def check_import_source() -> tuple[bool, str]:
    """dmesh comes from site-packages, and the trap files are the ones on the path."""
    where = Path(dmesh.__file__).resolve()
    if "site-packages" not in where.parts:
        return False, f"dmesh was imported from {where}, not from an installed wheel"
    here = Path(__file__).resolve().parent
    for name in ("ops", "collectives"):
        spec = importlib.util.find_spec(name)
        origin = None if spec is None or spec.origin is None else Path(spec.origin).resolve()
        if origin != here / f"{name}.py":
            return False, f"top-level {name!r} resolves to {origin}, expected this directory's"
    return True, ""


def check_darray_op(mesh: dmesh.DeviceMesh, x: np.ndarray) -> tuple[bool, str]:
    """Elementwise arithmetic and a reduction over the sharded axis equal NumPy's."""
    a = dmesh.distribute(x, mesh, [Shard(0)])
    got = np.sum(a * 2.0 + 1.0, axis=0).full_array()
    want = np.sum(x * 2.0 + 1.0, axis=0)
    return bool(np.allclose(got, want)), f"got {got}, NumPy gives {want}"


def check_fft(mesh: dmesh.DeviceMesh, x: np.ndarray) -> tuple[bool, str]:
    """``np.fft.fftn`` of a row-sharded 2-D DArray equals NumPy's on the whole array."""
    a = dmesh.distribute(x, mesh, [Shard(0)])
    got = cast(dmesh.DArray, np.fft.fftn(a)).full_array()  # NumPy's stubs say ndarray
    want = np.fft.fftn(x)
    error = float(np.max(np.abs(got - want)))
    return bool(np.allclose(got, want)), f"largest difference from NumPy {error:.3g}"


def check_checkpoint(mesh: dmesh.DeviceMesh, x: np.ndarray) -> tuple[bool, str]:
    """A checkpoint saved and loaded back holds the same arrays and metadata."""
    path = str(Path.cwd() / "checkpoint")  # the working directory, the same on every rank
    a = dmesh.distribute(x, mesh, [Shard(0)])
    r = dmesh.distribute(x[:3], mesh, [Replicate()])
    dmesh.save_checkpoint(path, {"a": a, "r": r}, metadata={"step": 7})
    arrays, metadata = dmesh.load_checkpoint(path, mesh)
    same = (
        metadata == {"step": 7}
        and np.array_equal(arrays["a"].full_array(), x)
        and np.array_equal(arrays["r"].full_array(), x[:3])
    )
    return bool(same), f"metadata {metadata}, arrays {sorted(arrays)}"


def main() -> int:
    """Run the checks on a 1-D mesh over all ranks; 0 when all pass everywhere."""
    comm = MPI.COMM_WORLD
    x = np.random.default_rng(0).standard_normal((9, 6))  # 9 rows: uneven at 2 ranks
    all_ok = _agree(comm, "dmesh imported from the wheel", *check_import_source())
    with dmesh.init_mesh() as mesh:
        all_ok &= _agree(comm, "DArray op against NumPy", *check_darray_op(mesh, x))
        all_ok &= _agree(comm, "FFT against NumPy", *check_fft(mesh, x))
        all_ok &= _agree(comm, "checkpoint round trip", *check_checkpoint(mesh, x))
    if comm.Get_rank() == 0:
        print(f"smoke: {'passed' if all_ok else 'FAILED'} at {comm.Get_size()} ranks")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
