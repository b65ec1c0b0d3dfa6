"""Complex parts (issue 14, item 1, first part): ``np.real``, ``np.imag``, ``np.angle``,
``np.iscomplex``, ``np.isreal``, the ``.real``/``.imag`` properties and ``conj()``,
against NumPy at 1-4 ranks on balanced, uneven and empty blocks and hostile values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard
from helpers import Verdict, assert_all, assert_equal_all

WORLD = MPI.COMM_WORLD.Get_size()
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, -1.5, 2.0]
Z = np.array([complex(r, i) for r in SPECIALS for i in SPECIALS[::-1]][:24]).reshape(6, 4)


def layouts(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    rest = [Replicate()] * (mesh.ndim - 1)
    return [[Shard(0), *rest], [Shard(1), *rest], [Replicate(), *rest]]


def same(got: Any, want: np.ndarray) -> bool:
    full = np.asarray(got.full_array() if isinstance(got, dmesh.DArray) else got)
    return (
        full.shape == want.shape
        and full.dtype == want.dtype
        and np.array_equal(full, want, equal_nan=full.dtype.kind in "fc")
        and np.array_equal(np.signbit(full.real), np.signbit(np.real(want)))
    )


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64, np.float64, np.int64])
def test_parts_match_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, dtype: Any) -> None:
    with np.errstate(all="ignore"):
        x = Z.astype(dtype) if np.dtype(dtype).kind == "c" else np.real(Z).astype(dtype)
    calls = [np.real, np.imag, np.angle, np.iscomplex, np.isreal, np.conjugate]
    with Verdict(comm) as verdict:
        for placements in layouts(mesh):
            for source in (x, np.concatenate([x, x])[x.shape[0] :]):  # balanced, then uneven
                a = dmesh.distribute(source, mesh, placements)
                part = a[1:] if placements[0] == Shard(0) else a  # an empty block at 4+ ranks
                want = source[1:] if placements[0] == Shard(0) else source
                for func in calls:
                    verdict.check(same(func(part), func(want)), f"{func.__name__} {placements}")
                verdict.check(same(np.angle(part, deg=True), np.angle(want, deg=True)), "deg")
                verdict.check(same(part.real, want.real), f"real {placements}")
                verdict.check(same(part.imag, want.imag), f"imag {placements}")
                verdict.check(same(part.conj(), want.conj()), f"conj {placements}")


def test_real_is_a_view_that_writes_through(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """As in NumPy, ``a.real`` is a view of each block: writing it writes ``a``."""
    x = Z.copy()
    a = dmesh.distribute(x, mesh, layouts(mesh)[0])
    r = a.real
    r[...] = 7.0
    x.real[...] = 7.0
    assert_all(comm, same(a, x), "a.real[...] = 7 did not write a's real parts")
    assert_all(comm, r.placements == a.placements, f"{r.placements}")


def test_partial_operand_is_reduced_first(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A partial sum's real part is taken after the reduction (no partial rows)."""
    partial = [Partial("sum")] + [Replicate()] * (mesh.ndim - 1)
    p = dmesh.distribute(Z, mesh, partial)
    assert_equal_all(comm, np.real(p).full_array(), np.real(Z))
    assert_equal_all(comm, np.angle(p).full_array(), np.angle(Z))


def test_spectral_solver_ending(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """The issue's example: ``np.real(np.fft.ifftn(...))`` of a sharded spectrum."""
    x = np.random.default_rng(3).random((8, 6, 4))
    a = dmesh.distribute(x, mesh, layouts(mesh)[0])
    back = np.real(np.fft.ifftn(np.fft.fftn(a)))
    want = np.real(np.fft.ifftn(np.fft.fftn(x)))
    assert_equal_all(comm, back.full_array(), want, rtol=1e-12, atol=1e-12)
