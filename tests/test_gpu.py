"""Collectives and meshes on CuPy arrays: staged through the host and, where the MPI
library is CUDA-aware, passed directly. Skipped where no GPU is present."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh.collectives as C
from helpers import assert_all, assert_equal_all
from references import rank_array, reduce_reference


def _gpu_count() -> int:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU here"
        return 0


# Every rank decides alike: a rank without a GPU would otherwise skip while
# the others wait for it in a collective.
HAVE_GPU = bool(MPI.COMM_WORLD.allreduce(_gpu_count() > 0, op=MPI.LAND))
pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="needs CuPy and a GPU on every rank")


@pytest.fixture(params=["staged", "auto"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run each test with host staging forced, then with the library's own answer."""
    if request.param == "staged":
        monkeypatch.setenv("DMESH_GPU_AWARE_MPI", "0")
    else:
        monkeypatch.delenv("DMESH_GPU_AWARE_MPI", raising=False)
    import cupy

    cupy.cuda.Device(MPI.COMM_WORLD.Get_rank() % _gpu_count()).use()
    return str(request.param)


def _on_gpu(comm: MPI.Intracomm, result: Any) -> None:
    import cupy

    assert_all(comm, isinstance(result, cupy.ndarray), f"expected a cupy array, got {type(result)}")


def test_collectives_on_device_arrays(comm: MPI.Intracomm, transport: str) -> None:
    import cupy

    n, rank = comm.Get_size(), comm.Get_rank()
    inputs = [rank_array((n + 1, 3), np.float64, r) for r in range(n)]
    x = cupy.asarray(inputs[rank])
    total = C.all_reduce(x, "sum", comm)
    _on_gpu(comm, total)
    assert_equal_all(comm, total.get(), reduce_reference("sum", inputs), rtol=1e-13)
    piece = C.reduce_scatter(x, "max", 1, comm)
    expected = np.array_split(reduce_reference("max", inputs), n, axis=1)[rank]
    assert_equal_all(comm, piece.get(), expected)
    uneven = [rank_array((r % 3, 2), np.int32, r) for r in range(n)]
    gathered = C.all_gather(cupy.asarray(uneven[rank]), 0, comm)
    _on_gpu(comm, gathered)
    assert_equal_all(comm, gathered.get(), np.concatenate(uneven))
    exchanged = C.all_to_all(x, 0, 1, comm)
    parts = [np.array_split(a, n, axis=0)[rank] for a in inputs]
    assert_equal_all(comm, exchanged.get(), np.concatenate(parts, axis=1))
    shifted = C.permute(x, [(r, (r + 1) % n) for r in range(n)], comm)
    assert_equal_all(comm, shifted.get(), inputs[(rank - 1) % n])


def test_rooted_collectives_on_device_arrays(comm: MPI.Intracomm, transport: str) -> None:
    import cupy

    n, rank = comm.Get_size(), comm.Get_rank()
    full = rank_array((2 * n + 1, 2), np.float32, 7)
    got = C.broadcast(cupy.asarray(full) if rank == 0 else None, 0, comm)
    _on_gpu(comm, got)
    assert_equal_all(comm, got.get(), full)
    piece = C.scatter(cupy.asarray(full) if rank == 0 else None, 0, 0, comm)
    _on_gpu(comm, piece)
    assert_equal_all(comm, piece.get(), np.array_split(full, n)[rank])
    back = C.gather(piece, 0, 0, comm)
    ok = back is None if rank else bool((back.get() == full).all())
    assert_all(comm, ok, "gather of the scattered pieces differs from the input")


def test_async_and_coalesced_on_device_arrays(comm: MPI.Intracomm, transport: str) -> None:
    import cupy

    n, rank = comm.Get_size(), comm.Get_rank()
    inputs = [rank_array((1 << 16,), np.float64, r) for r in range(n)]
    x = cupy.asarray(inputs[rank])
    pending = C.all_reduce(x, "avg", comm, async_op=True)
    assert_all(comm, isinstance(pending, C.AsyncArray))
    # Sums grouped differently: cancellation leaves ~1e-17 absolute differences.
    want = reduce_reference("avg", inputs)
    assert_equal_all(comm, np.asarray(pending), want, rtol=1e-13, atol=1e-15)
    both = C.all_reduce_coalesced([x, x[:5]], "sum", comm)
    _on_gpu(comm, both[0])
    assert_equal_all(comm, both[1].get(), reduce_reference("sum", inputs)[:5], rtol=1e-13)


def test_cuda_mesh_binds_a_device(comm: MPI.Intracomm) -> None:
    import cupy

    import dmesh

    with dmesh.init_mesh(comm=comm, device="cuda") as mesh:
        ok = mesh.device == "cuda" and cupy.cuda.Device().id < _gpu_count()
        total = C.all_reduce(cupy.ones(3), "sum", mesh)
        ok = ok and bool((total == comm.Get_size()).all())
    assert_all(comm, ok)


def test_darrays_on_a_cuda_mesh(comm: MPI.Intracomm, transport: str) -> None:
    import cupy

    import dmesh
    from dmesh import Replicate, Shard

    a = np.arange(35.0).reshape(7, 5)
    with dmesh.init_mesh(comm=comm, device="cuda") as mesh:
        d = dmesh.distribute(a, mesh, [Shard(0)])
        ok = isinstance(d.local, cupy.ndarray)
        moved = d.redistribute(mesh, [Shard(1)])
        ok = ok and isinstance(moved.local, cupy.ndarray)
        assert_equal_all(comm, cupy.asnumpy(moved.full_array()), a)
        assert_equal_all(comm, cupy.asnumpy(d.redistribute(mesh, [Replicate()]).local), a)
        dmesh.random.seed(5)
        on_gpu = cupy.asnumpy(dmesh.random.uniform(size=(6, 4), mesh=mesh).full_array())
        with dmesh.init_mesh((1,), comm=MPI.COMM_SELF) as alone:
            dmesh.random.seed(5)
            on_cpu = dmesh.random.uniform(size=(6, 4), mesh=alone).full_array()
    assert_all(comm, ok, "blocks of a cuda mesh are CuPy arrays")
    assert_equal_all(comm, on_gpu, on_cpu)


def test_ops_on_a_cuda_mesh(comm: MPI.Intracomm) -> None:
    """NumPy calls on DArrays with CuPy blocks give NumPy's answers (each op checked alone)."""
    import cupy

    import dmesh
    from dmesh import Replicate, Shard

    a = np.arange(48.0).reshape(8, 6) % 7 - 2.0
    v = np.arange(6.0)
    cube = (np.arange(4 * 6 * 5).reshape(4, 6, 5) % 5).astype(np.complex128)
    cases = {
        "a + b": (lambda d: d["a"] + d["a"] * 2.0, a + a * 2.0),
        "float(sum)": (lambda d: float(np.sum(d["a"])), float(np.sum(a))),
        "max(axis=0)": (lambda d: np.max(d["a"], axis=0), np.max(a, axis=0)),
        "matmul": (lambda d: d["a"] @ d["v"], a @ v),
        "where=": (lambda d: np.sum(d["a"], where=d["a"] > 0), np.sum(a, where=a > 0)),
        "cumsum": (lambda d: np.cumsum(d["a"], axis=0), np.cumsum(a, axis=0)),
        "sort": (lambda d: np.sort(d["a"], axis=0), np.sort(a, axis=0)),
        "unique": (lambda d: np.unique(d["a"]), np.unique(a)),
        "take": (lambda d: d["a"][[5, 0, 7]], a[[5, 0, 7]]),
        "mask": (lambda d: d["a"][d["a"] > 1], a[a > 1]),
        "flip": (lambda d: np.flip(d["a"], 0), np.flip(a, 0)),
        "halo": (lambda d: dmesh.halo(d["a"], 1, periodic=True), None),
        "fftn": (lambda d: np.fft.fftn(d["cube"]), np.fft.fftn(cube)),
        "qr.r": (lambda d: np.abs(np.linalg.qr(d["a"], mode="r")), np.abs(np.linalg.qr(a, "r"))),
    }
    failures = []
    with dmesh.init_mesh(comm=comm, device="cuda") as mesh:
        arrays = {
            "a": dmesh.distribute(a, mesh, [Shard(0)]),
            "v": dmesh.distribute(v, mesh, [Replicate()]),
            "cube": dmesh.distribute(cube, mesh, [Shard(0)]),
        }
        for name, (fn, want) in cases.items():
            try:
                got = fn(arrays)
                if name == "halo":
                    block = arrays["a"].spec.layout.block(mesh.coordinate)
                    full = np.pad(a, 1, mode="wrap")
                    want = full[tuple(slice(lo, hi + 2) for lo, hi in block)]
                    got_np = cupy.asnumpy(got)
                elif isinstance(got, dmesh.DArray):
                    if not isinstance(got.local, cupy.ndarray):
                        raise TypeError(f"block is {type(got.local).__name__}, not cupy")
                    got_np = cupy.asnumpy(got.full_array())
                else:
                    got_np = np.asarray(got)
                if not np.allclose(got_np, want, rtol=1e-12, atol=1e-12):
                    raise AssertionError(f"{got_np} != {want}")
            except Exception as exc:  # collect every op's verdict
                failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
    assert_all(comm, not failures, "\n".join(failures))
