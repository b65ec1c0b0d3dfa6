"""Data types and data type functions of the Array API standard (2024.12)."""

from __future__ import annotations

__all__: list[str] = []
