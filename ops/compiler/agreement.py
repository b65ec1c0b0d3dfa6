"""Plan agreement: the ranks of a mesh compare their traced plans in one collective.

Each rank hashes the descriptions of its nodes (callable, operand slots and
constants, layouts, shapes, dtypes, block bounds, and a graph break's reason)
into an 8-byte digest; one ``Allgather`` of the digests tells every rank
whether all traced the same program. Only when they differ are the
descriptions themselves exchanged, to name the first op where the plans part
and what each rank traced there, in one :class:`PlanMismatchError` raised on
every rank. Tracing sends no message, so a rank-dependent branch is caught
here, before any rank waits in a collective the others never make.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from dmesh.collectives import tracing
from dmesh.ops.compiler.errors import PlanMismatchError

__all__ = ["agree", "digest"]


def digest(lines: list[str]) -> bytes:
    """An 8-byte fingerprint of a plan's node descriptions."""
    h = hashlib.blake2b(digest_size=8)
    for line in lines:
        h.update(line.encode())
        h.update(b"\n")
    return h.digest()


def agree(comm: Any, lines: list[str], name: str) -> None:
    """Return when every rank of ``comm`` traced ``lines``; else raise on every rank. Collective."""
    mine = np.frombuffer(digest(lines), np.uint8).copy()
    every = np.empty(comm.Get_size() * mine.size, np.uint8)
    if tracing.hooked:
        tracing.direct("all_gather", comm, mine.nbytes, every.nbytes)
    comm.Allgather(mine, every)
    digests = every.reshape(comm.Get_size(), mine.size)
    if (digests == digests[0]).all():
        return
    plans: list[list[str]] = comm.allgather(lines)  # the error path only
    raise PlanMismatchError(_message(plans, name))


def _message(plans: list[list[str]], name: str) -> str:
    """The first step where the ranks' plans differ, and what each rank traced there."""
    longest = max(len(p) for p in plans)
    first = next(
        k
        for k in range(longest + 1)
        if len({p[k] if k < len(p) else "<end of the plan>" for p in plans}) > 1
    )
    seen = "; ".join(
        f"rank {r}: {p[first] if first < len(p) else '<end of the plan>'}"
        for r, p in enumerate(plans)
    )
    return (
        f"compile({name}): the ranks traced different plans (rank-dependent control flow, "
        f"shapes or constants?); they first differ at op {first}: {seen}"
    )
