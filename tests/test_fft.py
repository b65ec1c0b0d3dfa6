"""np.fft on DArrays against numpy.fft on one process: every function, norm, ``s=``/``axes=``,
every placement on 1-D and (2, 2) meshes, uneven and empty blocks, round trips that need no
redistribution in between, the messages sent, and errors raised on every rank.

Every rank makes the same sequence of collective assertions.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh
import dmesh.collectives as coll
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.fft_plan import one_d_transforms, plan_fft
from dmesh.core.layout import Layout
from helpers import assert_all, assert_equal_all, assert_raises_all

WORLD = MPI.COMM_WORLD.Get_size()
_RNG = np.random.default_rng(3)
# 5 and 3 along axes 0 and 1: uneven blocks on 2-4 ranks, an empty one on 4.
REAL = _RNG.standard_normal((5, 3, 6))
COMPLEX = REAL + 1j * _RNG.standard_normal((5, 3, 6))
NORMS = (None, "backward", "ortho", "forward")

# (function, input, keywords): 1-D and n-D transforms, with s=/n= that crop,
# pad and give odd lengths on the real axis.
CASES: list[tuple[Callable[..., Any], np.ndarray, dict[str, Any]]] = [
    (np.fft.fft, COMPLEX, {}),
    (np.fft.fft, COMPLEX, {"axis": 0, "n": 7}),
    (np.fft.ifft, COMPLEX, {"axis": 1, "n": 2}),
    (np.fft.rfft, REAL, {"axis": 0}),
    (np.fft.irfft, COMPLEX, {"axis": 1}),
    (np.fft.irfft, COMPLEX, {"axis": 0, "n": 9}),
    (np.fft.fftn, COMPLEX, {}),
    (np.fft.fftn, REAL, {"s": (4, 5), "axes": (2, 0)}),
    (np.fft.ifftn, COMPLEX, {}),
    (np.fft.ifftn, COMPLEX, {"axes": (0, 1)}),
    (np.fft.rfftn, REAL, {}),
    (np.fft.rfftn, REAL, {"s": (6, 4, 7), "axes": (0, 1, 2)}),
    (np.fft.rfftn, REAL, {"axes": (1, 0)}),
    (np.fft.irfftn, COMPLEX, {}),
    (np.fft.irfftn, COMPLEX, {"s": (5, 3, 11), "axes": (0, 1, 2)}),
    (np.fft.irfftn, COMPLEX, {"s": (4, 5), "axes": (2, 0)}),
    (np.fft.fft2, COMPLEX, {}),
    (np.fft.fft2, COMPLEX, {"axes": (0, 2), "s": (6, 3)}),
    (np.fft.ifft2, COMPLEX, {"axes": (1, 0)}),
    (np.fft.rfft2, REAL, {"axes": (0, 1)}),
    (np.fft.irfft2, COMPLEX, {"s": (3, 7)}),
]


def _case_id(case: tuple[Callable[..., Any], np.ndarray, dict[str, Any]]) -> str:
    func, x, kwargs = case
    return f"{func.__name__}-{x.dtype.kind}-" + ",".join(f"{k}={v}" for k, v in kwargs.items())


def _placements(mesh: dmesh.DeviceMesh, ndim: int) -> list[tuple[Any, ...]]:
    choices = [Replicate(), *(Shard(d) for d in range(ndim))]
    return list(itertools.product(choices, repeat=mesh.ndim))


def _check(comm: MPI.Intracomm, got: Any, expected: np.ndarray, what: str) -> None:
    """The gathered result and this rank's block match NumPy to 1e-12 relative."""
    scale = float(np.abs(expected).max()) if expected.size else 1.0
    tol = {"rtol": 1e-12, "atol": 1e-12 * scale}
    assert_all(comm, isinstance(got, dmesh.DArray), f"{what}: {type(got)}")
    coord = got.mesh.coordinate
    block = expected[got.spec.layout.slices(coord)] if coord is not None else got.local
    ok = got.local.shape == block.shape and np.allclose(got.local, block, **tol)
    assert_all(comm, ok, f"{what}: block {got.local.shape} != {block.shape} ({got.spec})")
    assert_equal_all(comm, got.full_array(), expected, **tol)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_matches_numpy_for_every_placement(
    comm: MPI.Intracomm,
    mesh: dmesh.DeviceMesh,
    case: tuple[Callable[..., Any], np.ndarray, dict[str, Any]],
) -> None:
    func, x, kwargs = case
    expected = func(x, **kwargs)
    for placements in _placements(mesh, x.ndim):
        got = func(dmesh.distribute(x, mesh, list(placements)), **kwargs)
        _check(comm, got, expected, f"{func.__name__}{placements}")


@pytest.mark.parametrize("norm", NORMS)
def test_norms(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, norm: str | None) -> None:
    placements = [Shard(0)] + [Shard(1)] * (mesh.ndim - 1)
    for func, x, kwargs in CASES:
        expected = func(x, norm=norm, **kwargs)
        got = func(dmesh.distribute(x, mesh, placements), norm=norm, **kwargs)
        _check(comm, got, expected, f"{func.__name__} norm={norm}")


def test_empty_and_uneven_blocks(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Axes shorter than the mesh, odd lengths, and uneven blocks from slicing."""
    x = _RNG.standard_normal((2, 7, 3)) + 1j * _RNG.standard_normal((2, 7, 3))
    for placements in _placements(mesh, 3):
        a = dmesh.distribute(x, mesh, list(placements))
        _check(comm, np.fft.fftn(a), np.fft.fftn(x), f"short axis {placements}")
        sliced = a[:, 1:, :]  # uneven along axis 1 when it is sharded
        _check(comm, np.fft.ifftn(sliced), np.fft.ifftn(x[:, 1:]), f"sliced {placements}")
        real = dmesh.distribute(x.real, mesh, list(placements))[:, 1:, :]
        _check(comm, np.fft.rfftn(real), np.fft.rfftn(x[:, 1:].real), f"real {placements}")


def test_dtypes(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """float32 stays single precision, integers become complex128, as in numpy.fft."""
    placements = [Shard(0)] * mesh.ndim
    x32 = REAL.astype(np.float32)
    got = np.fft.rfftn(dmesh.distribute(x32, mesh, placements))
    expected = np.fft.rfftn(x32)
    assert_equal_all(comm, got.full_array(), expected, rtol=1e-5, atol=1e-5)
    ints = np.arange(30).reshape(5, 6)
    _check(comm, np.fft.fft2(dmesh.distribute(ints, mesh, placements)), np.fft.fft2(ints), "int")


def test_partial_input(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Partial inputs are reduced first: the transform of the sum."""
    a = dmesh.distribute(COMPLEX, mesh, [Shard(0)] * mesh.ndim)
    b = dmesh.distribute(COMPLEX, mesh, [Shard(1)] * mesh.ndim)
    partial = a.redistribute(mesh, [Partial("sum")] + [Replicate()] * (mesh.ndim - 1))
    expected = np.fft.fftn(COMPLEX)
    _check(comm, np.fft.fftn(partial), expected, "partial")
    _check(comm, np.fft.fftn(partial + b) / 2, expected, "partial + sharded")


def test_uneven_partial_input(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """Partial terms in uneven blocks: reduced (and rebalanced) before the transform."""
    if mesh.ndim < 2:
        pytest.skip("Partial beside an uneven Shard needs a 2-D mesh")
    a = dmesh.distribute(COMPLEX, mesh, [Shard(0), Replicate()])[2:]  # uneven along axis 0
    coord = mesh.coordinate
    term = a.local if coord is None or coord[1] == 0 else np.zeros_like(a.local)
    partial = dmesh.from_local(term, mesh, [Shard(0), Partial("sum")])
    assert_all(comm, not partial.spec.layout.is_balanced, f"{partial.spec} is balanced")
    _check(comm, np.fft.fftn(partial), np.fft.fftn(COMPLEX[2:]), "uneven partial")
    chained = np.fft.fft(np.fft.ifft(partial, axis=0), axis=2)
    _check(comm, chained, np.fft.fft(np.fft.ifft(COMPLEX[2:], axis=0), axis=2), "chained")


def _round_trip_cases(mesh: dmesh.DeviceMesh) -> list[list[Any]]:
    if mesh.ndim == 1:
        return [[Shard(0)], [Shard(1)], [Shard(2)], [Replicate()]]
    return [
        [Shard(0), Shard(1)],
        [Shard(1), Shard(2)],
        [Shard(2), Shard(0)],
        [Replicate(), Shard(0)],
    ]


def test_round_trips_need_no_redistribution(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ifftn(fftn(a))`` and ``irfftn(rfftn(a), s)`` give ``a`` in ``a``'s placements, with one
    transpose per sharded mesh dim each way: the inverse starts on its local axes."""
    moves = _count_moves(monkeypatch)
    x = _RNG.standard_normal((6, 5, 7))
    for placements in _round_trip_cases(mesh):
        a = dmesh.distribute(x, mesh, placements)
        sharded = sum(isinstance(p, Shard) and mesh.shape[m] > 1 for m, p in enumerate(placements))
        moves.clear()
        back = np.fft.ifftn(np.fft.fftn(a))
        assert_all(comm, back.placements == a.placements, f"{placements} -> {back.placements}")
        assert_all(comm, len(moves) == 2 * sharded, f"{placements}: {len(moves)} moves")
        _check(comm, back, x.astype(complex), f"ifftn(fftn) {placements}")
        spectrum = np.fft.rfftn(a)
        back = np.fft.irfftn(spectrum, s=x.shape, axes=(0, 1, 2))
        # irfftn transforms the real axis last, so it cannot end sharded there.
        real_axis_sharded = Shard(2) in placements and mesh.size() > 1
        same = real_axis_sharded or back.placements == a.placements
        assert_all(comm, same, f"{placements} -> {back.placements}")
        _check(comm, back, x, f"irfftn(rfftn) {placements}")
        half = np.fft.irfft(np.fft.rfft(a, axis=1), n=5, axis=1)
        _check(comm, half, x, f"irfft(rfft, axis=1) {placements}")


def _count_moves(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record every layout change the FFT makes: a ``DArray.with_layout`` that moves data, or
    a transpose's planned steps run on the block (``ops/kernels/fft.py``'s ``run_steps``)."""
    from dmesh.ops.kernels import fft as fft_kernel

    moves: list[Any] = []
    original = dmesh.DArray.with_layout
    original_steps = fft_kernel.run_steps

    def counting(self: dmesh.DArray, layout: Layout) -> dmesh.DArray:
        if layout != self.spec.layout:
            moves.append(layout.placements)
        return original(self, layout)

    def counting_steps(local: Any, steps: Any, mesh: Any, dst_mesh: Any) -> Any:
        if steps:
            moves.append(steps)
        return original_steps(local, steps, mesh, dst_mesh)

    monkeypatch.setattr(dmesh.DArray, "with_layout", counting)
    monkeypatch.setattr(fft_kernel, "run_steps", counting_steps)
    return moves


def test_messages(
    comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slab: one all-to-all; pencil: one per mesh dim; replicated: no message; no gather."""
    calls: list[str] = []
    for name in ("all_to_all", "all_gather", "all_reduce", "broadcast"):
        original = getattr(coll, name)

        def counting(*args: Any, _name: str = name, _f: Any = original, **kwargs: Any) -> Any:
            calls.append(_name)
            return _f(*args, **kwargs)

        monkeypatch.setattr(coll, name, counting)
    x = COMPLEX
    sharded = [Shard(0)] + [Shard(1)] * (mesh.ndim - 1)
    a = dmesh.distribute(x, mesh, sharded)
    replicated = dmesh.distribute(x, mesh, [Replicate()] * mesh.ndim)
    calls.clear()
    got = np.fft.fftn(a)
    seen = list(calls)
    calls.clear()
    np.fft.rfftn(dmesh.distribute(REAL, mesh, [Replicate()] * mesh.ndim))
    np.fft.ifftn(replicated)
    local_only = list(calls)
    monkeypatch.undo()
    transposes = sum(n > 1 for n in mesh.shape)
    assert_all(comm, seen == ["all_to_all"] * transposes, f"fftn{sharded}: {seen}")
    assert_all(comm, local_only == [], f"replicated: {local_only}")
    _check(comm, got, np.fft.fftn(x), "counted")


@pytest.mark.skipif(WORLD < 2, reason="a subset mesh needs at least 2 ranks")
def test_subset_mesh(comm: MPI.Intracomm) -> None:
    """Ranks outside the mesh hold empty blocks and take part in no message."""
    with dmesh.init_mesh((WORLD - 1,), comm=comm) as mesh:
        for placements in ([Shard(0)], [Shard(2)], [Replicate()]):
            a = dmesh.distribute(COMPLEX, mesh, placements)
            got = np.fft.ifftn(np.fft.fftn(a))
            real = dmesh.distribute(REAL, mesh, placements)
            back = np.fft.irfftn(np.fft.rfftn(real), s=REAL.shape, axes=(0, 1, 2))
            empty = got.local.size == 0 and back.local.size == 0
            assert_all(comm, mesh.is_member or empty, "a non-member holds data")
            assert_all(comm, back.dtype == np.float64 and got.dtype == np.complex128, "dtype")
            if mesh.is_member:  # the members check among themselves
                _check(mesh.comm(), got, COMPLEX, f"subset {placements}")
                _check(mesh.comm(), back, REAL, f"subset real {placements}")


def test_errors_on_every_rank(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    a = dmesh.distribute(COMPLEX, mesh, [Shard(0)] * mesh.ndim)
    unsupported = [
        (np.fft.fftn, {"axes": (0, 0)}, "repeated axes"),
        (np.fft.fft, {"out": np.empty(COMPLEX.shape, complex)}, "out="),
    ]
    for func, kwargs, match in unsupported:
        assert_raises_all(comm, UnsupportedError, func, a, match=match, **kwargs)
    invalid = [
        (np.fft.fft, {"norm": "unitary"}, "Invalid norm"),
        (np.fft.fft, {"n": 0}, "Invalid number of FFT data points"),
        (np.fft.fftn, {"s": (4,), "axes": (0, 1)}, "different lengths"),
        (np.fft.irfftn, {"axes": (0, 1), "s": (3, 0)}, "Invalid number"),
    ]
    for func, kwargs, match in invalid:
        assert_raises_all(comm, ArgumentError, func, a, match=match, **kwargs)
        assert_raises_all(comm, ValueError, func, COMPLEX, **kwargs)  # NumPy agrees
    assert_raises_all(comm, ArgumentError, np.fft.fftn, a, axes=(0, 3), match="out of bounds")
    assert_raises_all(comm, TypeError, np.fft.rfft, a)  # real input only, as NumPy


def test_sharded_1d_array(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh) -> None:
    """A 1-D array sharded along its only axis takes the four-step FFT (fftn too), or
    Bluestein's where its length does not factor (tests/test_fft_1d.py tests it further)."""
    x = COMPLEX[:, 0, 0]
    a = dmesh.distribute(x, mesh, [Shard(0)] * mesh.ndim)
    # 5 points: no n1 x n2 view with n1, n2 >= 2 at 2+ blocks: Bluestein's convolution.
    for func in (np.fft.fft, np.fft.ifft, np.fft.fftn):
        _check(comm, func(a), func(x), f"1-D {func.__name__}")
    replicated = dmesh.distribute(x, mesh, [Replicate()] * mesh.ndim)
    _check(comm, np.fft.ifft(replicated, n=8), np.fft.ifft(x, n=8), "1-D replicated")
    long = COMPLEX.reshape(-1)[:16]
    b = dmesh.distribute(long, mesh, [Shard(0)] * mesh.ndim)
    for func in (np.fft.fftn, np.fft.ifftn):
        _check(comm, func(b), func(long), f"{func.__name__} 1-D sharded")
    _check(comm, np.fft.rfftn(b.real), np.fft.rfftn(long.real), "rfftn 1-D sharded")
    back = np.fft.irfftn(np.fft.rfftn(b.real), s=(16,))
    _check(comm, back, np.fft.irfftn(np.fft.rfftn(long.real), s=(16,)), "irfftn 1-D")


# -- the plans, in one process -------------------------------------------------------
def _plan(mesh_shape: tuple[int, ...], placements: tuple[Any, ...], kind: str) -> Layout:
    shape = (8, 6, 7)
    layout = Layout.balanced(mesh_shape, placements, shape)
    lengths = [8, 6, 7] if kind != "irfft" else [8, 6, 12]
    _, final = plan_fft(layout, one_d_transforms(kind, lengths, [0, 1, 2]), kind in ("fft", "rfft"))
    return final


@pytest.mark.pure  # plans on abstract layouts, no communication
@pytest.mark.parametrize(
    ("mesh_shape", "before", "forward", "inverse"),
    [
        ((4,), (Shard(0),), (Shard(1),), (Shard(2),)),
        ((4,), (Shard(1),), (Shard(2),), (Shard(0),)),
        ((4,), (Shard(2),), (Shard(0),), (Shard(1),)),
        ((2, 2), (Shard(0), Shard(1)), (Shard(1), Shard(2)), (Shard(2), Shard(0))),
        ((2, 2), (Shard(1), Shard(2)), (Shard(2), Shard(0)), (Shard(0), Shard(1))),
        ((2, 2), (Replicate(), Shard(0)), (Replicate(), Shard(1)), (Replicate(), Shard(2))),
    ],
    ids=str,
)
def test_documented_layouts(
    mesh_shape: tuple[int, ...], before: tuple[Any, ...], forward: Any, inverse: Any
) -> None:
    """The output layouts in ops/kernels/fft.py's docstring."""
    assert _plan(mesh_shape, before, "fft").placements == forward
    assert _plan(mesh_shape, before, "ifft").placements == inverse
    assert _plan(mesh_shape, forward, "ifft").placements == before
