"""AbstractMesh: names and sizes without a communicator (pure, no MPI communication).

``MPI.Compute_dims`` is the reference for ``for_ranks``: a local computation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

from dmesh import AbstractMesh, ArgumentError, ArgumentTypeError


def test_abstract_mesh_basics() -> None:
    mesh = AbstractMesh([2, np.int64(3)], ["x", "y"])  # type: ignore[arg-type]
    assert mesh.shape == (2, 3)
    assert type(mesh.shape[1]) is int  # normalized, so equal meshes hash equal
    assert mesh.names == ("x", "y")
    assert mesh.ndim == 2
    assert (mesh.size(), mesh.size("y"), mesh.size(0), mesh.size(-1)) == (6, 3, 2, 3)
    assert (mesh.dim_index("y"), mesh.dim_index(-2), mesh.dim_index(np.int32(1))) == (1, 0, 1)
    assert repr(mesh) == "mesh x=2,y=3"
    assert mesh == AbstractMesh((2, 3), ("x", "y"))
    assert hash(mesh) == hash(AbstractMesh((2, 3), ("x", "y")))
    assert mesh != AbstractMesh((3, 2), ("x", "y"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        mesh.shape = (1, 1)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("shape", "names", "error", "match"),
    [
        ((0,), ("x",), ArgumentError, "positive"),
        ((-1,), ("x",), ArgumentError, "only init_mesh"),
        ((), (), ArgumentError, "at least one"),
        ((2,), ("x", "y"), ArgumentError, "2 name"),
        ((2, 2), ("x", "x"), ArgumentError, "'x' appears twice"),
        ((2,), ("",), ArgumentError, "empty"),
        ((2.0,), ("x",), ArgumentTypeError, "must be an int"),
        ((True,), ("x",), ArgumentTypeError, "must be an int"),
        ("22", ("x",), ArgumentTypeError, "tuple of ints"),
        ((2,), (1,), ArgumentTypeError, "must be a str"),
        ((2,), "x", ArgumentTypeError, "tuple of str"),
    ],
)
def test_abstract_mesh_validation(shape: Any, names: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        AbstractMesh(shape, names)


def test_abstract_dim_index_errors() -> None:
    mesh = AbstractMesh((2, 3), ("data", "model"))
    with pytest.raises(ArgumentError, match="did you mean 'model'"):
        mesh.dim_index("modle")
    for index in (2, -3):
        with pytest.raises(ArgumentError, match="out of range"):
            mesh.size(index)
    for bad in (1.0, True, None):
        with pytest.raises(ArgumentTypeError, match="int index or a str"):
            mesh.dim_index(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("dims", "n_ranks"), [((0,), 6), ((0, 2), 6), ((3, 0), 12), ((2, 0, 2), 8), ((1, 0), 5)]
)
def test_for_ranks_fills_in_like_compute_dims(dims: tuple[int, ...], n_ranks: int) -> None:
    shape = tuple(-1 if size == 0 else size for size in dims)
    mesh = AbstractMesh.for_ranks(shape, None, n_ranks)
    assert mesh.shape == tuple(MPI.Compute_dims(n_ranks, list(dims)))
    assert mesh.names == tuple(f"dim{i}" for i in range(len(dims)))


def test_for_ranks_defaults_and_errors() -> None:
    assert AbstractMesh.for_ranks(None, None, 5) == AbstractMesh((5,), ("dim0",))
    assert AbstractMesh.for_ranks(3, "x", 5) == AbstractMesh((3,), ("x",))
    with pytest.raises(ArgumentError, match="at most one size may be -1"):
        AbstractMesh.for_ranks((-1, -1), None, 4)
    with pytest.raises(ArgumentError, match="multiply to 3, which does not divide 4"):
        AbstractMesh.for_ranks((3, -1), None, 4)
    with pytest.raises(ArgumentError, match="needs 6 ranks but there are 4"):
        AbstractMesh.for_ranks((2, 3), None, 4)
