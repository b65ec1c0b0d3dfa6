"""Repeated scans and einsums take their cached plans (``ops/kernels/scan.py``'s ``_Plan``,
``ops/rules/contractions.py``'s parse cache): NumPy's values, dtypes and errors on every
call, at 1-4 ranks, on sharded, uneven, empty and replicated blocks; a plan made for one
spec or argument is never served to another; a scan sends at most one all-gather of block
totals (one slice per rank)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
import dmesh.collectives as coll
from dmesh import Replicate, Shard
from dmesh.collectives.errors import ArgumentError, AxisArgumentError, UnsupportedError
from dmesh.ops.rules import contractions
from helpers import BitVerdict, assert_all, assert_raises_all

R = Replicate()


def _layouts(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[Any]]:
    rest = [R] * (mesh.ndim - 1)
    both = [[Shard(0), Shard(1)], [Shard(0), Shard(0)]] if mesh.ndim == 2 else []
    every = [[Shard(0), *rest], [Shard(1), *rest], [R] * mesh.ndim, *both]
    return [ps for ps in every if all(not isinstance(p, Shard) or p.dim < ndim for p in ps)]


def _arrays(mesh: dmesh.DeviceMesh, x: np.ndarray) -> Iterator[tuple[Any, np.ndarray]]:
    """``x`` in every layout, and an uneven slice of a larger array (other bounds)."""
    longer = np.concatenate([x, x, x])
    for placements in _layouts(mesh, x.ndim):
        yield dmesh.distribute(x, mesh, placements), x
        yield dmesh.distribute(longer, mesh, placements)[1 : 1 + len(x)], longer[1 : 1 + len(x)]


def _same(verdict: BitVerdict, where: str, got: Any, want: Any, rtol: float = 0.0) -> None:
    """NumPy's dtype, shape, NaN places and zero signs; values exact, or to ``rtol`` (sums
    grouped by block)."""
    full = got.full_array() if isinstance(got, dmesh.DArray) else np.asarray(got)
    want = np.asarray(want)
    verdict.bits(where, full)
    if full.dtype != want.dtype or full.shape != want.shape:
        verdict.check(False, f"{where}: {full.dtype}{full.shape} != {want.dtype}{want.shape}")
        return
    if want.dtype.kind in "fc":
        ok = bool(np.array_equal(np.isnan(full), np.isnan(want)))
        zeros = (full.real == 0) & (want.real == 0)
        ok = ok and bool(np.array_equal(np.signbit(full.real[zeros]), np.signbit(want.real[zeros])))
        ok = ok and bool(np.allclose(full, want, rtol=rtol, atol=0, equal_nan=True))
    else:
        ok = bool(np.array_equal(full, want))
    verdict.check(ok, f"{where}: {full!r} != {want!r}")


# -- scans -------------------------------------------------------------------------------


def _scan_data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    floats = rng.uniform(0.5, 1.5, (7, 4))
    hostile = floats.copy()
    hostile[1, 2], hostile[3, 0], hostile[5, 1], hostile[0, 3] = np.nan, np.inf, -np.inf, -0.0
    zeros = np.full((7, 4), -0.0)  # a sum of -0.0 stays -0.0 across blocks (not 0.0)
    zeros[4, 3] = 0.0
    ints = rng.integers(-100, 101, (7, 4)).astype(np.int8)  # cumsum: the platform int
    return {
        "floats": floats,
        "hostile": hostile,
        "zeros": zeros,
        "int8": ints,
        "uint8": ints.astype(np.uint8),
        "bool": ints > 0,
        "float16": floats.astype(np.float16),
        "complex": floats + 1j * floats[::-1],
    }


def _scans() -> list[tuple[str, Callable[..., Any]]]:
    return [
        ("cumsum", np.cumsum),
        ("cumprod", np.cumprod),
        ("nancumsum", np.nancumsum),
        ("cumulative_sum", np.cumulative_sum),
        ("cumulative_prod", np.cumulative_prod),
        ("add.accumulate", np.add.accumulate),
        ("maximum.accumulate", np.maximum.accumulate),
        ("logical_or.accumulate", np.logical_or.accumulate),
    ]


def _rtol(dtype: np.dtype) -> float:
    return 1e-2 if dtype == np.float16 else 1e-12


def test_repeated_scans_match_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for label, x in _scan_data().items():
            for a, y in _arrays(mesh, x):
                for name, func in _scans():
                    if name == "logical_or.accumulate" and x.dtype.kind == "c":
                        continue  # (NumPy's own loop: no complex logical_or.accumulate)
                    for axis in (0, 1, -1):
                        where = f"{name}({label}, axis={axis}) on {a.placements}"
                        with np.errstate(all="ignore"):
                            want = func(y, axis=axis)
                            for call in (1, 2):  # the second call takes the cached plan
                                got = func(a, axis=axis)
                                _same(verdict, f"{where} call {call}", got, want, _rtol(want.dtype))


def test_scan_dtype_and_flattening(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = _scan_data()["hostile"]
    with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
        for a, y in _arrays(mesh, x):
            for dtype in (None, np.float32, "float32", np.complex128, int):
                for call in (1, 2):
                    where = f"cumsum(dtype={dtype}) on {a.placements} call {call}"
                    want = np.cumsum(y, axis=0, dtype=dtype)
                    _same(verdict, where, np.cumsum(a, axis=0, dtype=dtype), want, 1e-5)
                    flat = np.cumprod(y, dtype=dtype)  # no axis: the flattened array
                    _same(verdict, "flat " + where, np.cumprod(a, dtype=dtype), flat, 1e-5)


def test_scan_empty_and_tiny_blocks(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Fewer rows than ranks (empty blocks), no rows at all, a vector of one element."""
    with BitVerdict(comm) as verdict:
        for x in (np.arange(1.0, 5.0).reshape(1, 4), np.ones((0, 3)), np.array([-0.0])):
            for a, y in _arrays(mesh, x):
                for name, func in _scans()[:5]:
                    for call in (1, 2):
                        where = f"{name}({x.shape}) on {a.placements} call {call}"
                        _same(verdict, where, func(a, axis=0), func(y, axis=0))


def test_scan_plans_are_not_stale(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Calls alternating in axis, function, dtype and spec on one array each get their own."""
    x = np.arange(1.0, 29.0).reshape(7, 4)
    a = dmesh.distribute(x, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    b = dmesh.distribute(x[:5], mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    i = dmesh.distribute(x.astype(np.int64), mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    calls: list[tuple[str, Callable[[Any], Any]]] = [
        ("cumsum 0", lambda z: np.cumsum(z, axis=0)),
        ("cumsum 1", lambda z: np.cumsum(z, axis=1)),
        ("cumprod 0", lambda z: np.cumprod(z, axis=0)),
        ("cumsum 0 f4", lambda z: np.cumsum(z, axis=0, dtype=np.float32)),
        ("cumsum 0 i8", lambda z: np.cumsum(z, axis=0, dtype=np.int64)),
        ("cumulative_sum 0", lambda z: np.cumulative_sum(z, axis=0)),
        ("add.accumulate 0", lambda z: np.add.accumulate(z, axis=0)),
        ("multiply.accumulate 0", lambda z: np.multiply.accumulate(z, axis=0)),
        ("cumsum -2", lambda z: np.cumsum(z, axis=-2)),
    ]
    with BitVerdict(comm) as verdict:
        for _ in range(2):
            for name, call in calls:
                for d, y in ((a, x), (b, x[:5]), (i, x.astype(np.int64))):
                    _same(verdict, f"{name} of {y.dtype}{y.shape}", call(d), call(y), 1e-6)


def test_scan_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    x = np.arange(12.0).reshape(4, 3)
    a = dmesh.distribute(x, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    for _ in range(2):  # before and after a cached call on the same spec
        assert_raises_all(comm, AxisArgumentError, np.cumsum, a, axis=2)
        assert_raises_all(comm, AxisArgumentError, np.add.accumulate, a, axis=-3)
        assert_raises_all(comm, ArgumentError, np.cumulative_sum, a)  # 2-D: axis needed
        assert_raises_all(comm, TypeError, np.cumsum, a, axis=0, dtype="no such dtype")
        np.cumsum(a, axis=0)


def test_scan_sends_one_all_gather_of_totals(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repeated scan along a sharded axis: one all-gather of one total slice per rank of
    the group (none where the group is one rank); along an unsharded axis, none."""
    x = np.arange(1.0, 41.0).reshape(8, 5)
    a = dmesh.distribute(x, mesh, [Shard(0)] + [R] * (mesh.ndim - 1))
    sent: list[tuple[int, int]] = []
    original = coll.all_gather

    def counting(piece: Any, axis: int = 0, group: Any = None, **kwargs: Any) -> Any:
        sent.append((group.Get_size(), piece.nbytes))
        return original(piece, axis, group, **kwargs)

    np.cumsum(a, axis=0)
    monkeypatch.setattr(coll, "all_gather", counting)
    for axis, expected in ((0, [(mesh.shape[0], 5 * 8)]), (1, [])):
        sent.clear()
        np.cumsum(a, axis=axis)
        np.cumsum(a, axis=axis)
        want = expected * 2 if mesh.shape[0] > 1 else []
        assert_all(comm, sent == want, f"axis={axis}: sent {sent}, expected {want}")


# -- einsum ------------------------------------------------------------------------------


def _operands(mesh: dmesh.DeviceMesh) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    m = rng.standard_normal((9, 6))
    m[2, 3], m[4, 0], m[7, 5] = np.nan, np.inf, -0.0
    return {
        "m": m,
        "w": rng.standard_normal((9, 6)),
        "v": rng.standard_normal(6),
        "u": rng.standard_normal(9),
        "s": rng.standard_normal((6, 6)),
        "k": rng.integers(-5, 6, (9, 6)).astype(np.int8),
        "big": rng.standard_normal((40, 40)),  # a product of 64000 terms: BLAS
    }


EINSUMS = [
    ("i,i->", "u", "u"),
    ("ij,j->i", "m", "v"),
    ("ij,ij->i", "m", "w"),
    ("ij,ij->j", "m", "w"),
    ("ij,kj->ik", "m", "w"),
    ("ij,jk->ik", "m", "s"),
    ("ji,j->i", "m", "u"),
    ("ij,j", "k", "v"),
    ("i,j->ij", "u", "v"),
    ("ij,jk->ik", "big", "big"),
    ("ij->ji", "m", None),
    ("ii->i", "s", None),
    ("ij,jk,kl->il", "m", "s"),
]


def test_repeated_einsums_match_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Every layout of the first operand against a replicated and a sharded second one, each
    call twice; values exact at one rank (NumPy's own loop on the whole arrays), else to
    1e-12 (the loop on blocks, sums grouped by block), BLAS-sized ones to 1e-10."""
    data = _operands(mesh)
    with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
        for subscripts, first, second in EINSUMS:
            x = data[first]
            ys = [] if second is None else [data[second]]
            if subscripts == "ij,jk,kl->il":
                ys = [data["s"], data["s"][:, :2]]
            want = np.einsum(subscripts, x, *ys)
            for placements in _layouts(mesh, x.ndim):
                a = dmesh.distribute(x, mesh, placements)
                for others in ([R] * mesh.ndim, [Shard(0)] + [R] * (mesh.ndim - 1)):
                    bs = [dmesh.distribute(y, mesh, others) for y in ys]
                    rtol = 1e-10 if first == "big" else 0.0 if comm.size == 1 else 1e-12
                    for call in (1, 2):
                        where = f"einsum({subscripts}) {placements} {others} call {call}"
                        got = np.einsum(subscripts, a, *bs)
                        _same(verdict, where, got, want, rtol)


def test_einsum_parse_is_not_stale(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """The same subscripts on other specs, other subscripts on the same specs, optimize=
    and a plain operand under implicit replication, alternating."""
    data = _operands(mesh)
    m, w, s, v = data["m"], data["w"], data["s"], data["v"]
    rows = [Shard(0)] + [R] * (mesh.ndim - 1)
    dm, dw, ds = (dmesh.distribute(z, mesh, rows) for z in (m, w, s))
    dv = dmesh.distribute(v, mesh, [R] * mesh.ndim)
    dv6 = dmesh.distribute(m[:, :6].sum(axis=0), mesh, rows)
    cases: list[tuple[str, Callable[[], Any], Any]] = [
        ("ij,j->i m v", lambda: np.einsum("ij,j->i", dm, dv), np.einsum("ij,j->i", m, v)),
        ("ij,j->i s v", lambda: np.einsum("ij,j->i", ds, dv), np.einsum("ij,j->i", s, v)),
        ("ji,j->i s v", lambda: np.einsum("ji,j->i", ds, dv), np.einsum("ji,j->i", s, v)),
        ("ij,j->i m v6", lambda: np.einsum("ij,j->i", dm, dv6),
         np.einsum("ij,j->i", m, m[:, :6].sum(axis=0))),
        ("ij,ij->i", lambda: np.einsum("ij,ij->i", dm, dw), np.einsum("ij,ij->i", m, w)),
        ("ij,ij->j", lambda: np.einsum("ij,ij->j", dm, dw), np.einsum("ij,ij->j", m, w)),
        ("optimize", lambda: np.einsum("ij,ij->i", dm, dw, optimize=True),
         np.einsum("ij,ij->i", m, w, optimize=True)),
        ("ii->i", lambda: np.einsum("ii->i", ds), np.einsum("ii->i", s)),
        ("ij->i", lambda: np.einsum("ij->i", ds), np.einsum("ij->i", s)),
    ]  # fmt: skip
    with BitVerdict(comm) as verdict, np.errstate(all="ignore"):
        for _ in range(3):
            for name, call, want in cases:
                _same(verdict, name, call(), want, 1e-12)
            with dmesh.implicit_replication():
                _same(verdict, "plain v", np.einsum("ij,j->i", dm, v), np.einsum("ij,j->i", m, v),
                      1e-12)  # fmt: skip


def test_einsum_parse_cache_serves_each_call_its_own(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """The cached parse of a call equals a fresh parse, whatever came before: the same
    subscripts and placements on other shapes (the loop below LOOP_BELOW terms, BLAS
    above), other subscripts, other placements, optimize=."""
    data = _operands(mesh)
    rows = [Shard(0)] + [R] * (mesh.ndim - 1)
    small = [dmesh.distribute(data[n], mesh, rows) for n in ("m", "s")]
    big = [dmesh.distribute(data["big"], mesh, rows)] * 2
    cols = [dmesh.distribute(data[n], mesh, [Shard(1)] + [R] * (mesh.ndim - 1)) for n in "ms"]
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (("ij,jk->ik", *small), {}),
        (("ij,jk->ik", *big), {}),
        (("ij,jk->ik", *cols), {}),
        (("ij,jk->ik", *small), {"optimize": True}),
        (("ij,jk->ik", *small), {"optimize": "greedy"}),
        (("ik,kj->ij", *big), {}),
        (("ij,jk", *small), {}),
    ]
    fresh = []
    for args, kwargs in calls:
        contractions._parsed.clear()
        fresh.append(contractions._parse_einsum(args, kwargs)[1])
    assert_all(comm, fresh[0] != fresh[1], f"small and big parse alike: {fresh[:2]}")
    for _ in range(2):
        for (args, kwargs), want in zip(calls, fresh):
            got = contractions._parse_einsum(args, kwargs)[1]
            assert_all(comm, got == want, f"{args[0]} {kwargs}: {got} != {want}")


def test_einsum_errors_after_cached_calls(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rows = [Shard(0)] + [R] * (mesh.ndim - 1)
    s = dmesh.distribute(np.ones((4, 4)), mesh, rows)
    r = dmesh.distribute(np.ones((4, 3)), mesh, rows)
    v = dmesh.distribute(np.ones(4), mesh, [R] * mesh.ndim)
    for _ in range(2):
        np.einsum("ij,j->i", s, v)
        assert_raises_all(comm, UnsupportedError, np.einsum, "ij,j->i", s, v, out=None)
        assert_raises_all(comm, UnsupportedError, np.einsum, "ij,j->i", s, v, optimize="fast")
        assert_raises_all(comm, UnsupportedError, np.einsum, "ij,j->i", s, v, optimize=[0])
        assert_raises_all(comm, ArgumentError, np.einsum, "ij,j->i", r, v, match="lengths")
        assert_raises_all(comm, ArgumentError, np.einsum, "i,j->i", s, v, match="2 dims")
        assert_raises_all(comm, ArgumentError, np.einsum, "ij,j->i", s, match="1 operands")
        assert_raises_all(comm, ArgumentError, np.einsum, "ii->i", r, match="lengths")
