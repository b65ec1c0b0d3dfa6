"""DeviceMesh: shapes, coordinates, communicators, sub-meshes, errors (AbstractMesh: pure/).

Every mesh is built on the test's private communicator and checked against its
``ranks`` array: each communicator must hold exactly the ranks that array puts
on its line, in order. Shapes are derived from the world size, so the module
runs at any rank count.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

from dmesh import (
    ArgumentError,
    ArgumentTypeError,
    DeviceMesh,
    DMeshError,
    init_mesh,
)
from dmesh.collectives import lifecycle
from dmesh.collectives.group import MeshLike, resolve_group
from helpers import assert_all, assert_raises_all

SIZE = MPI.COMM_WORLD.Get_size()
ROOT = Path(__file__).resolve().parent.parent


def check_mesh(comm: MPI.Intracomm, mesh: DeviceMesh, member: bool) -> None:
    """Check ``mesh`` on every rank against its ``ranks`` array; collective over ``comm``."""
    problems: list[str] = []
    me = comm.Get_rank()

    def expect(ok: bool, what: str) -> None:
        if not ok:
            problems.append(what)

    expect(mesh.ranks.shape == mesh.shape, f"ranks has shape {mesh.ranks.shape}")
    expect(mesh.is_member == member, f"is_member is {mesh.is_member}, expected {member}")
    # Branch on the communicator itself, so that exactly its members run its collectives.
    if mesh.comm() != MPI.COMM_NULL and mesh.coordinate is not None:
        coord = mesh.coordinate
        expect(int(mesh.ranks[coord]) == me, f"ranks[{coord}] = {mesh.ranks[coord]} != {me}")
        expect(mesh.rank == np.ravel_multi_index(coord, mesh.shape), f"rank {mesh.rank}")
        whole = mesh.comm()
        expect(whole.Get_size() == mesh.size(), f"comm() has {whole.Get_size()} ranks")
        members = whole.allgather(me)
        expect(members == mesh.ranks.ravel().tolist(), f"comm() holds {members}")
        for d in range(mesh.ndim):
            line: list[Any] = list(coord)
            line[d] = slice(None)
            expected = mesh.ranks[tuple(line)].tolist()
            dim_comm = mesh.comm(d)
            expect(dim_comm.Get_rank() == coord[d], f"comm({d}) rank {dim_comm.Get_rank()}")
            members = dim_comm.allgather(me)
            expect(members == expected, f"comm({d}) holds {members}, expected {expected}")
            expect(mesh.comm(mesh.names[d]) is dim_comm, f"comm({mesh.names[d]!r}) differs")
        if mesh.ndim == 1:
            expect(mesh.comm() is mesh.comm(0), "a 1-D mesh has two communicators")
    else:
        expect(mesh.coordinate is None and mesh.rank is None, "non-member has coordinates")
        expect(mesh.comm() == MPI.COMM_NULL, "non-member has comm()")
        nulls = [mesh.comm(d) == MPI.COMM_NULL for d in range(mesh.ndim)]
        expect(all(nulls), f"non-member has dimension communicators: {nulls}")
    assert_all(comm, not problems, "; ".join(problems))


# DeviceMesh over the test's communicator.


def test_default_mesh_is_1d_over_all_ranks(comm: MPI.Intracomm) -> None:
    mesh = init_mesh(comm=comm)
    assert_all(comm, mesh.shape == (SIZE,) and mesh.names == ("dim0",), repr(mesh))
    assert_all(comm, mesh.coordinate == (comm.Get_rank(),) and mesh.device == "cpu", repr(mesh))
    assert_all(comm, isinstance(mesh, MeshLike) and resolve_group(mesh) is mesh.comm(0))
    check_mesh(comm, mesh, member=True)
    mesh.close()


def _full_shapes(size: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    cases = [
        ((-1,), (size,)),
        ((1, size), (1, size)),
        ((-1, 1), (size, 1)),
        ((1, -1, 1), (1, size, 1)),
    ]
    if size % 2 == 0:
        cases += [((2, -1), (2, size // 2)), ((-1, 2), (size // 2, 2))]
    if size % 4 == 0:
        cases += [((2, -1, 2), (2, size // 4, 2))]
    return cases


@pytest.mark.parametrize(("shape", "resolved"), _full_shapes(SIZE), ids=str)
def test_mesh_shapes_coordinates_and_dim_comms(
    comm: MPI.Intracomm, shape: tuple[int, ...], resolved: tuple[int, ...]
) -> None:
    with init_mesh(shape, comm=comm) as mesh:
        assert_all(comm, mesh.shape == resolved, f"{shape} resolved to {mesh.shape}")
        expected = np.arange(SIZE).reshape(resolved)
        assert_all(comm, np.array_equal(mesh.ranks, expected), f"ranks {mesh.ranks}")
        assert_all(comm, not mesh.ranks.flags.writeable, "ranks is writeable")
        check_mesh(comm, mesh, member=True)


def _dp_tp_shape(size: int) -> tuple[int, int]:
    return (2, size // 2) if size % 2 == 0 else (1, size)


def test_1d_submeshes_reuse_the_dimension_comms(comm: MPI.Intracomm) -> None:
    with init_mesh(_dp_tp_shape(SIZE), names=("dp", "tp"), comm=comm) as mesh:
        assert mesh.coordinate is not None
        dp_coord, tp_coord = mesh.coordinate
        tp = mesh["tp"]
        facts = {
            "cached": tp is mesh[1] and tp is mesh[-1] and tp is mesh[("tp",)],
            "whole": mesh[("dp", "tp")] is mesh and mesh[["dp", "tp"]] is mesh,
            "shape": tp.shape == (mesh.size("tp"),) and tp.names == ("tp",),
            "coordinate": tp.coordinate == (tp_coord,) and mesh["dp"].coordinate == (dp_coord,),
            "ranks": np.array_equal(tp.ranks, mesh.ranks[dp_coord]),
            "comm": tp.comm() is mesh.comm("tp") and mesh["dp"].comm(0) is mesh.comm(0),
            "grouplike": resolve_group((mesh, "tp")) is mesh.comm("tp"),
            "repr": repr(tp) == f"DeviceMesh(({tp.size()},), names=('tp',), device='cpu', "
            f"coordinate=({tp_coord},))",
        }
        assert_all(comm, all(facts.values()), str(facts))
        check_mesh(comm, tp, member=True)
        check_mesh(comm, mesh["dp"], member=True)


def test_multi_dim_submesh_and_flatten(comm: MPI.Intracomm) -> None:
    shape = (*_dp_tp_shape(SIZE), 1)
    with init_mesh(shape, names=("a", "b", "c"), comm=comm) as mesh:
        ac = mesh[("a", "c")]
        facts = {
            "cached": ac is mesh[(0, -1)] and ac["a"] is mesh["a"],
            "shape": ac.shape == (shape[0], 1) and ac.names == ("a", "c"),
            "new comm": ac.comm() is not mesh.comm() and ac.comm(1) is mesh.comm("c"),
        }
        assert_all(comm, all(facts.values()), str(facts))
        check_mesh(comm, ac, member=True)
        check_mesh(comm, mesh[("a", "b")], member=True)
        flat = ac.flatten()
        assert_all(comm, flat.names == ("a_c",) and flat is ac.flatten(), repr(flat))
        check_mesh(comm, flat, member=True)


def test_flatten(comm: MPI.Intracomm) -> None:
    with init_mesh(_dp_tp_shape(SIZE), names=("dp", "tp"), comm=comm) as mesh:
        flat = mesh.flatten()
        facts = {
            "cached": flat is mesh.flatten() and flat.flatten() is flat and flat[0] is flat,
            "shape": flat.shape == (SIZE,) and flat.names == ("dp_tp",),
            "coordinate": flat.coordinate == (mesh.rank,) and flat.rank == mesh.rank,
            "1-D topology": flat.comm().Get_dim() == 1,
        }
        assert_all(comm, all(facts.values()), str(facts))
        check_mesh(comm, flat, member=True)
    with init_mesh(comm=comm) as mesh:
        assert_all(comm, mesh.flatten() is mesh, "a 1-D mesh is its own flattening")


def _subset_shapes(size: int) -> list[tuple[int, ...]]:
    return [(size - 1,), (1,), (1, size - 1), (size - 1, 1)] if size > 1 else []


@pytest.mark.skipif(SIZE < 2, reason="a mesh over a subset needs at least 2 ranks")
@pytest.mark.parametrize("shape", _subset_shapes(SIZE), ids=str)
def test_mesh_over_a_subset(comm: MPI.Intracomm, shape: tuple[int, ...]) -> None:
    with init_mesh(shape, names=("x", "y")[: len(shape)], comm=comm) as mesh:
        member = comm.Get_rank() < int(np.prod(shape))
        check_mesh(comm, mesh, member=member)
        check_mesh(comm, mesh["x"], member=member)
        check_mesh(comm, mesh.flatten(), member=member)
        if mesh.is_member:  # a collective among the members only
            total = mesh.comm().allreduce(1)
            assert_all(mesh.comm(), total == mesh.size(), f"{total} members")
        whole = np.arange(np.prod(shape)).reshape(shape)
        assert_all(comm, np.array_equal(mesh.ranks, whole), f"ranks {mesh.ranks}")
    assert_all(comm, mesh.closed, "not closed")


def _init_errors(size: int) -> list[Any]:
    def case(error: type, match: str, **kwargs: Any) -> Any:
        return pytest.param(kwargs, error, match, id=f"{kwargs}")

    return [
        case(ArgumentError, "positive", shape=(0,)),
        case(ArgumentError, "positive", shape=(-2, 1)),
        case(ArgumentError, "at least one", shape=()),
        case(ArgumentError, f"needs {size + 1} ranks but there are {size}", shape=(size + 1,)),
        case(ArgumentError, f"needs {2 * size} ranks", shape=(2, size)),
        case(ArgumentError, "at most one size may be -1", shape=(-1, -1)),
        case(ArgumentError, "does not divide", shape=(size + 1, -1)),
        case(ArgumentTypeError, "must be an int", shape=("2",)),
        case(ArgumentTypeError, "must be an int", shape=2.0),
        case(ArgumentTypeError, "must be an int", shape=(True,)),
        case(ArgumentError, "appears twice", shape=(1, 1), names=("x", "x")),
        case(ArgumentError, "1 name", shape=(1, 1), names=("x",)),
        case(ArgumentTypeError, "must be a str", names=(1,)),
        case(ArgumentTypeError, "tuple of str", names=5),
        case(ArgumentError, "empty", names=("",)),
        case(ArgumentError, "did you mean 'cuda'", device="gpu"),
        case(ArgumentError, "give no index", device="cuda:0"),
        case(ArgumentError, r"not one of \['cpu', 'cuda'\]", device="tpu"),
        case(ArgumentTypeError, "device: expected one of", device=None),
        case(ArgumentTypeError, "Intracomm", comm="world"),
        case(ArgumentError, "COMM_NULL", comm=MPI.COMM_NULL),
    ]


@pytest.mark.parametrize(("kwargs", "error", "match"), _init_errors(SIZE))
def test_init_mesh_errors_on_every_rank(
    comm: MPI.Intracomm, kwargs: dict[str, Any], error: type, match: str
) -> None:
    # The error comes from validation before any communication, so if it
    # were raised on only some ranks, assert_raises_all would report them.
    arguments = {"comm": comm, **kwargs}
    assert_raises_all(comm, error, lambda: init_mesh(**arguments), match=match)


def test_unknown_dimensions_on_every_rank(comm: MPI.Intracomm) -> None:
    with init_mesh((1, SIZE), names=("dp", "tp"), comm=comm) as mesh:
        assert_raises_all(comm, ArgumentError, mesh.size, "tpp", match="did you mean 'tp'")
        assert_raises_all(comm, ArgumentError, mesh.comm, "ddp", match="did you mean 'dp'")
        assert_raises_all(comm, ArgumentError, mesh.comm, 2, match="out of range")
        assert_raises_all(comm, ArgumentTypeError, mesh.comm, 1.0, match="int index")
        get = mesh.__getitem__
        assert_raises_all(comm, ArgumentError, get, "ttp", match="did you mean 'tp'")
        assert_raises_all(comm, ArgumentError, get, ("tp", "dp"), match="select \\('dp', 'tp'\\)")
        assert_raises_all(comm, ArgumentError, get, ("tp", -1), match="twice")
        assert_raises_all(comm, ArgumentError, get, (), match="at least one")


def test_close_is_idempotent_and_frees_everything(comm: MPI.Intracomm) -> None:
    with init_mesh((1, SIZE), names=("dp", "tp"), comm=comm) as mesh:
        sub, flat = mesh["tp"], mesh.flatten()
        held = [mesh.comm(), mesh.comm(0), mesh.comm(1), flat.comm()]
        sub.close()  # a derived mesh owns nothing: the parent stays open
        tracked = all(any(c is owned for owned in lifecycle._owned) for c in held)
        assert_all(comm, tracked and not mesh.closed, "communicators not tracked, or closed")
    mesh.close()
    facts = {
        "closed": mesh.closed and sub.closed and flat.closed,
        "freed": all(c == MPI.COMM_NULL for c in held),
        "released": not any(c is owned for c in held for owned in lifecycle._owned),
        "metadata": mesh.shape == (1, SIZE) and repr(mesh).endswith(", closed)"),
    }
    assert_all(comm, all(facts.values()), str(facts))
    assert_raises_all(comm, DMeshError, mesh.comm, match="has been closed")
    assert_raises_all(comm, DMeshError, sub.comm, 0, match="has been closed")
    assert_raises_all(comm, DMeshError, mesh.__getitem__, "tp", match="has been closed")


# device="cuda", with CuPy replaced by a stand-in so the logic runs without a GPU.


def _fake_cupy(n_gpus: int, used: list[int]) -> types.ModuleType:
    cupy = types.ModuleType("cupy")
    device = types.SimpleNamespace
    cupy.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        runtime=types.SimpleNamespace(getDeviceCount=lambda: n_gpus),
        Device=lambda i: device(use=lambda: used.append(i)),
    )
    return cupy


def test_cuda_binds_the_local_rank_modulo_gpus(
    comm: MPI.Intracomm, monkeypatch: pytest.MonkeyPatch
) -> None:
    used: list[int] = []
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(2, used))
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    local_rank = node.Get_rank()
    node.Free()
    with init_mesh(comm=comm, device="cuda") as mesh:
        ok = used == [local_rank % 2] and mesh.device == "cuda"
        assert_all(comm, ok, f"bound {used}, local rank {local_rank}")


def test_cuda_errors_on_every_rank(comm: MPI.Intracomm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    build = lambda: init_mesh(device="cuda", comm=comm)  # noqa: E731
    assert_raises_all(comm, ArgumentError, build, match="gpu extra")
    # Only rank 0 lacks a GPU: the others must raise too, not wait in Create_cart.
    n_gpus = 0 if comm.Get_rank() == 0 else 1
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(n_gpus, []))
    assert_raises_all(comm, ArgumentError, build, match=r"rank\(s\) \[0\].*no GPU")


@pytest.mark.job
def test_import_dmesh_does_not_import_cupy(comm: MPI.Intracomm) -> None:
    # The child does no MPI; the launcher's variables are removed so that it
    # starts as a lone process.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "MPI_LOCAL"))}
    code = "import sys, dmesh; assert 'cupy' not in sys.modules"
    child = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert_all(comm, child.returncode == 0, child.stderr[-2000:])
