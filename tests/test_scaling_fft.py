"""The FFT formulas of ``dmesh.scaling.fft`` against ``CommMode``'s records and ``numpy.fft``.

On every 1-D and 2-D mesh of the world size: ``fftn``, ``ifftn``, ``rfftn``,
``irfftn``, ``fft2`` and ``fft`` along one axis of 2-D and 3-D arrays in slab
(one sharded axis) and pencil (two) layouts, a nested sharding and
replicated ones, and the four-step ``fft``, ``ifft``, ``rfft`` of sharded 1-D
arrays (with ``n`` padding). Shapes give even, uneven and empty blocks at 1-4
ranks; dtypes are float64, complex128, float32 and int32. Each call's
collectives must be the formula's, exactly, the output placements
``fftn_layout``'s, and the values NumPy's.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from traffic_checks import check_traffic, recorded

import dmesh
from dmesh import Replicate, Shard
from dmesh.core.placement import Placement
from dmesh.scaling.fft import fft_four_step, fftn_layout, fftn_transposes, fftshift
from helpers import Verdict

# 8 splits evenly at 1, 2, 4 ranks; 5, 6, 3 unevenly, and 3 or 2 leave empty blocks at 4.
CASES = [((8, 4, 6), np.complex128), ((5, 3, 2), np.float64), ((6, 8), np.float32),
         ((3, 5), np.int32)]  # fmt: skip
# (name, kind, s, axes, the NumPy call)
CALLS: list[tuple[str, str, Any, Any, Callable[[Any], Any]]] = [
    ("fftn", "fft", None, None, np.fft.fftn),
    ("ifftn", "ifft", None, None, np.fft.ifftn),
    ("rfftn", "rfft", None, None, np.fft.rfftn),
    ("irfftn", "irfft", None, None, np.fft.irfftn),
    ("fft2", "fft", None, (-2, -1), np.fft.fft2),
    ("ifft axis 0", "ifft", None, (0,), lambda a: np.fft.ifft(a, axis=0)),
    ("fftn s", "fft", (4, 7), (0, 1), lambda a: np.fft.fftn(a, (4, 7), (0, 1))),
]


def layouts(ndim: int, mesh_ndim: int) -> list[tuple[Placement, ...]]:
    if mesh_ndim == 1:
        return [(Shard(d),) for d in range(ndim)] + [(Replicate(),)]
    every = [(Shard(0), Shard(1)), (Shard(1), Shard(ndim - 1)), (Shard(0), Replicate()),
             (Replicate(), Shard(0)), (Shard(0), Shard(0))]  # fmt: skip
    return [p for p in every if all(not isinstance(q, Shard) or q.dim < ndim for q in p)]


def data_of(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    values = np.arange(1, 1 + int(np.prod(shape))).reshape(shape) % 7
    return (
        values * (1 - 0.5j) + 0.25j * (values % 3) if dtype is np.complex128 else values
    ).astype(dtype)


def test_fftn(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        for (shape, dtype), (name, kind, s, axes, call) in itertools.product(CASES, CALLS):
            full = data_of(shape, dtype)
            if kind == "rfft" and full.dtype.kind == "c":
                continue  # NumPy's rfftn takes real input only
            if kind == "irfft":
                full = full + 0.5j * (full.real > 2)  # a complex input
            for placements in layouts(len(shape), m.ndim):
                a = dmesh.distribute(full, m, list(placements))
                label = f"{name} of {full.dtype}{list(shape)} {placements}"
                predicted = fftn_transposes(m.shape, shape, full.dtype, placements, kind, s, axes)
                out, got = recorded(functools.partial(call, a))
                check_traffic(m, predicted, got, label)
                v.check(
                    out.placements == fftn_layout(m.shape, shape, placements, kind, s, axes),
                    f"{label}: placements {out.placements}",
                )
                want = call(full)
                v.equal(out.local, want[out.spec.layout.slices(m.coordinate)], rtol=1e-5, atol=1e-4)


def test_fft_four_step(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    one_d = [(Shard(0),)] if m.ndim == 1 else [(Shard(0), Replicate()), (Replicate(), Shard(0)),
                                               (Shard(0), Shard(0))]  # fmt: skip
    checked = 0
    with Verdict(m.comm()) as v:
        for length, n, dtype in [(16, None, np.complex128), (12, None, np.float64),
                                 (9, 20, np.float32), (36, None, np.int32)]:  # fmt: skip
            full = data_of((length,), dtype)
            for placements, kind in itertools.product(one_d, ("fft", "ifft", "rfft", "irfft")):
                if kind == "rfft" and full.dtype.kind == "c":
                    continue  # NumPy's rfft takes real input only
                label = f"{kind} of {full.dtype}[{length}] n={n} {placements}"
                try:
                    predicted = fftn_transposes(m.shape, (length,), full.dtype, placements, kind,
                                                None if n is None else (n,))  # fmt: skip
                except ValueError:  # Bluestein's length: not modelled
                    continue
                call = getattr(np.fft, kind)
                a = dmesh.distribute(full, m, list(placements))
                out, got = recorded(functools.partial(call, a, n))
                check_traffic(m, predicted, got, label)
                want = call(full, n)
                v.equal(out.local, want[out.spec.layout.slices(m.coordinate)], rtol=1e-5, atol=1e-4)
                checked += 1
    assert checked, "no four-step case was checked"


def test_fftshift(traffic_mesh: dmesh.DeviceMesh) -> None:
    m = traffic_mesh
    with Verdict(m.comm()) as v:
        for shape, dtype in [((8, 5), np.complex128), ((5, 3, 2), np.int32), ((3,), np.float64)]:
            full = data_of(shape, dtype)
            s = full.dtype.itemsize
            for placements, axes, inverse in itertools.product(
                layouts(len(shape), m.ndim), (None, (0,), (-1, 0)), (False, True)
            ):
                label = f"fftshift inverse={inverse} {full.dtype}{list(shape)} {placements} {axes}"
                predicted = fftshift(m.shape, shape, s, placements, axes, inverse)
                call = np.fft.ifftshift if inverse else np.fft.fftshift
                a = dmesh.distribute(full, m, list(placements))
                out, got = recorded(functools.partial(call, a, axes))
                check_traffic(m, predicted, got, label)
                want = call(full, axes)
                v.equal(out.local, want[out.spec.layout.slices(m.coordinate)])


@pytest.mark.pure
def test_four_step_directly() -> None:
    """``fft_four_step`` is what ``fftn_transposes`` gives a sharded 1-D array."""
    assert fft_four_step((2,), 16, np.complex128, (Shard(0),)) == fftn_transposes(
        (2,), (16,), np.complex128, (Shard(0),)
    )
