"""Creation functions of the Array API standard (2024.12): DArrays on a ``device=`` Sharding."""

from __future__ import annotations

__all__: list[str] = []
