"""Linear algebra functions of the Array API standard's main namespace (2024.12)."""

from __future__ import annotations

__all__: list[str] = []
