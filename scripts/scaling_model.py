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


def case_traffic(case: str, p: int) -> tuple[list[Traffic], float]:
    """A strong-scaling case's traffic on a 1-D mesh of ``p`` ranks (its ``dmesh.scaling``
    formula) and the largest block's share of the work."""
    from dmesh import Replicate, Shard
    from dmesh.scaling import contractions, fft, halo, reductions

    mesh, row = (p,), [Shard(0)]
    if case.startswith("matmul 2048^2"):
        traffic = contractions.matmul(mesh, (2048, 2048), (2048, 2048), 8, row, [Replicate()])
        return traffic, largest_share(2048, p)
    if case.startswith("heat step 4096^2"):
        return halo.map_overlap(mesh, (4096, 4096), 8, row, 1), largest_share(4096, p)
    if case.startswith("fftn 128^3"):
        traffic = fft.fftn_transposes(mesh, (128, 128, 128), np.complex128, row)
        return traffic, largest_share(128, p)
    if case.startswith("sum 2e7"):
        return reductions.reduction(mesh, (2 * 10**7,), 8, row, then="item"), largest_share(
            2 * 10**7, p
        )
    raise KeyError(f"scaling_model: no traffic formula for the case {case!r}")


def report(doc: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
    """Fit the network to ``measured``, print the fit and the predictions; return them."""
    network = fitted(measured)
    ratios = []
    for s in measured["samples"]:
        call = Call(s["collective"], s["group_size"], s["sent_bytes"], s["received_bytes"])
        ratios.append(network.call_time(call) / s["seconds"])
    low, high = min(ratios), max(ratios)
    print(f"model fitted at {measured['ranks']} ranks to {len(ratios)} collective calls "
          f"(8 B - 16 MiB): model / measured from {low:.2f} to {high:.2f}")  # fmt: skip
    for name, (alpha, rate) in sorted(network.by_collective.items()):
        print(f"  {name:<15} alpha = {alpha * 1e6:6.2f} us, bandwidth = {rate / 1e9:6.2f} GB/s")
    measured_s = {(r["case"], r["ranks"]): r["time_s"] for r in doc["rows"]}
    at = sorted({1, 2} | set(PREDICT_AT))
    head = f"{'case':<30} {'1 rank':>10} {'2 ranks':>10} |" + "".join(f" {p:>10}" for p in at)
    lines = ["measured | predicted at p ranks (the communication's share)", head]
    predictions = []
    for case in dict.fromkeys(r["case"] for r in doc["rows"]):
        t1 = measured_s.get((case, 1))
        if t1 is None:
            continue
        cells = []
        for p in at:
            traffic, share = case_traffic(case, p)
            total, comm_s = predict(t1, share, traffic, network)
            predictions.append({"case": case, "ranks": p, "time_s": total, "comm_s": comm_s})
            cells.append(f" {_short(total):>10}")
        two = measured_s.get((case, 2))
        lines.append(f"{case:<30} {_short(t1):>10} {_short(two) if two else '-':>10} |"
                     + "".join(cells))  # fmt: skip
        shares = [r["comm_s"] / r["time_s"] for r in predictions[-len(at) :]]
        lines.append(
            f"{'':<30} {'':>10} {'':>10} |" + "".join(f" {f'({x:.0%})':>10}" for x in shares)
        )
    print("\n".join(lines))
    return {
        "network": {"latency_s": network.latency_s, "bytes_per_s": network.bytes_per_s,
                    "by_collective": dict(network.by_collective)},
        "fit_ratio_range": [min(ratios), max(ratios)],
        "predictions": predictions,
    }  # fmt: skip


def _short(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(measure(Path(sys.argv[1])))
