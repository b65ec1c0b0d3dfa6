"""Time under a latency-bandwidth model: ``alpha`` per message, ``beta`` per byte (pure).

Each collective is charged as the algorithm MPI libraries use for it (MPICH's
choices; Thakur, Rabenseifner and Gropp, "Optimization of Collective
Communication Operations in MPICH", 2005), for a group of ``p`` ranks with
``L = ceil(log2 p)`` rounds of recursive doubling or halving, where ``m`` is
this rank's input bytes and ``M`` its result bytes:

==================  ==============================================================
``all_reduce``      ``min(L (alpha + m beta), 2 L alpha + 2 (p-1)/p m beta)``:
                    recursive doubling for short vectors, reduce-scatter then
                    all-gather (Rabenseifner) for long ones
``all_gather``      ``L alpha + (M - m) beta``: what arrives from the others
``reduce_scatter``  ``L alpha + (m - M) beta``
``all_to_all``      ``(p-1) alpha + (p-1)/p m beta``: pairwise exchange
``permute``         ``alpha + max(m, M) beta``: one send and one receive, overlapped
``broadcast``       ``min(L (alpha + S beta), (L + p - 1) alpha + 2 (p-1)/p S beta)``
                    with ``S = max(m, M)``: binomial tree, or scatter + all-gather
``gather``,         ``L alpha + (p-1)/p S beta``: a binomial tree moving ``S``,
``scatter``         the larger of input and result
others              ``L alpha + max(m, M) beta``
==================  ==============================================================

The ``*_coalesced`` collectives cost what their base collective costs on the
packed buffer. A group of one rank costs nothing. An operation's time is the
slowest rank's: the sum of its calls' times (collectives synchronise).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dmesh.scaling.traffic import Call, Traffic

__all__ = ["Network", "fit", "messages_and_bytes"]


@dataclass(frozen=True)
class Network:
    """A latency-bandwidth model of a machine's MPI: seconds per message and per byte.

    ``latency_s`` is ``alpha``, the time of an empty message; ``bytes_per_s``
    is ``1 / beta``, bytes per second once a message streams.
    """

    latency_s: float
    bytes_per_s: float

    def __post_init__(self) -> None:
        if not (self.latency_s >= 0 and self.bytes_per_s > 0):
            raise ValueError(
                f"Network: latency_s must be >= 0 and bytes_per_s > 0, got "
                f"latency_s={self.latency_s!r}, bytes_per_s={self.bytes_per_s!r}"
            )

    def call_time(self, call: Call) -> float:
        """Seconds one collective call takes under this model."""
        alpha, terms = messages_and_bytes(call)
        return alpha * self.latency_s + terms / self.bytes_per_s

    def traffic_time(self, traffic: Traffic) -> float:
        """Seconds one rank spends in its calls, one after the other."""
        return sum(self.call_time(c) for c in traffic)

    def time(self, traffics: Sequence[Traffic]) -> float:
        """Seconds an operation spends communicating: its slowest rank's time."""
        return max((self.traffic_time(t) for t in traffics), default=0.0)


def messages_and_bytes(call: Call) -> tuple[float, float]:
    """The model's (messages on the critical path, bytes on it) for one call.

    Where MPI picks an algorithm by size (``all_reduce``, ``broadcast``), the
    cheaper one for a network with ``alpha`` worth 10 kB is taken, so the
    counts stay a property of the call.
    """
    p = call.group_size
    if p <= 1:
        return 0.0, 0.0
    rounds = math.ceil(math.log2(p))
    m, big = call.sent_bytes, call.received_bytes
    name = call.collective.removesuffix("_coalesced")
    if name == "all_reduce":
        return _cheaper((rounds, rounds * m), (2 * rounds, 2 * (p - 1) / p * m))
    if name == "all_gather":
        return rounds, max(big - m, 0)
    if name == "reduce_scatter":
        return rounds, max(m - big, 0)
    if name == "all_to_all":
        return p - 1, (p - 1) / p * m
    if name == "permute":
        return 1, max(m, big)
    size = max(m, big)
    if name == "broadcast":
        return _cheaper((rounds, rounds * size), (rounds + p - 1, 2 * (p - 1) / p * size))
    if name in ("gather", "scatter"):
        return rounds, (p - 1) / p * size
    return rounds, size


_ALPHA_IN_BYTES = 10_000.0  # for choosing an algorithm only (dmesh.core.plan's LATENCY_BYTES)


def _cheaper(*options: tuple[float, float]) -> tuple[float, float]:
    return min(options, key=lambda o: o[0] * _ALPHA_IN_BYTES + o[1])


def fit(samples: Iterable[tuple[Call, float]]) -> Network:
    """The network whose model best fits measured ``(call, seconds)`` pairs (least squares).

    Each sample gives one equation ``messages * alpha + bytes * beta = seconds``;
    ``alpha`` and ``beta`` are fitted without an intercept and kept positive.
    """
    rows = [(*messages_and_bytes(call), seconds) for call, seconds in samples]
    if len(rows) < 2:
        raise ValueError(f"fit: need at least two measured calls, got {len(rows)}")
    # Relative residuals: a 1 MB call's microseconds must not drown a 8 B call's.
    a11 = a12 = a22 = b1 = b2 = 0.0
    for n_msg, n_bytes, t in rows:
        w = 1.0 / (t * t) if t > 0 else 1.0
        a11 += w * n_msg * n_msg
        a12 += w * n_msg * n_bytes
        a22 += w * n_bytes * n_bytes
        b1 += w * n_msg * t
        b2 += w * n_bytes * t
    det = a11 * a22 - a12 * a12
    if det <= 0:
        raise ValueError("fit: the measured calls do not separate latency from bandwidth")
    alpha = (b1 * a22 - b2 * a12) / det
    beta = (a11 * b2 - a12 * b1) / det
    return Network(max(alpha, 0.0), 1.0 / max(beta, 1e-18))
