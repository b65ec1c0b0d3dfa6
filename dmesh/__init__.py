"""dmesh: distributed arrays for NumPy and CuPy over MPI.

A program is written once, SPMD style, and launched with ``mpiexec -n N``.
:func:`init_mesh` arranges the ranks into a :class:`DeviceMesh` with named
dimensions; :class:`AbstractMesh` is its shape and names alone, for pure
layout arithmetic. ``import dmesh`` creates no communicator and never imports
CuPy.

What a program does not run is loaded on first use (PEP 562: the
module's ``__getattr__``): ``dmesh.scaling`` (the cost model), ``dmesh.debug``
(with ``dmesh.visualize``) and ``dmesh.io`` (with ``dmesh.load``,
``dmesh.save`` and the checkpoints). ``dmesh.scaling.X``, ``from dmesh import
scaling`` and ``import dmesh.debug`` work as before.
"""

import importlib as _importlib
import os as _os
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from dmesh import fft, random
from dmesh.block_maps import map_blocks, map_overlap
from dmesh.collectives import tracing
from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    CollectiveMismatchError,
    DMeshError,
)
from dmesh.context import implicit_replication
from dmesh.convert import distribute, from_local
from dmesh.core.abstract_mesh import AbstractMesh
from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.creation import (
    arange,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from dmesh.creation_grids import fromfunction, indices, meshgrid, tri
from dmesh.darray import DArray, redistribute
from dmesh.fft_freq import fftfreq, rfftfreq
from dmesh.halo import HaloExchange, halo
from dmesh.mesh import DeviceMesh, init_mesh
from dmesh.triangles import tril_indices, triu_indices
from dmesh.windows import bartlett, blackman, hamming, hanning, kaiser

# isort: split
# Last, once dmesh is complete: ops registers its rules and installs the
# dispatch hook (dmesh/_hooks.py). The one upward import: the package's own
# __init__ sits outside the layers of the import-linter contract.
from dmesh import array_api, ops
from dmesh._abort import install as _install_abort_hook
from dmesh.ops.compiler import PlanMismatchError, compile
from dmesh.ops.kernels.solvers import gather_threshold as linalg_gather_threshold
from dmesh.ops.kernels.solvers import set_gather_threshold as set_linalg_gather_threshold

if _TYPE_CHECKING:  # (for type checkers: these names are loaded on first use, below)
    from dmesh import debug, scaling
    from dmesh import io as io  # (not in __all__: its names are)
    from dmesh.debug.block_table import visualize
    from dmesh.io.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
    from dmesh.io.npy import load, save

# Name -> (module, attribute of it, or None for the module itself), imported on the
# first access of the name. None of them runs in an ordinary program: scaling is a
# cost model for planning runs, debug tools watch a run, io is called by name. Eager,
# they cost about 40 ms of ``import dmesh`` (a fresh interpreter on the 2-core dev
# machine, median of 10: 579 ms, 535 ms lazy); io alone pulls in importlib.metadata.
_LAZY: dict[str, tuple[str, str | None]] = {
    "debug": ("dmesh.debug", None),
    "io": ("dmesh.io", None),
    "scaling": ("dmesh.scaling", None),
    "visualize": ("dmesh.debug.block_table", "visualize"),
    "CheckpointError": ("dmesh.io.checkpoint", "CheckpointError"),
    "load_checkpoint": ("dmesh.io.checkpoint", "load_checkpoint"),
    "save_checkpoint": ("dmesh.io.checkpoint", "save_checkpoint"),
    "load": ("dmesh.io.npy", "load"),
    "save": ("dmesh.io.npy", "save"),
}


def __getattr__(name: str) -> _Any:
    """A name of ``_LAZY``, imported now and kept (PEP 562); called only for missing names."""
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'dmesh' has no attribute {name!r}") from None
    value = _importlib.import_module(module)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


_install_abort_hook()  # an uncaught exception on any rank aborts the job
# Debug tools report the first caller outside dmesh and ops (collectives/tracing.py).
tracing.add_library_path(_os.path.dirname(__file__))
tracing.add_library_path(_os.path.dirname(ops.__file__))

__all__ = [  # noqa: RUF022  (issue 14, creation: grids, windows, DFT frequencies)
    "array_api",
    "bartlett",
    "blackman",
    "fft",
    "fftfreq",
    "fromfunction",
    "hamming",
    "hanning",
    "indices",
    "kaiser",
    "linalg_gather_threshold",
    "set_linalg_gather_threshold",
    "meshgrid",
    "rfftfreq",
    "tri",
    "AbstractMesh",
    "ArgumentError",
    "ArgumentTypeError",
    "CheckpointError",
    "PlanMismatchError",
    "CollectiveMismatchError",
    "DArray",
    "DArraySpec",
    "DMeshError",
    "DeviceMesh",
    "HaloExchange",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "arange",
    "compile",
    "debug",
    "distribute",
    "empty",
    "empty_like",
    "eye",
    "from_local",
    "full",
    "full_like",
    "halo",
    "implicit_replication",
    "init_mesh",
    "linspace",
    "load",
    "load_checkpoint",
    "map_blocks",
    "map_overlap",
    "ones",
    "ones_like",
    "random",
    "redistribute",
    "save",
    "scaling",
    "save_checkpoint",
    "tril_indices",
    "triu_indices",
    "visualize",
    "zeros",
    "zeros_like",
]
