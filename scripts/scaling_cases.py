"""The cases ``bench_scaling.py`` times: strong scaling (one global problem) and weak (per rank).

Strong cases keep the global problem at every rank count; weak cases keep the
work per rank, so the global problem grows with ``p``. Each case's ``make(p)``
returns the full inputs (the same on every rank) and ``compute`` is NumPy code
that runs on DArrays and, as the baseline, on ndarrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


def heat_step(padded: np.ndarray, alpha: float = 0.1) -> np.ndarray:
    """Explicit 5-point heat step on the interior of a block padded by one cell."""
    out = np.empty_like(padded)  # the padding is trimmed; only the interior is written
    c = padded[1:-1, 1:-1]
    lap = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * c
    out[1:-1, 1:-1] = c + alpha * lap
    return out


@dataclass(frozen=True)
class Case:
    """One scaling case: its inputs at ``p`` ranks, their placements, and the NumPy code."""

    name: str
    make: Callable[[int], list[np.ndarray]]  # the full inputs at p ranks, the same on every rank
    placements: list[str]  # per input: "S(0)" or "R"
    compute: Callable[..., Any]  # NumPy code: runs on DArrays and, as baseline, on ndarrays
    calls: int  # per timed batch
    repeats: int  # batches


def stencil(u: Any) -> Any:
    """One heat step with a zero boundary: ``map_overlap`` on a DArray, ``np.pad`` on an ndarray."""
    if isinstance(u, np.ndarray):
        return heat_step(np.pad(u, 1))[1:-1, 1:-1]
    import dmesh

    return dmesh.map_overlap(heat_step, u, 1, boundary=0.0)


def _normal(seed: int, *shape: int) -> list[np.ndarray]:
    return [np.random.default_rng(seed).standard_normal(shape)]


def _complex(seed: int, *shape: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) + 1j * rng.standard_normal(shape)]


def _total(a: Any) -> float:
    return float(np.sum(a))


def _matmul(a: Any, b: Any) -> Any:
    return a @ b


def _weak_matmul(p: int) -> list[np.ndarray]:
    return _normal(4, 512 * p, 1024) + _normal(5, 1024, 1024)


STRONG = [
    Case("matmul 2048^2 S(0) @ R", lambda p: _normal(0, 2048, 2048) * 2, ["S(0)", "R"],
         _matmul, 1, 9),
    Case("heat step 4096^2 map_overlap", lambda p: _normal(2, 4096, 4096), ["S(0)"],
         stencil, 1, 11),
    Case("fftn 128^3 c128", lambda p: _complex(1, 128, 128, 128), ["S(0)"], np.fft.fftn, 1, 15),
    Case("sum 2e7 f64", lambda p: [np.random.default_rng(3).random(2 * 10**7)], ["S(0)"],
         _total, 10, 15),
]  # fmt: skip

# Per rank: a (512, 1024) @ (1024, 1024) product, a 1024^2 heat step, a 32 x 64^2
# slab of the FFT, 5 x 10^6 summed elements.
WEAK = [
    Case("matmul (512p x 1024) @ 1024^2", _weak_matmul, ["S(0)", "R"], _matmul, 1, 9),
    Case("heat step (1024p x 1024)", lambda p: _normal(6, 1024 * p, 1024), ["S(0)"],
         stencil, 1, 11),
    Case("fftn (32p x 64 x 64) c128", lambda p: _complex(7, 32 * p, 64, 64), ["S(0)"],
         np.fft.fftn, 1, 15),
    Case("sum 5e6 per rank f64", lambda p: [np.random.default_rng(8).random(5 * 10**6 * p)],
         ["S(0)"], _total, 10, 15),
]  # fmt: skip
