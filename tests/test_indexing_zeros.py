"""``a[i]`` along a sharded axis keeps a selected ``-0.0`` (issue 14 follow-up), and 0-d or
broadcasting DArray values in assignments (``z[:, 1] = r[0]``), at 1-4 ranks."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Partial, Replicate, Shard, debug
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, UnsupportedError
from helpers import BitVerdict, Verdict, assert_raises_all

HOSTILE = np.array([-0.0, np.nan, np.inf, -np.inf, 0.0, -1.5, 2.0**-1074, -0.0])


def _grid(dtype: Any = np.float64) -> np.ndarray:
    """A (8, 5) grid whose every row and column holds -0.0 (and NaN, +-inf)."""
    x = np.empty((8, 5), dtype)
    for j in range(5):
        x[:, j] = np.roll(HOSTILE, j)
    if x.dtype.kind == "c":
        x = x + np.roll(x, 1, axis=0) * 1j
        x[3, 2] = complex(-0.0, -0.0)
    return x


def _canonical(x: Any) -> np.ndarray:
    """``x`` with every NaN made the positive quiet NaN (an MPI sum does not keep a NaN's sign)."""
    x = np.array(x)
    if x.dtype.kind == "c":
        x = x.reshape(x.shape + (1,))  # a 0-d array cannot change its itemsize in a view
        parts = x.view(x.real.dtype)
        parts[np.isnan(parts)] = np.nan
        return x[..., 0]
    elif x.dtype.kind == "f":
        x[np.isnan(x)] = np.nan
    return x


def _same_bits(got: Any, want: Any) -> bool:
    """Equal dtype, shape and bytes (so the sign of every zero), NaNs compared as NaNs."""
    got, want = _canonical(got), _canonical(want)
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def _layouts(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    """Shard on each dim and Replicate over the mesh dims, and partials beside a Shard."""
    choices: list[Any] = [Replicate(), Shard(0), Shard(1)]
    out = [list(p) for p in itertools.product(choices, repeat=mesh.ndim)]
    if mesh.ndim == 2:
        for op in ("sum", "prod", "max", "min", "avg"):
            out += [[Shard(0), Partial(op)], [Partial(op), Shard(0)], [Partial(op), Shard(1)]]
    else:
        out += [[Partial("prod")]]
    return out


def test_int_index_keeps_negative_zero(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    with BitVerdict(comm) as verdict:
        for dtype in (np.float64, np.float32, np.complex128):
            x = _grid(dtype)
            for placements in _layouts(mesh):
                ops = {p.op for p in placements if isinstance(p, Partial)}
                if dtype is np.complex128 and ops - {"sum"}:
                    continue  # unordered; a product or average of complex terms loses NaN and -0.0
                a = dmesh.distribute(x, mesh, placements)
                for key in [*range(-1, 8), (slice(None), 2), (3, 0), (0, -1), (Ellipsis, 4)]:
                    got = a[key].full_array()
                    label = f"{dtype.__name__} {placements}[{key}]"
                    verdict.check(_same_bits(got, x[key]), f"{label}: {got!r} != {x[key]!r}")
                    verdict.bits(label, got)


def test_uneven_and_empty_blocks(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Slices leave uneven and (at 4 ranks) empty blocks; ints, uints and bools too."""
    rest = [Replicate()] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        for dtype in (np.float64, np.int64, np.uint8, np.bool_):
            x = _grid() if dtype is np.float64 else np.arange(40).reshape(8, 5).astype(dtype)
            if dtype is np.int64:
                x[0, 0], x[5, 1] = np.iinfo(np.int64).min, np.iinfo(np.int64).max
            for placements in ([Shard(0), *rest], [Shard(1), *rest], [Shard(0)] * mesh.ndim):
                for key in ((slice(5, None),), (slice(1, None), slice(3, None))):
                    a = dmesh.distribute(x, mesh, placements)[key]
                    part = x[key]
                    for i in range(part.shape[0]):
                        got = a[i].full_array()
                        label = f"{dtype.__name__} {placements}{key}[{i}]"
                        verdict.check(_same_bits(got, part[i]), f"{label}: {got!r}")
                        verdict.bits(label, got)


def test_partial_result_reduces_to_negative_zero(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh
) -> None:
    """The Partial("sum") result of a[i] used in arithmetic keeps -0.0 and NaN."""
    x = np.array([0.5, -0.0, np.nan, -0.0, np.inf, 1.0, -0.0])
    a = dmesh.distribute(x, mesh, [Shard(0)] * mesh.ndim)
    with BitVerdict(comm) as verdict:
        for i in range(x.size):
            picked = a[i]
            for name, got, want in (
                ("a[i]", picked.full_array(), x[i]),
                ("a[i] * 2", (picked * 2.0).full_array(), x[i] * 2.0),
                ("-a[i]", (-picked).full_array(), -x[i]),
                ("float", np.float64(float(picked)), np.float64(x[i])),
            ):
                verdict.check(_same_bits(got, want), f"{name} at {i}: {got!r} != {want!r}")
                verdict.bits(f"{name} at {i}", got)


def test_index_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(_grid(), mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    assert_raises_all(comm, IndexError, a.__getitem__, 8, match="out of bounds")
    assert_raises_all(comm, IndexError, a.__getitem__, (0, -6), match="out of bounds")
    assert_raises_all(comm, UnsupportedError, a.__getitem__, 1.5, match="float")


# -- DArray values in assignments: 0-d (a partial one reduced first) and broadcasting ---------
Z = np.arange(21.0).reshape(7, 3) - 10.0


def _targets(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    """The assigned array's placements: Shard on each dim, Replicate, and a partial one."""
    choices: list[Any] = [Replicate(), Shard(0), Shard(1)]
    out = [list(p) for p in itertools.product(choices, repeat=mesh.ndim)]
    return [*out, [Partial("sum")] + [Shard(0)] * (mesh.ndim - 1)]


def _value_layouts(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[Any]]:
    rest = [Replicate()] * (mesh.ndim - 1)
    shards = [[Shard(d), *rest] for d in range(ndim)] + ([[Shard(0)] * mesh.ndim] if ndim else [])
    return [[Replicate(), *rest], [Partial("sum"), *rest], *shards]


# (key, value shape): the selection's shape, a row or column to broadcast, extra leading ones.
ASSIGNMENTS: list[tuple[Any, tuple[int, ...]]] = [
    ((slice(None), 1), ()),
    ((slice(2, 6),), ()),
    ((slice(None), 1), (7,)),
    ((slice(2, 6),), (1, 3)),
    ((slice(2, 6),), (3,)),
    ((slice(None),), (7, 1)),
    ((slice(None),), (1, 1, 3)),
    ((3,), (3,)),
    ((-2, slice(1, None)), (2,)),
    ((3, 2), ()),
    ((slice(None, None, -1), 0), (7,)),
    ((slice(None, None, -2),), (1, 3)),
    ((slice(5, 0, -2), slice(None, None, -1)), (3, 3)),
    ((None, slice(1, 4)), (1, 3, 3)),
    ((Ellipsis, 2), (7,)),
]


def test_darray_values_broadcast(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``z[key] = v`` for DArray values of every layout, as NumPy with v's full array."""
    with BitVerdict(comm) as verdict:
        for (key, shape), z_placements in itertools.product(ASSIGNMENTS, _targets(mesh)):
            values = -np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape)
            for v_placements in _value_layouts(mesh, len(shape)):
                z = dmesh.distribute(Z, mesh, z_placements)
                v = dmesh.distribute(values, mesh, v_placements)
                z[key] = v
                want = Z.copy()
                want[key] = values
                got = z.full_array()
                label = f"z{z_placements}[{key}] = v{v_placements} of shape {shape}"
                verdict.check(_same_bits(got, want), f"{label}: {got!r}")
                verdict.bits(label, got)


def test_zero_d_values_from_indexing(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """``z[:, 1] = r[0]`` with r[0] a 0-d DArray (Partial where r is sharded), -0.0 kept."""
    r_values = np.array([-0.0, np.inf, np.nan, 2.5, -7.0])
    rest = [Replicate()] * (mesh.ndim - 1)
    with BitVerdict(comm) as verdict:
        for r_placements in ([Shard(0), *rest], [Replicate(), *rest], [Shard(0)] * mesh.ndim):
            r = dmesh.distribute(r_values, mesh, r_placements)
            for z_placements in ([Shard(0), *rest], [Shard(1), *rest], [Replicate(), *rest]):
                for big, cut in ((Z, slice(None)), (np.vstack([Z, Z[:1]]), slice(1, None))):
                    z = dmesh.distribute(big, mesh, z_placements)[cut]  # uneven, or empty
                    want = big[cut].copy()
                    for i in range(r_values.size):
                        z[:, i % 3] = r[i]
                        want[:, i % 3] = r_values[i]
                    z[4] = r[3]
                    want[4] = r_values[3]
                    got = z.full_array()
                    label = f"r{r_placements} z{z_placements}[{cut}]"
                    verdict.check(_same_bits(got, want), f"{label}: {got!r}")
                    verdict.bits(label, got)
            z = dmesh.distribute(Z, mesh, [Shard(1), *rest])
            want = Z.copy()
            z[[0, 5, 2]] = r[0]  # integer arrays and masks take the fancy path
            want[[0, 5, 2]] = r_values[0]
            z[z > 3.0] = r[4]
            want[want > 3.0] = r_values[4]
            verdict.check(_same_bits(z.full_array(), want), f"fancy/mask {r_placements}")
            ints = dmesh.distribute(np.array([3, -4]), mesh, r_placements)
            z = dmesh.distribute(Z, mesh, [Shard(0), *rest])
            z[1:3, 0] = ints[1]  # an int value cast as NumPy casts it
            want = Z.copy()
            want[1:3, 0] = -4
            verdict.check(_same_bits(z.full_array(), want), f"int value {r_placements}")


def test_assignment_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    rest = [Replicate()] * (mesh.ndim - 1)
    z = dmesh.distribute(Z, mesh, [Shard(0), *rest])
    v = dmesh.distribute(np.ones(4), mesh, [Shard(0), *rest])
    assert_raises_all(comm, ArgumentError, z.__setitem__, (slice(None), 1), v, match="broadcast")
    w = dmesh.distribute(np.ones((2, 3)), mesh, [Shard(0), *rest])
    assert_raises_all(comm, ArgumentError, z.__setitem__, 3, w, match=r"shape \(2, 3\)")
    assert_raises_all(comm, IndexError, z.__setitem__, 7, v[0], match="out of bounds")
    with dmesh.init_mesh((comm.Get_size(),), comm=comm) as other:
        u = dmesh.distribute(np.ones(7), other, [Shard(0)])
        assert_raises_all(comm, ArgumentTypeError, z.__setitem__, (slice(None), 1), u, match="mesh")


def test_masks_and_nonzero_never_gather(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """a[mask], np.nonzero: blocks move to dim 0 by an all-to-all; only counts are gathered."""
    x = np.arange(48.0).reshape(8, 6) % 7 - 3.0
    rest = [Replicate()] * (mesh.ndim - 1)
    layouts: list[list[Any]] = [[Shard(1)] * mesh.ndim, [*rest, Shard(1)]]
    if mesh.ndim == 2:
        layouts += [[Shard(0), Shard(1)], [Shard(1), Shard(0)], [Partial("sum"), Shard(1)]]
    with Verdict(comm) as verdict:
        for placements in layouts:
            a = dmesh.distribute(x, mesh, placements)
            with debug.CommMode() as mode:
                picked = a[a > 0]
                rows, cols = np.nonzero(a)
            gathered = mode.bytes().get("all_gather", (0, 0))[1]
            verdict.check(gathered <= 4 * 8 * mesh.size(), f"{placements}: gathered {gathered} B")
            verdict.equal(picked.full_array(), x[x > 0])
            verdict.equal(rows.full_array(), np.nonzero(x)[0])
            verdict.equal(cols.full_array(), np.nonzero(x)[1])
