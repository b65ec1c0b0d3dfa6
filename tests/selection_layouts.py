"""Layouts the selection tests run on: replicated, each dim sharded, both mesh dims of a
(2, 2) mesh, uneven blocks (a slice of a sharded array) and empty blocks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import dmesh
from dmesh import Replicate, Shard


def placements(mesh: dmesh.DeviceMesh, ndim: int) -> list[list[Any]]:
    """Replicate, Shard(d) of each dim on the first mesh dim, and on a (2, 2) mesh both."""
    rest = [Replicate()] * (mesh.ndim - 1)
    out = [[Replicate(), *rest]] + [[Shard(d), *rest] for d in range(ndim)]
    if mesh.ndim == 2:
        out += [[Replicate(), Shard(0)]]
        out += [[Shard(0), Shard(ndim - 1)], [Shard(ndim - 1), Shard(0)]] if ndim > 1 else []
        out += [[Shard(0), Shard(0)]]
    return out


def variants(mesh: dmesh.DeviceMesh, x: np.ndarray) -> Iterator[tuple[str, Callable[[], Any]]]:
    """(label, maker of a fresh DArray holding ``x``) over the layouts above, then uneven
    blocks: ``x`` as the tail of a sharded array twice as long (the first blocks empty)."""
    for p in placements(mesh, x.ndim):
        yield str(p), lambda p=p: dmesh.distribute(x, mesh, p)
    if x.ndim:
        n = len(x)
        rest = [Shard(x.ndim - 1) if x.ndim > 1 else Replicate()] * (mesh.ndim - 1)

        def tail() -> Any:
            return dmesh.distribute(np.concatenate([x, x]), mesh, [Shard(0), *rest])[n:]

        def head() -> Any:
            return dmesh.distribute(np.concatenate([x, x]), mesh, [Shard(0), *rest])[:n]

        yield "uneven tail", tail
        yield "uneven head", head


def full(value: Any) -> Any:
    """A DArray gathered (collective), a tuple item by item, anything else as it is."""
    if isinstance(value, tuple):
        return tuple(full(v) for v in value)
    return np.asarray(value.full_array()) if isinstance(value, dmesh.DArray) else value


def same(got: Any, want: Any) -> bool:
    """Equal shapes, dtypes and values (NaN equal to NaN, the sign of zero compared)."""
    if isinstance(want, tuple):
        return (
            isinstance(got, tuple)
            and len(got) == len(want)
            and all(same(g, w) for g, w in zip(got, want))
        )
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype.kind in "fc":
        signs = np.array_equal(np.signbit(got.real), np.signbit(want.real))
        return bool(np.array_equal(got, want, equal_nan=True) and signs)
    return bool(np.array_equal(got, want))
