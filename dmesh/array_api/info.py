"""The inspection API of the Array API standard (2024.12): ``__array_namespace_info__()``."""

from __future__ import annotations

__all__: list[str] = []
