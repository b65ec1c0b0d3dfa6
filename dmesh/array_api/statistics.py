"""Statistical functions of the Array API standard (2024.12) on DArrays."""

from __future__ import annotations

__all__: list[str] = []
