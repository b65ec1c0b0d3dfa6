"""dmesh.scaling's frame: block sizes, per-rank traffic, the latency-bandwidth model and its fit."""

from __future__ import annotations

import math

import pytest

from dmesh.scaling import Call, Network, block_sizes, fit, messages_and_bytes, per_rank

NET = Network(latency_s=2e-6, bytes_per_s=1e9)


def test_block_sizes_are_array_split_sizes() -> None:
    got = [block_sizes(10, 4), block_sizes(3, 4), block_sizes(0, 2)]
    assert got == [(3, 3, 2, 2), (1, 1, 1, 0), (0, 0)], repr(got)


def test_per_rank_is_row_major() -> None:
    got = per_rank((2, 3), lambda c: [Call("permute", 2, c[0], c[1])])
    want = [(Call("permute", 2, i, j),) for i in range(2) for j in range(3)]
    assert got == want, repr(got)


def test_one_rank_costs_nothing() -> None:
    assert NET.call_time(Call("all_reduce", 1, 8, 8)) == 0.0


@pytest.mark.parametrize(
    ("call", "messages", "nbytes"),
    [
        (Call("all_gather", 4, 100, 400), 2, 300),  # L = 2 rounds, what arrives from the others
        (Call("all_gather", 3, 100, 300), 2, 200),  # L = ceil(log2 3)
        (Call("reduce_scatter", 4, 400, 100), 2, 300),
        (Call("all_to_all", 4, 400, 400), 3, 300),
        (Call("permute", 2, 0, 64), 1, 64),  # a rank that only receives
        (Call("all_reduce", 8, 8, 8), 3, 24),  # short: recursive doubling
        (Call("all_reduce", 8, 8_000_000, 8_000_000), 6, 14_000_000),  # long: Rabenseifner
        (Call("all_reduce_coalesced", 2, 16, 16), 1, 16),  # as its base collective
        (Call("gather", 4, 100, 400), 2, 300),
    ],
)
def test_messages_and_bytes(call: Call, messages: int, nbytes: int) -> None:
    got = messages_and_bytes(call)
    assert got == (messages, nbytes), repr(got)


def test_time_is_the_slowest_rank_sum() -> None:
    traffics = [
        (Call("permute", 2, 1000, 0),),
        (Call("permute", 2, 0, 1000), Call("permute", 2, 0, 0)),
    ]
    want = max(2e-6 + 1e-6, 2e-6 + 1e-6 + 2e-6)
    assert math.isclose(NET.time(traffics), want), NET.time(traffics)


def test_fit_recovers_the_network() -> None:
    sizes = (8, 800, 80_000, 8_000_000)
    calls = [Call("all_reduce", p, m, m) for p in (2, 4) for m in sizes]
    calls += [Call("all_gather", p, m, m * p) for p in (2, 4) for m in sizes]
    got = fit((call, NET.call_time(call)) for call in calls)
    ok = math.isclose(got.latency_s, 2e-6, rel_tol=1e-6)
    ok = ok and math.isclose(got.bytes_per_s, 1e9, rel_tol=1e-6)
    assert ok, repr(got)


def test_bad_values_raise() -> None:
    with pytest.raises(ValueError, match="bytes_per_s"):
        Network(1e-6, 0.0)
    with pytest.raises(ValueError, match="at least two"):
        fit([(Call("all_reduce", 2, 8, 8), 1e-6)])


def test_fit_by_collective_keeps_each_collectives_rate() -> None:
    slow_gather = Network(2e-6, 1e9, {"all_gather": (5e-6, 2.5e8)})
    sizes = (8, 800, 80_000, 8_000_000)
    calls = [Call("all_reduce", 2, m, m) for m in sizes]
    calls += [Call("all_gather", 2, m, 2 * m) for m in sizes]
    got = fit(((call, slow_gather.call_time(call)) for call in calls), by_collective=True)
    alpha, rate = got.by_collective["all_gather"]
    ok = math.isclose(alpha, 5e-6, rel_tol=1e-6) and math.isclose(rate, 2.5e8, rel_tol=1e-6)
    reduce_alpha, reduce_rate = got.by_collective["all_reduce"]
    ok = ok and math.isclose(reduce_alpha, 2e-6, rel_tol=1e-6)
    ok = ok and math.isclose(reduce_rate, 1e9, rel_tol=1e-6)
    assert ok, repr(got)
