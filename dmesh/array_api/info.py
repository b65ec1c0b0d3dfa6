"""The inspection API of the Array API standard (2024.12): ``__array_namespace_info__()``."""

from __future__ import annotations

from typing import Any

import numpy as np

from dmesh.array_api.creation import default_device
from dmesh.array_api.data_types import DTYPES, KINDS
from dmesh.darray_array_api import Sharding

__all__ = ["__array_namespace_info__"]


class Info:
    """What ``dmesh.array_api`` supports: capabilities, devices (Shardings), dtypes."""

    __module__ = "dmesh.array_api"

    def capabilities(self) -> dict[str, Any]:
        """Boolean indexing and data-dependent shapes (masks, ``unique_*``, ``nonzero``) work."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> Sharding:
        """``Shard(0)`` on a 1-D mesh over ``MPI.COMM_WORLD`` (collective at first use)."""
        return default_device()

    def devices(self) -> list[Sharding]:
        """The default Sharding; any ``Sharding(mesh, placements)`` is a device too."""
        return [default_device()]

    def default_dtypes(self, *, device: Sharding | None = None) -> dict[str, type[np.generic]]:
        """float64, complex128, int64 and int64 for indexing, on every device."""
        _check_device(device, "default_dtypes")
        return {
            "real floating": np.float64,
            "complex floating": np.complex128,
            "integral": np.int64,
            "indexing": np.int64,
        }

    def dtypes(
        self, *, device: Sharding | None = None, kind: str | tuple[str, ...] | None = None
    ) -> dict[str, type[np.generic]]:
        """The supported dtypes by name, those of ``kind`` (a kind name or a tuple) if given."""
        _check_device(device, "dtypes")
        if kind is None:
            chosen = DTYPES
        else:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            for k in kinds:
                if not isinstance(k, str) or k not in KINDS:
                    raise ValueError(
                        f"dtypes: unknown kind {k!r}; expected one of {', '.join(map(repr, KINDS))}"
                    )
            chosen = tuple(d for d in DTYPES if any(d in KINDS[k] for k in kinds))
        return {"bool" if d == np.bool_ else d.name: d.type for d in chosen}


def _check_device(device: Any, function: str) -> None:
    if device is not None and not isinstance(device, Sharding):
        raise TypeError(
            f"{function}: device must be a dmesh.array_api.Sharding or None, "
            f"got {type(device).__name__}"
        )


def __array_namespace_info__() -> Info:  # noqa: N807 (the standard's name)
    """The inspection object of the namespace."""
    return Info()
