"""Watching collective calls: the one hook the debug tools share.

Every public collective begins with ``if tracing.hooked and not tracing.depth:``
and, when that holds, runs through :func:`observe` with its ``locals()``. ``hooked`` is False
unless something watches (a recorder such as ``dmesh.debug.CommMode``,
checking mode, the hang watchdog), so an unwatched call pays one attribute
read. Nested collectives (a header exchange inside ``all_gather``) are not
observed again: ``depth`` counts the observed calls in progress.

:func:`observe` does, in order, what is switched on:

* **checking** (``DMESH_CHECK=1`` or ``dmesh.debug.checking()``): the ranks of
  the communicator exchange a digest of (collective, dtype, the shape the
  ranks must agree on, group size, caller); if they differ, every rank
  gathers the descriptions and raises :class:`CollectiveMismatchError`
  naming what each rank called, instead of pairing mismatched MPI calls.
* **the hang watchdog** (``DMESH_HANG_TIMEOUT=seconds``, ``collectives/_watchdog.py``):
  a daemon thread that, when one collective has been blocked longer than
  that, prints which collective and call site this rank is in and aborts.
* **recorders**: after the call, each gets a :class:`CollectiveRecord`.

What a call is (its description, fingerprint and the agreement check) lives
in ``collectives/_calls.py``; this module keeps the switches and the state.

Higher layers add context without importing upward: ``dmesh`` names mesh
communicators (:func:`name_group`) and registers its package folders
(:func:`add_library_path`) so that the caller is found outside them
(``collectives/_callsite.py``); ``ops``
opens an :func:`op_scope` around each NumPy call on DArrays, swapping its
dispatch hooks through :func:`on_hook_change` so the unwatched path carries
no check at all.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from mpi4py import MPI

from dmesh.collectives import _calls
from dmesh.collectives import _watchdog as _watchdog_module
from dmesh.collectives._calls import (
    Call,
    check_agreement,
    describe,
    forget_group,
    group_name,
    name_group,
    nbytes,
    sent_bytes,
    text_of,
)
from dmesh.collectives._callsite import add_library_path, find_caller
from dmesh.collectives.errors import ArgumentError

__all__ = [
    "CollectiveRecord",
    "OpScope",
    "Recorder",
    "add_library_path",
    "add_recorder",
    "checking_enabled",
    "direct",
    "emit",
    "forget_group",
    "hooked",
    "in_op_scope",
    "name_group",
    "observe",
    "observe_list",
    "on_hook_change",
    "op_scope",
    "record_direct",
    "remove_recorder",
    "set_checking",
    "wait_all",
]

# Read on every collective call: keep them plain module globals.
hooked = False
depth = 0


@dataclass(frozen=True)
class CollectiveRecord:
    """One observed collective call on this rank."""

    collective: str  # "all_gather", ...
    op: str  # the user-level call that caused it: "np.matmul", "DArray.redistribute", ...
    group: str  # "mesh dim 0 ('x')", "COMM_WORLD", ...
    group_size: int
    mesh_dim: int | None  # the mesh dim whose communicator it ran on, if one
    sent_bytes: int  # this rank's input buffers
    received_bytes: int  # this rank's result buffers
    shape: tuple[int, ...] | None  # this rank's input shape (None: no input, e.g. broadcast)
    dtype: str | None
    site: str  # "file.py:12 in main": the first frame outside dmesh's packages
    async_op: bool = False


@dataclass
class OpScope:
    """A user-level call in progress (a NumPy call on DArrays), with what happened inside."""

    label: str
    inputs: tuple[Any, ...]
    events: list[tuple[str, Any]] = field(default_factory=list)
    result: Any = None


class Recorder(Protocol):
    """What :func:`add_recorder` accepts: it is told of collectives, ops and events."""

    def collective(self, record: CollectiveRecord) -> None:
        """Called once per completed collective (not for collectives nested in another)."""

    def op(self, scope: OpScope) -> None:
        """Called when an op scope (a NumPy call or a dmesh call) closes."""

    def event(self, kind: str, info: Any) -> None:
        """Called for other happenings a tool may report (a redistribution plan, say)."""


_recorders: list[Recorder] = []
_scopes: list[OpScope] = []
_checking = 0  # > 0: checking mode on (nested enables count)
_hook_listeners: list[Callable[[bool], None]] = []


# -- switching on and off ----------------------------------------------------------
def _update_hooked() -> None:
    global hooked
    now = bool(_recorders) or _checking > 0 or _watchdog is not None
    if now != hooked:
        hooked = now
        for listener in _hook_listeners:
            listener(now)


def on_hook_change(listener: Callable[[bool], None]) -> None:
    """Call ``listener(hooked)`` now and whenever watching starts or stops."""
    _hook_listeners.append(listener)
    listener(hooked)


def add_recorder(recorder: Recorder) -> None:
    """Start telling ``recorder`` of collectives, ops and events (this rank only)."""
    _recorders.append(recorder)
    _update_hooked()


def remove_recorder(recorder: Recorder) -> None:
    """Stop telling ``recorder``."""
    _recorders.remove(recorder)
    _update_hooked()


def set_checking(enabled: bool) -> None:
    """Turn checking mode on (nests: each ``True`` needs its ``False``)."""
    global _checking
    _checking = _checking + 1 if enabled else max(_checking - 1, 0)
    _update_hooked()


def checking_enabled() -> bool:
    """Whether collectives are checked for agreement before they run."""
    return _checking > 0


# -- op scopes and events -------------------------------------------------------------
@contextmanager
def op_scope(label: str, inputs: tuple[Any, ...]) -> Iterator[OpScope]:
    """Mark a user-level call: collectives and events inside are attributed to it.

    Only the outermost scope is reported (a NumPy call made inside another's
    implementation belongs to the outer one).
    """
    scope = OpScope(label, inputs)
    _scopes.append(scope)
    try:
        yield scope
    finally:
        _scopes.pop()
        if not _scopes:
            for recorder in list(_recorders):
                recorder.op(scope)


def in_op_scope() -> bool:
    """Whether a user-level op is in progress (its events are reported with it)."""
    return bool(_scopes)


def emit(kind: str, info: Any) -> None:
    """Report an event (a redistribution) to the open scope and to the recorders."""
    if _scopes:
        _scopes[0].events.append((kind, info))
    for recorder in list(_recorders):
        recorder.event(kind, info)


def _read_check() -> int:
    text = os.environ.get("DMESH_CHECK", "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return 0
    if text in ("1", "true", "yes", "on"):
        return 1
    raise ArgumentError(f"DMESH_CHECK={text!r}: expected 1 (check collectives) or 0 (do not)")


_watchdog = _watchdog_module.from_environment()
_checking = _read_check()
_update_hooked()


# -- the observed call -------------------------------------------------------------------------
def observe(name: str, fn: Any, arguments: dict[str, Any]) -> Any:
    """Run the collective ``fn(**arguments)`` with checking, watchdog and recorders.

    Called by each public collective with its ``locals()`` (its parameters,
    at the top of the function) while a tool watches.
    """
    global depth
    kwargs = dict(arguments)
    if name == "permute" and not isinstance(kwargs.get("pairs"), (list, tuple)):
        with contextlib.suppress(TypeError):  # not iterable: the call says so
            kwargs["pairs"] = list(kwargs["pairs"])  # an iterator is read twice
    call = describe(name, fn, kwargs)
    if call is None:  # invalid arguments: let the call raise its own error
        depth += 1
        try:
            return fn(**kwargs)
        finally:
            depth -= 1
    if _checking > 0:
        check_agreement(call)
    watchdog = _watchdog
    if watchdog is not None:
        watchdog.current = (text_of(call), time.monotonic())
    depth += 1
    try:
        result = fn(**kwargs)
    finally:
        depth -= 1
        if watchdog is not None:
            watchdog.current = None
    if watchdog is not None:
        watchdog.last = text_of(call)
    if _recorders:
        _record(call, sent_bytes(name, kwargs, call.comm), nbytes(result))
    return result


def observe_list(name: str, fn: Any, arguments: dict[str, Any]) -> list[Any]:
    """:func:`observe` of a coalesced collective (its result is a list)."""
    result: list[Any] = observe(name, fn, arguments)
    return result


def direct(
    name: str, comm: MPI.Comm, sent: int = 0, received: int = 0, *, record: bool = True
) -> _calls.Call | None:
    """Check and record a collective that dmesh makes through mpi4py itself.

    Called just before the MPI call, when ``hooked`` (checkpoint and
    ``.npy`` agreement messages, MPI-IO reads and writes). The hang watchdog
    does not see these calls. ``record=False`` checks only and returns the
    call, for :func:`record_direct` once the bytes are known (a broadcast's
    receivers learn its length from its first message).
    """
    if depth:
        return None
    call = _direct_call(name, comm)
    if _checking > 0:
        check_agreement(call)
    if _recorders and record:
        _record(call, sent, received)
    return call


def record_direct(call: _calls.Call | None, sent: int, received: int) -> None:
    """Record a call :func:`direct` checked with ``record=False`` (nothing if it returned None)."""
    if call is not None and _recorders:
        _record(call, sent, received)


def _direct_call(name: str, comm: MPI.Comm) -> Call:
    site, caller, library = find_caller()
    group, mesh_dim = group_name(comm)
    fingerprint = repr((name, None, None, comm.Get_size(), caller))
    return Call(name, comm, group, mesh_dim, None, None, fingerprint, site, library, False)


def _record(call: Call, sent: int, received: int) -> None:
    op = _scopes[0].label if _scopes else call.library or f"dmesh.collectives.{call.name}"
    record = CollectiveRecord(
        collective=call.name,
        op=op,
        group=call.group,
        group_size=call.comm.Get_size(),
        mesh_dim=call.mesh_dim,
        sent_bytes=sent,
        received_bytes=received,
        shape=call.shapes[0] if call.shapes else None,
        dtype=call.dtype,
        site=call.site,
        async_op=call.async_op,
    )
    if _scopes:
        _scopes[0].events.append(("collective", record))
    for recorder in list(_recorders):
        recorder.collective(record)


def wait_all(requests: list[MPI.Request]) -> None:
    """``MPI.Request.Waitall(requests)``, watched by the hang watchdog when it runs."""
    watchdog = _watchdog
    if watchdog is None:
        MPI.Request.Waitall(requests)
        return
    text = f"the wait for an async collective (AsyncArray) at {find_caller()[0]}"
    watchdog.current = (text, time.monotonic())
    try:
        MPI.Request.Waitall(requests)
    finally:
        watchdog.current = None
