"""Consistency-suite samples of the issue-14 ops in this area (merged into tests/samples.py).

``SAMPLES`` and ``HOSTILE`` map a registry or decomposition key to (args, kwargs)
calls with NumPy arrays, as in tests/samples.py.
"""

from __future__ import annotations

from typing import Any

Sample = tuple[tuple[Any, ...], dict[str, Any]]

SAMPLES: dict[Any, list[Sample]] = {}
HOSTILE: dict[Any, list[Sample]] = {}
