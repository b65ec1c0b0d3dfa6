"""dmesh: distributed arrays for NumPy and CuPy over MPI.

A program is written once, SPMD style, and launched with ``mpiexec -n N``.
:func:`init_mesh` arranges the ranks into a :class:`DeviceMesh` with named
dimensions; :class:`AbstractMesh` is its shape and names alone, for pure
layout arithmetic. ``import dmesh`` creates no communicator and never imports
CuPy.
"""

from collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    CollectiveMismatchError,
    DMeshError,
)
from dmesh.abstract_mesh import AbstractMesh
from dmesh.mesh import DeviceMesh, init_mesh

__all__ = [
    "AbstractMesh",
    "ArgumentError",
    "ArgumentTypeError",
    "CollectiveMismatchError",
    "DMeshError",
    "DeviceMesh",
    "init_mesh",
]
