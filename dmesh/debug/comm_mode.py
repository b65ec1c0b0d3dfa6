"""``CommMode``: record the collectives a block of code makes on this rank."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from types import TracebackType
from typing import Any

from mpi4py import MPI

from dmesh.collectives import tracing
from dmesh.collectives.errors import ArgumentError, DMeshError
from dmesh.collectives.tracing import CollectiveRecord, OpScope

__all__ = ["CollectiveRecord", "CommMode", "format_bytes", "format_table"]

_GROUPINGS = ("collective", "op", "group", "op_collective")


class CommMode:
    """A context manager that records every collective this rank makes inside it.

    Each record (:class:`CollectiveRecord`) holds the collective, the bytes
    of this rank's input and result, the group (which mesh dim), and the op
    that caused it: the NumPy call on DArrays (``np.matmul``), or the dmesh
    call made outside NumPy (``DArray.redistribute``, ``halo``), or
    ``dmesh.collectives.<name>`` for a direct call. Collectives made inside another
    collective (header exchanges) are part of it, not separate records.

    Modes nest: an inner block's collectives are recorded by both. Entering
    one changes nothing that is communicated, so ranks need not agree on
    using it. While none is active, nothing is recorded and nothing is paid.

    Example::

        with dmesh.debug.CommMode() as comm:
            b = a.redistribute(mesh, [Replicate()])
        print(comm.summary())
        comm.counts()                     # {"all_gather": 1}
        comm.to_json("build/comm.json")   # this rank's records
    """

    def __init__(self) -> None:
        self.records: list[CollectiveRecord] = []
        self._active = False

    def __enter__(self) -> CommMode:
        if self._active:
            raise DMeshError("CommMode: this mode is already active; nest a new CommMode()")
        self._active = True
        tracing.add_recorder(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        tracing.remove_recorder(self)
        self._active = False

    # The recorder protocol (dmesh.collectives.tracing).
    def collective(self, record: CollectiveRecord) -> None:
        """Take one record (called by the collectives while this mode is active)."""
        self.records.append(record)

    def op(self, scope: OpScope) -> None:
        """An op finished (not used here: each record names its op)."""

    def event(self, kind: str, info: Any) -> None:
        """A redistribution or other event (not used here)."""

    # Results.
    def counts(self, by: str = "collective") -> dict[Any, int]:
        """Number of collectives, by ``"collective"`` name, ``"op"``, ``"group"`` or
        ``"op_collective"`` (keys ``(op, collective)``)."""
        _check_grouping(by)  # also when nothing was recorded
        return dict(Counter(_key(r, by) for r in self.records))

    def bytes(self, by: str = "collective") -> dict[Any, tuple[int, int]]:
        """(sent, received) bytes of this rank, grouped as in :meth:`counts`."""
        _check_grouping(by)
        totals: dict[Any, tuple[int, int]] = {}
        for r in self.records:
            key = _key(r, by)
            sent, received = totals.get(key, (0, 0))
            totals[key] = (sent + r.sent_bytes, received + r.received_bytes)
        return totals

    @property
    def total_count(self) -> int:
        """Number of collectives recorded."""
        return len(self.records)

    def summary(self) -> str:
        """A table of this rank's collectives by op, collective and group, with a total."""
        groups: dict[tuple[str, str, str], list[int]] = {}
        for r in self.records:
            row = groups.setdefault((r.op, r.collective, r.group), [0, 0, 0])
            row[0] += 1
            row[1] += r.sent_bytes
            row[2] += r.received_bytes
        rows = [
            [op, collective, group, str(n), format_bytes(sent), format_bytes(received)]
            for (op, collective, group), (n, sent, received) in groups.items()
        ]
        sent = sum(r.sent_bytes for r in self.records)
        received = sum(r.received_bytes for r in self.records)
        total = [
            "total",
            "",
            "",
            str(len(self.records)),
            format_bytes(sent),
            format_bytes(received),
        ]
        rank = MPI.COMM_WORLD.Get_rank()
        title = f"collectives on world rank {rank}: {len(self.records)}"
        header = ["op", "collective", "group", "calls", "sent", "received"]
        return title + "\n" + format_table(header, [*rows, total], numeric=(3, 4, 5))

    def to_json(self, path: str | None = None) -> str:
        """This rank's records as JSON text (also written to ``path`` if given)."""
        text = json.dumps(
            {
                "world_rank": MPI.COMM_WORLD.Get_rank(),
                "counts": self.counts(),
                "records": [asdict(r) for r in self.records],
            },
            indent=1,
        )
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        return text


def _check_grouping(by: str) -> None:
    if by not in _GROUPINGS:
        raise ArgumentError(f"by={by!r}: expected one of {', '.join(map(repr, _GROUPINGS))}")


def _key(record: CollectiveRecord, by: str) -> Any:
    if by == "collective":
        return record.collective
    if by == "op":
        return record.op
    if by == "group":
        return record.group
    if by == "op_collective":
        return (record.op, record.collective)
    raise ArgumentError(f"by={by!r}: expected one of {', '.join(map(repr, _GROUPINGS))}")


def format_bytes(n: float) -> str:
    """``1.5 MiB``: a byte count for people."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def format_table(header: list[str], rows: list[list[str]], numeric: tuple[int, ...] = ()) -> str:
    """A plain-text table; the ``numeric`` columns are right-aligned."""
    table = [header, *rows]
    widths = [max(len(row[j]) for row in table) for j in range(len(header))]

    def line(row: list[str]) -> str:
        cells = [
            s.rjust(w) if j in numeric else s.ljust(w) for j, (s, w) in enumerate(zip(row, widths))
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])
