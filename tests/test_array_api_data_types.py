"""Data types and data type functions of dmesh.array_api (issue 15) against
array_api_strict, and the inspection object ``__array_namespace_info__()``."""

from __future__ import annotations

import itertools

import array_api_strict as xs
import numpy as np
from mpi4py import MPI

import dmesh
import dmesh.array_api as xp
from dmesh import Replicate, Shard
from dmesh.array_api import Sharding
from helpers import Verdict, assert_all, assert_raises_all

xs.set_array_api_strict_flags(api_version="2024.12")

NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float32", "float64", "complex64", "complex128"]  # fmt: skip
KINDS = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
         "complex floating", "numeric"]  # fmt: skip


def test_dtypes_and_promotion(comm: MPI.Intracomm) -> None:
    with Verdict(comm) as v:
        for name in NAMES:
            v.check(getattr(xp, name) == np.dtype(name), name)
        for a, b in itertools.product(NAMES, NAMES):
            da, db, sa, sb = getattr(xp, a), getattr(xp, b), getattr(xs, a), getattr(xs, b)
            try:
                want = np.dtype(str(xs.result_type(sa, sb)).split(".")[-1])
            except TypeError:  # mixed kinds: left to the library, NumPy's answer here
                v.check(xp.can_cast(da, db) == np.can_cast(da, db), f"can_cast({a}, {b})")
                v.check(xp.result_type(da, db) == np.result_type(da, db), f"{a}, {b}")
                continue
            v.check(xp.can_cast(da, db) == xs.can_cast(sa, sb), f"can_cast({a}, {b})")
            v.check(xp.result_type(da, db) == want, f"result_type({a}, {b})")
        for name, kind in itertools.product(NAMES, KINDS):
            ok = xp.isdtype(getattr(xp, name), kind) == xs.isdtype(getattr(xs, name), kind)
            v.check(ok, f"isdtype({name}, {kind})")
        v.check(xp.isdtype(xp.float32, ("integral", xp.float32)))
        v.check(not xp.isdtype(xp.float32, ("integral", xp.float64)))
        for name, scalar in itertools.product(NAMES, [True, 3, 2.5, 1j]):
            try:
                want = np.dtype(str(xs.result_type(getattr(xs, name), scalar)).split(".")[-1])
            except (TypeError, OverflowError):
                continue
            v.check(xp.result_type(getattr(xp, name), scalar) == want, f"{name} {scalar!r}")


def test_finfo_iinfo(comm: MPI.Intracomm) -> None:
    with Verdict(comm) as v:
        for name in ["float32", "float64", "complex64", "complex128"]:
            got, want = xp.finfo(getattr(xp, name)), xs.finfo(getattr(xs, name))
            for field in ("bits", "eps", "max", "min", "smallest_normal"):
                v.check(getattr(got, field) == getattr(want, field), f"{name} {field}")
                v.check(type(getattr(got, field)) is type(getattr(want, field)), field)
            v.check(got.dtype == np.dtype(str(want.dtype).split(".")[-1]), name)
        for name in NAMES[1:9]:
            got, want = xp.iinfo(getattr(xp, name)), xs.iinfo(getattr(xs, name))
            v.check((got.bits, got.max, got.min) == (want.bits, want.max, want.min), name)
            v.check(got.dtype == getattr(xp, name))


def test_astype_and_array_arguments(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    data = np.array([-2.5, -0.0, np.nan, np.inf, 3.75, 1e10, -7.0])
    x = dmesh.distribute(data, mesh, [Shard(0)] * mesh.ndim)
    r = Sharding(mesh, [Replicate()] * mesh.ndim)
    with Verdict(comm) as v:
        y = xp.astype(x, xp.float32)
        v.check(
            y.dtype == np.float32
            and np.array_equal(y.full_array(), data.astype(np.float32), equal_nan=True)
        )
        v.check(xp.astype(x, xp.float64, copy=False) is x)
        c = xp.astype(x, xp.float64)
        v.check(c is not x and np.array_equal(c.full_array(), data, equal_nan=True))
        z = xp.astype(x, xp.complex128, device=r)
        v.check(
            z.device == r and np.array_equal(z.full_array(), data.astype(complex), equal_nan=True)
        )
        b = xp.astype(x, xp.bool)
        v.check(np.array_equal(b.full_array(), np.asarray(xs.astype(xs.asarray(data), xs.bool))))
        v.check(xp.can_cast(x, xp.complex128) and not xp.can_cast(x, xp.float32))
        v.check(xp.result_type(x, xp.float32, 1.0) == np.float64)
        v.check(xp.finfo(x).bits == 64)
    assert_raises_all(comm, TypeError, xp.astype, z, xp.float64, match="astype")
    assert_raises_all(comm, TypeError, xp.astype, data, xp.float64, match="asarray")
    assert_raises_all(comm, TypeError, xp.astype, x, "float64")
    assert_raises_all(comm, TypeError, xp.astype, x, xp.float64, device="cpu")


def test_bad_arguments(comm: MPI.Intracomm) -> None:
    assert_raises_all(comm, ValueError, xp.result_type, 1, 2.0)
    assert_raises_all(comm, TypeError, xp.result_type, xp.int8, 1.0)
    assert_raises_all(comm, TypeError, xp.result_type, xp.bool, 1)
    assert_raises_all(comm, OverflowError, xp.result_type, xp.int8, 1000)
    assert_raises_all(comm, TypeError, xp.finfo, xp.int32)
    assert_raises_all(comm, TypeError, xp.iinfo, xp.float64)
    assert_raises_all(comm, ValueError, xp.isdtype, xp.int8, "foo")
    assert_raises_all(comm, TypeError, xp.isdtype, xp.int8, 1)
    assert_raises_all(comm, TypeError, xp.can_cast, xp.int8, "int16")


def test_inspection(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    info = xp.__array_namespace_info__()
    ref = xs.__array_namespace_info__()
    caps = info.capabilities()
    assert_all(comm, caps["boolean indexing"] and caps["data-dependent shapes"], repr(caps))
    assert_all(comm, caps["max dimensions"] in (None, 64))
    d = info.default_device()
    assert_all(
        comm, isinstance(d, Sharding) and d.placements == (Shard(0),) and d in info.devices()
    )
    defaults = {k: np.dtype(str(t).split(".")[-1]) for k, t in ref.default_dtypes().items()}
    assert_all(comm, info.default_dtypes() == defaults)
    s = Sharding(mesh, [Replicate()] * mesh.ndim)
    with Verdict(comm) as v:
        for kind in [None, *KINDS, ("bool", "real floating")]:
            got = info.dtypes(kind=kind, device=s)
            want = {k: np.dtype(str(t).split(".")[-1]) for k, t in ref.dtypes(kind=kind).items()}
            v.check(got == want, f"{kind}: {got} != {want}")
    assert_raises_all(comm, ValueError, info.dtypes, kind="float")
    assert_raises_all(comm, TypeError, info.default_dtypes, device="cpu")
