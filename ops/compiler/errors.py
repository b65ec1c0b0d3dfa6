"""The compiler's errors: a plan the ranks disagree on, and a graph break while tracing."""

from __future__ import annotations

from dmesh.collectives.errors import DMeshError

__all__ = ["GraphBreak", "PlanMismatchError", "ReplayError"]


class PlanMismatchError(DMeshError, RuntimeError):
    """The ranks of a mesh traced different plans for one compiled call (raised on every rank).

    Rank-dependent control flow (``if mesh.rank == 0: ...``), shapes or
    constants make ranks trace different programs; replaying them would
    deadlock or mix blocks of different ops, so no rank runs its plan.
    """


class ReplayError(DMeshError, RuntimeError):
    """A replayed op gave a block of another dtype than tracing predicted (raised on every rank)."""


class GraphBreak(BaseException):
    """Something the tracer cannot record (a value read, a communicating decomposition...).

    A ``BaseException``, so that the traced function's own ``except Exception:``
    cannot swallow it; the tracer also remembers the first break it raised, so a
    swallowed one still breaks the graph.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
