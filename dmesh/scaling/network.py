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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dmesh.scaling.traffic import Call, Traffic

__all__ = ["Network", "fit", "messages_and_bytes"]


@dataclass(frozen=True)
class Network:
    """A latency-bandwidth model of a machine's MPI: seconds per message and per byte.

    ``latency_s`` is ``alpha``, the time of an empty message; ``bytes_per_s``
    is ``1 / beta``, bytes per second once a message streams. ``by_collective``
    maps a collective's name (``"all_gather"``) to its own ``(latency_s,
    bytes_per_s)``, for a machine where collectives stream at different rates
    (a reduction's arithmetic and an all-gather's larger result are per-byte
    costs too); the others use the two defaults.
    """

    latency_s: float
    bytes_per_s: float
    by_collective: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, (alpha, rate) in {"": (self.latency_s, self.bytes_per_s),
                                    **self.by_collective}.items():  # fmt: skip
            if not (alpha >= 0 and rate > 0):
                raise ValueError(
                    f"Network{' ' + name if name else ''}: latency_s must be >= 0 and "
                    f"bytes_per_s > 0, got latency_s={alpha!r}, bytes_per_s={rate!r}"
                )

    def call_time(self, call: Call) -> float:
        """Seconds one collective call takes under this model."""
        messages, nbytes = messages_and_bytes(call)
        name = call.collective.removesuffix("_coalesced")
        alpha, rate = self.by_collective.get(name, (self.latency_s, self.bytes_per_s))
        return messages * alpha + nbytes / rate

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


def fit(samples: Iterable[tuple[Call, float]], *, by_collective: bool = False) -> Network:
    """The network whose model best fits measured ``(call, seconds)`` pairs (least squares).

    Each sample gives one equation ``messages * alpha + bytes * beta = seconds``;
    ``alpha`` and ``beta`` are fitted without an intercept, on relative error,
    and kept positive. ``by_collective``: also fit each collective measured at
    two sizes or more on its own samples (``Network.by_collective``).
    """
    pairs = list(samples)
    network = _fit_one(pairs)
    if not by_collective:
        return network
    names = {call.collective.removesuffix("_coalesced") for call, _ in pairs}
    own = {}
    for name in sorted(names):
        mine = [(c, t) for c, t in pairs if c.collective.removesuffix("_coalesced") == name]
        if len({c.sent_bytes for c, _ in mine}) >= 2:
            one = _fit_one(mine)
            own[name] = (one.latency_s, one.bytes_per_s)
    return Network(network.latency_s, network.bytes_per_s, own)


def _fit_one(samples: list[tuple[Call, float]]) -> Network:
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
