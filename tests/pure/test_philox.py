"""The counter-based random kernel behind ``dmesh.random`` (pure NumPy, no MPI).

Every rank runs these identically. The vectorized Philox is checked against
the Random123 known-answer vectors and against a scalar pure-Python reference;
the samplers against their definitions, loose statistics, and the property the
distributed arrays rely on: a value depends only on (seed, stream, index), so
any split, permutation or reshaping of the index set gives the same values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dmesh.core import philox as _philox
from dmesh.core.philox import integers, philox4x32, standard_normal, uniform

M32 = 0xFFFFFFFF

# Random123 kat_vectors, philox4x32_10: (counter, key, expected output).
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((M32,) * 4, (M32,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


def ref_philox(ctr: tuple[int, ...], key: tuple[int, ...]) -> tuple[int, ...]:
    """Scalar Philox4x32-10 in Python ints, written straight from the paper."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c0, c1, c2, c3


def ref_words(seed: int, index: int, stream: int) -> tuple[int, ...]:
    return ref_philox((index & M32, index >> 32, stream, 0), (seed & M32, seed >> 32))


def ref_unit(hi: int, lo: int) -> float:
    return ((hi >> 5) * 2**26 + (lo >> 6)) * 2.0**-53


# Indices on both sides of 2**32 (the high counter word) and near the top.
SPOT = [0, 1, 2, 12345, 2**32 - 1, 2**32, 2**40 + 7, 2**63 - 1]


@pytest.mark.parametrize(("ctr", "key", "expected"), KAT)
def test_known_answers(
    ctr: tuple[int, ...], key: tuple[int, ...], expected: tuple[int, ...]
) -> None:
    out = philox4x32(ctr, key)
    assert out.dtype == np.uint64
    assert out.shape == (4,)
    assert [int(w) for w in out] == list(expected)
    assert ref_philox(ctr, key) == expected
    stacked = philox4x32(np.array(ctr, dtype=np.uint64).reshape(4, 1), key)  # one (4, n) array
    assert stacked.shape == (4, 1)
    assert [int(w) for w in stacked[:, 0]] == list(expected)


def test_vectorized_matches_reference_with_broadcasting() -> None:
    rng = np.random.default_rng(0)
    ctr = rng.integers(0, 2**32, size=(3, 50), dtype=np.uint64)
    key = (0x01234567, 0x89ABCDEF)
    out = philox4x32((ctr[0], ctr[1], 0xDEADBEEF, ctr[2]), key)  # a scalar word broadcasts
    assert out.shape == (4, 50)
    for j in range(50):
        expected = ref_philox((int(ctr[0, j]), int(ctr[1, j]), 0xDEADBEEF, int(ctr[2, j])), key)
        assert tuple(int(w) for w in out[:, j]) == expected


def test_samplers_match_their_definitions() -> None:
    seed, idx = 2**40 + 987654321, np.array(SPOT, dtype=np.uint64)
    u, z = uniform(seed, idx, stream=5), standard_normal(seed, idx, stream=6)
    k = integers(seed, idx, -(2**40), 3**30, stream=7)
    for j, i in enumerate(SPOT):
        w = ref_words(seed, i, 5)
        assert u[j] == ref_unit(w[0], w[1])
        w = ref_words(seed, i, 6)
        u1, u2 = ref_unit(w[0], w[1]), ref_unit(w[2], w[3])
        expected = math.sqrt(-2 * math.log1p(-u1)) * math.cos(2 * math.pi * u2)
        assert z[j] == pytest.approx(expected, rel=1e-12, abs=1e-12)
        w = ref_words(seed, i, 7)
        r = (w[0] << 96) | (w[1] << 64) | (w[2] << 32) | w[3]
        assert k[j] == -(2**40) + (r * (3**30 + 2**40) >> 128)


@pytest.mark.parametrize("span", [1, 2, 10, 2**32 - 1, 2**32, 2**32 + 1, 2**63, 2**64 - 1, 2**64])
def test_multiply_shift_is_exact(span: int) -> None:
    rng = np.random.default_rng(span % 1000)
    limbs = rng.integers(0, 2**32, size=(4, 64), dtype=np.uint64)
    limbs[:, 0] = M32  # R = 2**128 - 1: the largest product
    limbs[:, 1] = 0
    got = _philox._mulhi128(tuple(limbs), span, np)
    for j in range(limbs.shape[1]):
        r = sum(int(limbs[i, j]) << (32 * i) for i in range(4))
        assert int(got[j]) == (r * span) >> 128


def test_uniform_range_and_moments() -> None:
    u = uniform(42, np.arange(100_000))
    assert u.dtype == np.float64
    assert u.min() >= 0.0
    assert u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01  # standard error 0.0009
    assert abs(u.var() - 1 / 12) < 0.005
    counts = np.bincount((u * 16).astype(np.int64), minlength=16)
    chi2 = ((counts - 100_000 / 16) ** 2 / (100_000 / 16)).sum()
    assert chi2 < 60  # 15 dof: mean 15, P(chi2 > 60) ~ 1e-7


def test_standard_normal_moments() -> None:
    z = standard_normal(42, np.arange(100_000))
    assert z.dtype == np.float64
    assert np.isfinite(z).all()
    assert np.abs(z).max() < 8.6  # Box-Muller bound for 53-bit uniforms
    assert abs(z.mean()) < 0.02  # standard error 0.003
    assert abs(z.std() - 1.0) < 0.02
    assert abs(np.mean(np.abs(z) < 1.0) - 0.6827) < 0.01
    assert abs(np.mean(z**3)) < 0.1  # skewness
    assert abs(np.mean(z**4) - 3.0) < 0.2  # kurtosis


def test_integers_range_and_uniformity() -> None:
    k = integers(7, np.arange(100_000), -3, 7)
    assert k.dtype == np.int64
    assert k.min() == -3
    assert k.max() == 6
    counts = np.bincount(k + 3, minlength=10)
    chi2 = ((counts - 10_000) ** 2 / 10_000).sum()
    assert chi2 < 50  # 9 dof: mean 9, P(chi2 > 50) ~ 1e-7


def test_integers_wide_ranges() -> None:
    full = integers(7, np.arange(20_000), -(2**63), 2**63)
    assert abs(np.mean(full < 0) - 0.5) < 0.03
    top = integers(7, np.arange(20_000), 2**63 - 5, 2**63)
    assert set(top.tolist()) == {2**63 - 5 + i for i in range(5)}
    assert (integers(7, np.arange(100), 4, 5) == 4).all()
    huge = integers(7, np.arange(20_000), 0, 2**62)
    assert huge.min() >= 0
    assert abs(huge.mean() / 2**62 - 0.5) < 0.03


SAMPLERS = [
    pytest.param(lambda s, i: uniform(s, i), id="uniform"),
    pytest.param(lambda s, i: standard_normal(s, i), id="standard_normal"),
    pytest.param(lambda s, i: integers(s, i, -1000, 10**12), id="integers"),
]


@pytest.mark.parametrize("sample", SAMPLERS)
def test_value_depends_only_on_index(sample: object) -> None:
    """Any split, permutation, stride, shape or dtype of the indices gives the same values."""
    assert callable(sample)
    n = 3 * _philox._CHUNK + 123  # crosses the internal chunk boundaries
    full = sample(99, np.arange(n, dtype=np.int64))
    for k in (1, 1001, _philox._CHUNK + 17):
        parts = [sample(99, np.arange(k)), sample(99, np.arange(k, n))]
        np.testing.assert_array_equal(np.concatenate(parts), full)
    perm = np.random.default_rng(1).permutation(n)
    np.testing.assert_array_equal(sample(99, perm), full[perm])
    block = np.arange(n - n % 60).reshape(-1, 60)[3:, 5:41:3]  # a non-contiguous 2-D block
    out = sample(99, block)
    assert out.shape == block.shape
    np.testing.assert_array_equal(out, full[block])
    np.testing.assert_array_equal(sample(99, block.astype(np.uint32)), full[block])
    big = np.array([2**33 + 5, 7, 2**62], dtype=np.uint64)  # high counter words in play
    np.testing.assert_array_equal(sample(99, big)[1], full[7])
    np.testing.assert_array_equal(sample(99, big[::2]), sample(99, big)[::2])


def test_empty_and_scalar_index() -> None:
    empty = np.zeros((0, 3), dtype=np.int64)
    assert uniform(1, empty).shape == (0, 3)
    assert standard_normal(1, empty).dtype == np.float64
    assert integers(1, empty, 0, 5).dtype == np.int64
    scalar = uniform(1, np.int64(12345))
    assert scalar.shape == ()
    assert scalar == uniform(1, np.array([12345]))[0]


def test_seeds_and_streams_differ() -> None:
    idx = np.arange(10_000)
    base = uniform(1, idx)
    others = [
        uniform(2, idx),
        uniform(1 + 2**32, idx),  # the key's high word matters
        uniform(1, idx, stream=1),
        uniform(1, idx + 1),
    ]
    for other in others:
        assert np.mean(base == other) < 0.001
        assert abs(np.corrcoef(base, other)[0, 1]) < 0.05
    # Default streams differ by sampler: no two samplers read the same counters.
    streams = {_philox.STREAM_UNIFORM, _philox.STREAM_NORMAL, _philox.STREAM_INTEGERS}
    assert len(streams) == 3
    z = standard_normal(1, idx)
    np.testing.assert_array_equal(z, standard_normal(1, idx, stream=_philox.STREAM_NORMAL))
    assert not np.array_equal(z, standard_normal(1, idx, stream=_philox.STREAM_UNIFORM))
    assert uniform(2**64 - 1, np.array([2**64 - 1], dtype=np.uint64)).shape == (1,)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: uniform(-1, np.arange(3)), ValueError, r"seed: -1 is out of range"),
        (lambda: uniform(2**64, np.arange(3)), ValueError, r"0 <= seed < 18446744073709551616"),
        (lambda: uniform(1.5, np.arange(3)), TypeError, r"seed: expected an int, got float"),
        (lambda: uniform(True, np.arange(3)), TypeError, r"seed: expected an int, got bool"),
        (lambda: uniform("1", np.arange(3)), TypeError, r"seed: expected an int, got str"),
        (lambda: uniform(1, np.arange(3), stream=2**32), ValueError, r"stream: 4294967296"),
        (lambda: uniform(1, np.arange(3), stream=-1), ValueError, r"0 <= stream < 4294967296"),
        (lambda: uniform(1, np.linspace(0, 1, 3)), TypeError, r"index: .*got dtype float64"),
        (lambda: uniform(1, np.ones(3, dtype=bool)), TypeError, r"index: .*got dtype bool"),
        (lambda: standard_normal(1, np.array([3, -2])), ValueError, r"got minimum -2"),
        (lambda: integers(1, np.arange(3), 5, 5), ValueError, r"low=5, high=5"),
        (lambda: integers(1, np.arange(3), 5, 2), ValueError, r"high: must be > low"),
        (lambda: integers(1, np.arange(3), -(2**63) - 1, 0), ValueError, r"low: .* out of range"),
        (lambda: integers(1, np.arange(3), 0, 2**63 + 1), ValueError, r"high: .* out of range"),
        (lambda: integers(1, np.arange(3), 0.0, 5), TypeError, r"low: expected an int"),
        (lambda: philox4x32((0, 0, 0), (0, 0)), ValueError, r"counter: expected 4 words"),
        (lambda: philox4x32((0, 0, 0, 2**32), (0, 0)), ValueError, r"counter\[3\]"),
        (lambda: philox4x32((0, 0, 0, -1), (0, 0)), ValueError, r"counter\[3\]"),
        (lambda: philox4x32((0.5, 0, 0, 0), (0, 0)), TypeError, r"counter\[0\]"),
        (lambda: philox4x32((0, 0, 0, 0), (0,)), ValueError, r"key: expected 2 words"),
        (lambda: philox4x32((0, 0, 0, 0), (0, 2**32)), ValueError, r"key\[1\]"),
    ],
)
def test_bad_arguments_raise(call: object, error: type[Exception], match: str) -> None:
    assert callable(call)
    with pytest.raises(error, match=match):
        call()
