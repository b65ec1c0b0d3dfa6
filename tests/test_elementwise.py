"""Elementwise ufuncs and operators on DArrays agree with NumPy on one process."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.ops.propagation import decide
from dmesh.ops.registry import Call, rule_for
from helpers import BitVerdict, assert_all, assert_equal_all, assert_raises_all


def values(shape: tuple[int, ...], seed: int, positive: bool = False) -> np.ndarray:
    x = np.random.default_rng(seed).integers(-4, 5, size=shape).astype(np.float64)
    return np.abs(x) + 1 if positive else x


def layouts(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[object]]:
    choices = [Replicate()] + [Shard(d) for d in range(ndim)]
    return [list(p) for p in itertools.product(choices, repeat=mesh.ndim)]


UNARY = [np.sin, np.exp, np.negative, np.abs, np.sqrt, np.floor, np.isnan, np.square]
BINARY = [np.add, np.subtract, np.multiply, np.divide, np.maximum, np.power, np.greater,
          np.logical_and, np.arctan2, np.fmod]  # fmt: skip


@pytest.mark.parametrize("ufunc", UNARY, ids=lambda u: u.__name__)
def test_unary(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, ufunc: np.ufunc) -> None:
    a = values((5, 3), 1, positive=True)
    for placements in layouts(mesh, 2):
        d = dmesh.distribute(a, mesh, placements)
        result = ufunc(d)
        assert_all(comm, isinstance(result, dmesh.DArray) and result.placements == d.placements)
        assert_equal_all(comm, result.full_array(), ufunc(a))


@pytest.mark.parametrize("ufunc", BINARY, ids=lambda u: u.__name__)
@pytest.mark.parametrize(
    ("shape_a", "shape_b"), [((5, 3), (5, 3)), ((5, 3), (3,)), ((5, 1), (1, 3)), ((5, 3), ())]
)
def test_binary_with_broadcasting(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, ufunc: np.ufunc, shape_a: tuple, shape_b: tuple
) -> None:
    a, b = values(shape_a, 2, positive=True), values(shape_b, 3, positive=True)
    expected = ufunc(a, b)
    for pa in layouts(mesh, len(shape_a)):
        x = dmesh.distribute(a, mesh, pa)
        for pb in layouts(mesh, len(shape_b))[:3]:
            y = dmesh.distribute(b, mesh, pb)
            assert_equal_all(comm, ufunc(x, y).full_array(), expected)
        assert_equal_all(
            comm,
            ufunc(x, b if b.ndim == 0 else 2.0).full_array(),
            ufunc(a, b if b.ndim == 0 else 2.0),
        )
        assert_equal_all(comm, ufunc(3, x).full_array(), ufunc(3, a))


def test_operators(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a, b = values((4, 6), 4), values((4, 6), 5, positive=True)
    x = dmesh.distribute(a, mesh, layouts(mesh, 2)[1])
    y = dmesh.distribute(b, mesh, layouts(mesh, 2)[-1])
    for got, want in [
        (x + y, a + b), (x - 1, a - 1), (2 * x, 2 * a), (x / y, a / b), (x ** 2, a ** 2),
        (-x, -a), (abs(x), abs(a)), (x > y, a > b), (x == y, a == b), (1 - x, 1 - a),
        (x // y, a // b), (x % y, a % b),
    ]:  # fmt: skip
        assert_equal_all(comm, got.full_array(), want)
    z = x.copy()
    z += y  # in place: written into z's blocks, in z's layout
    assert_all(comm, z.spec == x.spec)
    assert_equal_all(comm, z.full_array(), a + b)
    assert_equal_all(comm, x.full_array(), a)  # the copy owns its blocks


def test_partial_sums_stay_partial(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a, b = values((3, 4), 6), values((3, 4), 7)
    partial = [Partial("sum")] + [Replicate()] * (mesh.ndim - 1)
    x, y = dmesh.distribute(a, mesh, partial), dmesh.distribute(b, mesh, partial)
    total = x + y
    assert_all(comm, total.placements == tuple(partial))
    assert_equal_all(comm, total.full_array(), a + b)
    # Float terms times a value are reduced first (a zero term times inf would be NaN);
    # integer terms times integers of their dtype stay partial (exact, wrapping alike).
    scaled = 3 * x
    assert_all(comm, not any(p.is_partial() for p in scaled.placements))
    assert_equal_all(comm, scaled.full_array(), 3 * a)
    ints = dmesh.distribute(np.arange(12).reshape(3, 4), mesh, partial)
    for product in (
        3 * ints,
        ints * ints[0:1, 0:1].redistribute(placements=[Replicate()] * mesh.ndim),
    ):
        assert_all(comm, product.placements == tuple(partial), f"{product.placements}")
    assert_equal_all(comm, (3 * ints).full_array(), 3 * np.arange(12).reshape(3, 4))
    shifted = x + 1  # adding 1 on every rank would add it k times: reduced first
    assert_all(comm, not any(p.is_partial() for p in shifted.placements))
    assert_equal_all(comm, shifted.full_array(), a + 1)


def test_matching_placements_move_nothing(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = values((6, 5), 8)
    for placements in layouts(mesh, 2):
        x = dmesh.distribute(a, mesh, placements)
        call = Call((x.shape, x.shape), (True, True))
        decision = decide(rule_for(np.add), call, (x.spec, x.spec))
        assert_all(comm, decision.cost == 0.0 and decision.result.placements == x.placements)


def test_uneven_operands_are_aligned(comm: MPI.Intracomm) -> None:
    with dmesh.init_mesh(comm=comm) as mesh:
        n, rank = mesh.size(), mesh.rank
        a = values((2 * n + 1, 2), 9)
        sizes = [2 * n + 1] + [0] * (n - 1)  # everything on rank 0
        start = sum(sizes[:rank])
        x = dmesh.from_local(a[start : start + sizes[rank]], mesh, [Shard(0)])
        y = dmesh.distribute(a, mesh, [Shard(0)])  # balanced
        assert_equal_all(comm, (x + y).full_array(), 2 * a)
        assert_all(comm, (x + x).spec.layout == x.spec.layout)  # no move needed


def test_errors(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = dmesh.distribute(values((4, 3), 1), mesh, layouts(mesh, 2)[1])
    assert_raises_all(comm, TypeError, np.add, x, np.ones((4, 3)), match="dmesh.distribute")
    assert_raises_all(comm, NotImplementedError, np.subtract.accumulate, x, match="accumulate")
    assert_raises_all(comm, NotImplementedError, np.unique, x, axis=0)
    assert_raises_all(comm, NotImplementedError, np.divmod, x, x, where=True)
    assert_raises_all(comm, TypeError, np.add, x, x, out=np.empty((4, 3)))
    with dmesh.init_mesh(comm=comm) as other:
        y = dmesh.distribute(values((4, 3), 1), other, [Replicate()])
        assert_raises_all(comm, ValueError, np.add, x, y, match="different meshes")


def test_implicit_replication(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a, b = values((4, 3), 1), values((4, 3), 2)
    x = dmesh.distribute(a, mesh, layouts(mesh, 2)[1])
    assert_raises_all(comm, TypeError, np.add, x, b, match="implicit_replication")
    with dmesh.implicit_replication():
        y = x + b
        z = np.multiply(b, x)
    assert_all(comm, y.placements == x.placements, repr(y))  # b sliced locally, x not moved
    assert_equal_all(comm, y.full_array(), a + b)
    assert_equal_all(comm, z.full_array(), b * a)
    assert_raises_all(comm, TypeError, np.add, x, b)  # off again after the block


def test_integer_power_error_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """NumPy's integer-power error comes from the blocks holding a negative exponent; it is
    decided for the whole array, so every rank raises (or none does), whatever the layout."""
    sharded = [Shard(0)] * mesh.ndim
    base = np.array([2, 3, 4, 5, 6, 7, -1], np.int64)
    exponent = np.array([1, 1, 0, 1, 2, 1, -2], np.int64)  # one negative, in the last block
    x, y = dmesh.distribute(base, mesh, sharded), dmesh.distribute(exponent, mesh, sharded)
    match = "negative integer powers"
    assert_raises_all(comm, ValueError, np.power, x, y, match=match)
    assert_raises_all(comm, ValueError, lambda: x**y, match=match)
    assert_raises_all(comm, ValueError, lambda: (x + 0) ** y, match=match)  # a donated temporary
    assert_raises_all(comm, ValueError, lambda: 2**y, match=match)
    assert_raises_all(comm, ValueError, np.power, x, -1, match=match)
    assert_raises_all(comm, ValueError, np.power.outer, x[:2], y, match=match)
    fine = np.abs(exponent)
    z = dmesh.distribute(fine, mesh, sharded)
    assert_equal_all(comm, np.power(x, z).full_array(), np.power(base, fine))
    # masked out, or nothing computed: no error, as in NumPy
    mask = dmesh.distribute(exponent >= 0, mesh, sharded)
    out = dmesh.distribute(np.zeros_like(base), mesh, sharded)
    np.power(x, y, where=mask, out=out)
    assert_equal_all(comm, out.full_array()[:-1], np.power(base[:-1], exponent[:-1]))
    assert_equal_all(comm, np.power(x[:0], y[:0]).full_array(), np.power(base[:0], exponent[:0]))
    assert_equal_all(
        comm, np.power(x, y.astype(np.float64)).full_array(), np.power(base, exponent.astype(float))
    )


def test_scalar_powers_are_numpys(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``x ** 2``, ``x ** -1`` and ``x ** 0.5`` are np.square, np.reciprocal and np.sqrt
    for float and complex arrays, as NumPy's fast path makes them (for complex numbers
    np.power's results differ in the last bits), bit for bit; other exponents, other
    exponent types (``2.0``, ``np.int64(2)``) and integer arrays are np.power."""
    rng = np.random.default_rng(11)
    z = rng.standard_normal(23) * 3 + 1j * rng.standard_normal(23)
    z[:6] = [0, -0.0, np.inf, np.nan, 1e300 + 1e300j, -np.inf * 1j]
    f = np.concatenate([z.real[:20], [-1.0, 0.0, np.nan]]).astype(np.float32)
    ints = np.arange(-11, 12, dtype=np.int64)
    exponents = [2, -1, 0.5, 2.0, -1.0, np.int64(2), np.float64(0.5), 3, 1, 0]
    with np.errstate(all="ignore"), BitVerdict(comm) as v:
        for base in (z, f, ints):
            for placements in layouts(mesh, 1):
                d = dmesh.distribute(base, mesh, placements)
                for e in exponents:
                    if base.dtype.kind == "i" and (e == -1 or isinstance(e, float)):
                        continue
                    label = f"{base.dtype} ** {e!r} {placements}"
                    got = (d**e).full_array()
                    want = base**e
                    v.check(got.tobytes() == want.tobytes(), f"{label}: {got} != {want}")
                    v.bits(label, got)
                    inplace, in_numpy = d.copy(), base.copy()
                    if np.result_type(base, e) == base.dtype:
                        inplace **= e
                        in_numpy **= e
                        v.check(inplace.full_array().tobytes() == in_numpy.tobytes(), label)
                # a temporary base (its block may be reused for the result)
                got = ((d + 0) ** 2).full_array()
                v.check(got.tobytes() == ((base + 0) ** 2).tobytes(), f"temporary {base.dtype}")
