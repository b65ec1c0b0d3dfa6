"""The scaling model fitted to this machine: measured collectives in, predicted times out.

``bench_scaling.py --model`` runs this twice:

1. under ``mpiexec -n P`` (``--measure OUT``, P the largest rank count the
   bench ran, at least 2): times ``all_reduce``, ``all_gather``,
   ``all_to_all``, ``reduce_scatter`` and ``permute`` of 8 B to 8 MiB per rank
   through ``dmesh.collectives``, records each call with ``CommMode`` (its exact
   bytes, as ``dmesh.scaling.Call``), and writes ``(call, seconds)`` pairs;
2. in the driver: fits ``dmesh.scaling.Network``'s latency and bandwidth to
   them (least squares on relative error) and, for each strong-scaling case,
   predicts the time at ``p`` ranks as the 1-rank time scaled by the largest
   block's share of the work, plus the case's communication from its
   ``dmesh.scaling`` formula under the fitted network.

The prediction leaves out what the model cannot know (noise, shared links,
memory bandwidth shared by ranks of a node), so the measured 2-rank time
beside the predicted one shows how far to trust it on this machine.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dmesh.scaling import Call, Network, Traffic, block_sizes, fit

SIZES = [8 * 8**k for k in range(8)]  # 8 B .. 16 MiB per rank, in float64 elements * 8
PREDICT_AT = [16, 256, 4096]


# -- measuring (under mpiexec) ---------------------------------------------------------


def measure(out: Path) -> int:
    """Time the collectives at every size on COMM_WORLD; rank 0 writes ``out`` (collective)."""
    from bench_timing import median_time
    from mpi4py import MPI

    from dmesh.debug import CommMode

    comm = MPI.COMM_WORLD.Dup()
    p, rank = comm.Get_size(), comm.Get_rank()
    ring = [(r, (r + 1) % p) for r in range(p)]
    samples = []
    for size in SIZES:
        n = max(size // 8, 1)
        x = np.random.default_rng(rank).random(n)
        rows = max(n // p, 1) * p  # all_to_all and reduce_scatter split the rows evenly
        y = np.random.default_rng(rank).random(rows)
        for fn in _collectives(comm, x, y, ring):
            with CommMode() as mode:
                fn()
            record = mode.records[0]
            call = Call(record.collective, p, record.sent_bytes, record.received_bytes)
            repeats = 31 if size <= 65536 else 11
            seconds = median_time(comm, fn, repeats, warmup=True)
            samples.append({**call.__dict__, "seconds": seconds})
    if rank == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"ranks": p, "samples": samples}, indent=1))
    comm.Free()
    return 0


def _collectives(
    comm: Any, x: np.ndarray, y: np.ndarray, ring: list[tuple[int, int]]
) -> list[Callable[[], Any]]:
    """The measured calls on ``x`` (any length) and ``y`` (rows a multiple of the ranks)."""
    import dmesh.collectives as C

    return [
        lambda: C.all_reduce(x, "sum", comm),
        lambda: C.all_gather(x, 0, comm),
        lambda: C.all_to_all(y, 0, 0, comm),
        lambda: C.reduce_scatter(y, "sum", 0, comm),
        lambda: C.permute(x, ring, comm),
    ]


def fitted(doc: dict[str, Any]) -> Network:
    """The network fitted to a ``measure`` document's samples."""
    pairs = []
    for s in doc["samples"]:
        call = Call(s["collective"], s["group_size"], s["sent_bytes"], s["received_bytes"])
        pairs.append((call, float(s["seconds"])))
    return fit(pairs, by_collective=True)


def fit_table(doc: dict[str, Any], network: Network) -> str:
    """Each measured call's time beside the fitted model's."""
    lines = [f"{'collective':<16} {'bytes/rank':>10} {'measured':>10} {'model':>10} {'ratio':>6}"]
    for s in doc["samples"]:
        call = Call(s["collective"], s["group_size"], s["sent_bytes"], s["received_bytes"])
        model = network.call_time(call)
        lines.append(
            f"{call.collective:<16} {call.sent_bytes:>10} {_us(s['seconds']):>10} "
            f"{_us(model):>10} {model / s['seconds']:>6.2f}"
        )
    return "\n".join(lines)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


# -- predicting ------------------------------------------------------------------------


def largest_share(rows: int, p: int) -> float:
    """The largest block's share of ``rows`` rows over ``p`` ranks (1/p when even)."""
    return max(block_sizes(rows, p)) / rows


def predict(
    t1_s: float,
    share: float,
    traffic: Sequence[Traffic],
    network: Network,
) -> tuple[float, float]:
    """(predicted time, its communication part) from the 1-rank time and the traffic."""
    comm_s = network.time(traffic)
    return t1_s * share + comm_s, comm_s


def speedup_limit(t1_s: float, comm_s: float) -> float:
    """How many times faster than 1 rank the case can get while communication stays."""
    return math.inf if comm_s == 0 else t1_s / comm_s


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(measure(Path(sys.argv[1])))
