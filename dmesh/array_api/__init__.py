"""The Array API standard's namespace for DArrays (revision 2024.12).

Code written against the standard asks an array for its namespace and calls
only that: ``xp = x.__array_namespace__()`` (or ``array_api_compat``'s
``array_namespace(x)``) gives this module for a DArray, and ``xp.mean(x)``,
``xp.linalg.matrix_norm(x)``... run distributed, by the same rules as the
NumPy calls they map to. The standard's *device* is the placement: a
:class:`Sharding` (a mesh and its placements). Creation functions take one as
``device=`` (default: a 1-D mesh over ``MPI.COMM_WORLD`` with ``Shard(0)``, 0-d
arrays replicated), ``x.device`` returns one and ``x.to_device(s)``
redistributes. Every call is collective, as every DArray call is.

The functions live in one module per group of the standard (creation,
elementwise, statistics...); this module gathers their names.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from dmesh import _hooks
from dmesh.array_api import (  # noqa: F401  (fft, linalg: the extensions, by name)
    creation,
    data_types,
    elementwise,
    fft,
    indexing,
    info,
    linalg,
    linear_algebra,
    manipulation,
    searching,
    statistics,
    utility,
)
from dmesh.darray_array_api import Sharding  # noqa: F401  (in __all__)

__array_api_version__ = "2024.12"

e = math.e
inf = math.inf
nan = math.nan
newaxis = None
pi = math.pi

_GROUPS = (
    creation, data_types, elementwise, indexing, info, linear_algebra,
    manipulation, searching, statistics, utility,
)  # fmt: skip
_names: dict[str, Any] = {name: getattr(group, name) for group in _GROUPS for name in group.__all__}
globals().update(_names)

__all__ = sorted(
    {*_names, "__array_api_version__", "e", "inf", "nan", "newaxis", "pi", "fft", "linalg"}
    | {"Sharding"}
)

_hooks.array_namespace = sys.modules[__name__]
