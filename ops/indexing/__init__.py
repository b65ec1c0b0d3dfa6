"""Indexing DArrays: ``a[key]`` and ``a[key] = value``.

:mod:`~dmesh.ops.indexing.basic` handles slices, ints, ``None``, ``...`` and
bool masks (views of the blocks, no communication);
:mod:`~dmesh.ops.indexing.fancy` handles integer arrays by request and
response (two all-to-alls, nothing gathered). :func:`install` connects
``DArray.__getitem__``/``__setitem__`` to them through ``dmesh._hooks``.
"""

from __future__ import annotations

from dmesh import _hooks
from dmesh.ops.indexing import (
    assign,
    basic,
    choices,
    fancy,
    masks,
    multi_index,
    plans,
    views,
    writes,
)


def install() -> None:
    """Route ``DArray.__getitem__`` and ``__setitem__`` here (``dmesh._hooks``)."""
    _hooks.getitem = plans.getitem
    _hooks.setitem = assign.setitem


__all__ = [
    "assign", "basic", "choices", "fancy", "install", "masks", "multi_index", "plans", "views",
    "writes",
]  # fmt: skip
