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
import hashlib
import inspect
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from mpi4py import MPI

from dmesh.collectives import _watchdog as _watchdog_module
from dmesh.collectives._callsite import add_library_path, find_caller
from dmesh.collectives.errors import ArgumentError, CollectiveMismatchError, DMeshError
from dmesh.collectives.group import resolve_group

__all__ = [
    "CollectiveRecord",
    "OpScope",
    "Recorder",
    "add_library_path",
    "add_recorder",
    "checking_enabled",
    "direct",
    "emit",
    "hooked",
    "in_op_scope",
    "name_group",
    "observe",
    "observe_list",
    "on_hook_change",
    "op_scope",
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
_group_names: dict[int, tuple[str, int | None]] = {}


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


def name_group(comm: MPI.Comm, name: str, mesh_dim: int | None = None) -> None:
    """Give ``comm`` a name for records and reports (a mesh dim's communicator)."""
    if comm != MPI.COMM_NULL:
        _group_names[comm.py2f()] = (name, mesh_dim)


def forget_group(comm: MPI.Comm) -> None:
    """Drop ``comm``'s name (before it is freed: handles are reused)."""
    if comm != MPI.COMM_NULL:
        _group_names.pop(comm.py2f(), None)


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


# -- what a call is ------------------------------------------------------------------------
# collective -> the name of the argument that is its group, and which input dims
# may differ between ranks ("all": any; or the names of axis arguments).
_FREE_DIMS: dict[str, tuple[str, ...]] = {
    "all_reduce": (),
    "reduce_scatter": (),
    "all_reduce_coalesced": (),
    "reduce_scatter_coalesced": (),
    "all_gather": ("axis",),
    "all_gather_coalesced": ("axis",),
    "gather": ("axis",),
    "all_to_all": ("split_axis", "concat_axis"),
    "permute": ("all",),
    "broadcast": ("all", "dtype"),  # only the source's input is read
    "scatter": ("all", "dtype"),
}
_signatures: dict[Any, inspect.Signature] = {}


@dataclass(frozen=True)
class _Call:
    name: str
    comm: MPI.Comm
    group: str
    mesh_dim: int | None
    shapes: tuple[tuple[int, ...], ...] | None
    dtype: str | None
    fingerprint: str
    site: str
    library: str
    async_op: bool


def _describe(name: str, fn: Any, kwargs: dict[str, Any]) -> _Call | None:
    """What this call is, or None when its arguments are invalid (the call itself says why)."""
    signature = _signatures.get(fn)
    if signature is None:
        signature = _signatures[fn] = inspect.signature(fn)
    try:
        bound = signature.bind(**kwargs)
        bound.apply_defaults()
        comm = resolve_group(bound.arguments.get("group"))
    except (TypeError, DMeshError):
        return None
    values = bound.arguments
    inputs = values.get("xs", None) if "xs" in values else [values.get("x")]
    arrays: list[Any] = [x for x in (inputs or []) if hasattr(x, "shape") and hasattr(x, "dtype")]
    shapes = tuple(tuple(int(s) for s in x.shape) for x in arrays) if arrays else None
    dtype = str(arrays[0].dtype) if arrays else None
    free = _FREE_DIMS.get(name, ("all",))
    agreed_shapes: Any = None if "all" in free else shapes
    if agreed_shapes is not None and free:
        axes = {int(values[a]) for a in free if isinstance(values.get(a), int)}
        agreed_shapes = tuple(
            tuple(-1 if i in axes or i - len(s) in axes else n for i, n in enumerate(s))
            for s in agreed_shapes
        )
    agreed_dtype = None if "dtype" in free else dtype
    site, caller, library = find_caller()
    group, mesh_dim = _group_names.get(comm.py2f(), (None, None))
    if group is None:
        group = "COMM_WORLD" if comm == MPI.COMM_WORLD else "a communicator"
    fingerprint = repr((name, agreed_dtype, agreed_shapes, comm.Get_size(), caller))
    return _Call(
        name,
        comm,
        group,
        mesh_dim,
        shapes,
        dtype,
        fingerprint,
        site,
        library,
        bool(values.get("async_op", False)),
    )


def _text(call: _Call) -> str:
    shapes = "" if call.shapes is None else ", ".join(f"{call.dtype}{list(s)}" for s in call.shapes)
    return f"{call.name}({shapes}) on {call.group} at {call.site}"


def _nbytes(value: Any) -> int:
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    if value is None or not hasattr(value, "shape"):
        return 0
    return int(np.prod(value.shape, dtype=np.int64)) * int(np.dtype(value.dtype).itemsize)


# -- checking ---------------------------------------------------------------------------------
def _check(call: _Call) -> None:
    """Compare ``call`` across its communicator; raise on every rank if they differ."""
    comm = call.comm
    digest = hashlib.blake2b(call.fingerprint.encode(), digest_size=8).digest()
    mine = np.frombuffer(digest, dtype=np.int64).copy()
    every = np.empty(comm.Get_size(), dtype=np.int64)
    comm.Allgather([mine, MPI.INT64_T], [every, MPI.INT64_T])
    if (every == every[0]).all():
        return
    texts = comm.allgather(_text(call))  # every rank is here: the digests reached all
    lines = [f"  rank {r}: {t}" for r, t in enumerate(texts)]
    raise CollectiveMismatchError(
        f"the ranks of {call.group} ({comm.Get_size()} ranks) called different collectives "
        "(checking mode, DMESH_CHECK); without it they would hang or exchange wrong data:\n"
        + "\n".join(lines)
        + "\nEvery rank must make the same collective calls in the same order; look for "
        "a branch on the rank or on data that differs between ranks."
    )


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
    call = _describe(name, fn, kwargs)
    if call is None:  # invalid arguments: let the call raise its own error
        depth += 1
        try:
            return fn(**kwargs)
        finally:
            depth -= 1
    if _checking > 0:
        _check(call)
    watchdog = _watchdog
    if watchdog is not None:
        watchdog.current = (_text(call), time.monotonic())
    depth += 1
    try:
        result = fn(**kwargs)
    finally:
        depth -= 1
        if watchdog is not None:
            watchdog.current = None
    if watchdog is not None:
        watchdog.last = _text(call)
    if _recorders:
        _record(call, _sent_bytes(name, kwargs, call.comm), _nbytes(result))
    return result


def observe_list(name: str, fn: Any, arguments: dict[str, Any]) -> list[Any]:
    """:func:`observe` of a coalesced collective (its result is a list)."""
    result: list[Any] = observe(name, fn, arguments)
    return result


def direct(name: str, comm: MPI.Comm, sent: int = 0, received: int = 0) -> None:
    """Check and record a collective that dmesh makes through mpi4py itself.

    Called just before the MPI call, when :data:`hooked` (checkpoint and
    ``.npy`` agreement messages, MPI-IO reads and writes). The hang watchdog
    does not see these calls.
    """
    if depth:
        return
    site, caller, library = find_caller()
    group, mesh_dim = _group_names.get(comm.py2f(), (None, None))
    if group is None:
        group = "COMM_WORLD" if comm == MPI.COMM_WORLD else "a communicator"
    fingerprint = repr((name, None, None, comm.Get_size(), caller))
    call = _Call(name, comm, group, mesh_dim, None, None, fingerprint, site, library, False)
    if _checking > 0:
        _check(call)
    if _recorders:
        _record(call, sent, received)


def _sent_bytes(name: str, values: dict[str, Any], comm: MPI.Comm) -> int:
    """Bytes of this rank's input that the collective sends."""
    x = values.get("xs", values.get("x"))
    if name == "permute":  # only a rank that is a source sends
        rank = comm.Get_rank()
        try:
            sends = any(int(src) == rank for src, _ in values.get("pairs", ()))
        except (TypeError, ValueError):
            sends = False
        return _nbytes(x) if sends else 0
    if name in ("broadcast", "scatter"):  # only the source's input is read
        return _nbytes(x) if values.get("src", 0) == comm.Get_rank() else 0
    return _nbytes(x)


def _record(call: _Call, sent: int, received: int) -> None:
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
