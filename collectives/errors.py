"""The exception hierarchy shared by ``collectives``, ``dmesh`` and ``ops``.

It lives in the lowest layer so every package can raise it without an upward
import; ``dmesh`` re-exports it as the public home.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import numpy as np

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "AxisArgumentError",
    "CollectiveMismatchError",
    "DMeshError",
    "ShardingError",
    "UnsupportedError",
    "suggest",
]


class DMeshError(Exception):
    """Base class of every error dmesh raises on purpose."""


class ArgumentError(DMeshError, ValueError):
    """An argument has a value that is not allowed (also a ``ValueError``)."""


class ArgumentTypeError(DMeshError, TypeError):
    """An argument has a type that is not allowed (also a ``TypeError``)."""


class AxisArgumentError(ArgumentError, np.exceptions.AxisError):
    """An axis out of range: NumPy's ``AxisError`` (so also ``ValueError`` and ``IndexError``).

    Constructed as NumPy's: ``AxisArgumentError(axis, ndim, msg_prefix)`` gives its message.
    """


class ShardingError(DMeshError, ValueError):
    """Arrays whose layouts cannot be combined as asked (also a ``ValueError``)."""


class UnsupportedError(DMeshError, NotImplementedError):
    """An op or a placement dmesh does not support (also a ``NotImplementedError``)."""


class CollectiveMismatchError(DMeshError, RuntimeError):
    """The ranks of a communicator called diverging collectives."""


def suggest(name: str, allowed: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for a close match of ``name``, else ``""``."""
    matches = difflib.get_close_matches(name, list(allowed), n=1)
    return f" (did you mean {matches[0]!r}?)" if matches else ""
