"""FFTs in a compiled function are recorded, not graph breaks (issue 29, item 4).

``np.fft``'s n-D transforms plan their passes and transposes from the layout
alone (``dmesh.core.fft_plan``), so a trace records each pass of local
transforms as a node on the block and each transpose as a redistribution: a
pseudo-spectral step traces whole and replays with eager's bits. Checked on
row-, column- and 2-D-sharded, replicated and uneven (even empty) blocks, with
``s=``, ``axes=`` and every ``norm``, and hostile values (NaN, inf, -0.0). A
1-D array sharded along its only axis (the four-step FFT, which multiplies
blocks by twiddles itself) still breaks the graph, and the compiled function
still answers as eager does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI
from test_compile import _against_eager, _placements, _same, _uneven, _whole_against_eager

import dmesh
from dmesh import Replicate, Shard, compile
from helpers import assert_all


def _spectral_step(w: Any, k: Any) -> Any:
    w_hat = np.fft.rfft2(w)
    u = np.fft.irfft2(1j * k * w_hat, s=w.shape)
    v = np.fft.irfft2(-1j * k * w_hat, s=w.shape)
    return np.fft.rfft2(u * v) * 0.5 + w_hat, u.sum()


def _complex_passes(z: Any) -> Any:
    y = np.fft.fftn(z, axes=(0, 1), norm="ortho")
    x = np.fft.ifft2(y * 2.0, norm="forward")
    return np.fft.fft(x, n=6, axis=0), np.fft.ifft(x, axis=1, norm="backward")


def _grid(rows: int, cols: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, cols))
    x[0, 0], x[1, 2], x[-1, -1] = np.nan, np.inf, -0.0
    return x


@pytest.mark.parametrize("shape", [(8, 6), (5, 4)], ids=str)
def test_fft_steps_trace_whole(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, shape: tuple[int, int]
) -> None:
    found: list[str] = []
    for placements in _placements(mesh):
        w = dmesh.distribute(_grid(*shape, 0), mesh, placements)
        k = dmesh.distribute(
            np.fft.rfftfreq(shape[1])[None, :] * np.ones((shape[0], 1)),
            mesh,
            [Replicate()] * mesh.ndim,
        )
        try:
            found += _whole_against_eager(_spectral_step, (w, k), f"rfft2 {placements}")
        except dmesh.UnsupportedError:  # the planner found no axis to take the sharding
            continue
        z = dmesh.distribute(_grid(*shape, 1) + 1j * _grid(*shape, 2), mesh, placements)
        found += _whole_against_eager(_complex_passes, (z,), f"fftn {placements}")
    assert_all(comm, not found, "; ".join(found[:3]))


def test_uneven_and_empty_blocks(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    grid = _grid(4, 6, 3)  # 3 rows over up to 4 ranks once cut: an empty block
    w = _uneven(mesh, grid)
    k = dmesh.distribute(np.ones((4, 4)), mesh, [Replicate()] * mesh.ndim)
    compiled = compile(_spectral_step, segments="always")
    found = _against_eager(compiled, _spectral_step, (w, k), "uneven")
    assert_all(comm, not found and not compiled.breaks, f"{found[:2]} {compiled.breaks}")


def test_a_sharded_1d_fft_still_breaks(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    def spectrum(x: Any) -> Any:
        return np.fft.fft(x * 2.0) + 1.0

    x = dmesh.distribute(np.arange(16.0) - 5.5, mesh, [Shard(0)] * mesh.ndim)
    compiled = compile(spectrum, segments="always")
    message = _same(compiled(x), spectrum(x))
    message = message or _same(compiled(x), spectrum(x))
    assert_all(comm, not message, message)
    sharded = int(np.prod(mesh.shape)) > 1
    assert_all(comm, bool(compiled.breaks) == sharded, f"breaks: {compiled.breaks}")


def test_ffts_in_segments(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A value read between two transforms (a graph break): the FFTs on both sides are
    recorded into segments, each run as one plan, with eager's bits."""

    def damped(w: Any) -> Any:
        w_hat = np.fft.rfft2(w)
        scale = float(np.max(np.abs(w_hat)))  # read: the segment ends here
        return np.fft.irfft2(w_hat / scale, s=w.shape), scale

    w = _uneven(mesh, np.random.default_rng(7).standard_normal((6, 4)))  # (finite: a NaN
    # scale would make every value NaN, and NaN != NaN)
    compiled = compile(damped, segments="always")
    found = _against_eager(compiled, damped, (w,), "segments")
    assert_all(comm, not found and bool(compiled.breaks), f"{found[:2]} {compiled.breaks}")
    assert_all(comm, compiled.segment_runs > 0, "no segment ran")
