"""Lazy arrays: the results of ops recorded in a segment (``dmesh.ops.compiler.segments``).

A ``LazyArray`` is a stand-in with a place for its block: the block is
filled when its segment runs, and reading it before (any eager code, a
graph break such as ``item()`` or ``a.local``) runs the segment first.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from dmesh import _hooks
from dmesh.darray import DArray
from dmesh.ops.compiler.trace import StandIn, Tracer

if TYPE_CHECKING:
    from dmesh.ops.compiler.segments import Segments

__all__ = ["LazyArray", "settled"]


class LazyArray(StandIn):
    """A recorded op's result: a spec, and the block once its segment ran.

    Reading the block (any eager code, a break) runs the segment first.
    """

    __slots__ = ("__weakref__", "_block", "_session")

    def __init__(self, spec: Any, session: Segments, slot: int) -> None:
        self._session: Segments | None = session
        self._block: Any = None
        super().__init__(spec, session.state.trace, slot)

    @property
    def _local(self) -> Any:
        if self._block is None:
            if self._session is None:
                raise RuntimeError(
                    "this array was computed inside a compiled call that raised before "
                    "its ops ran; it holds no values"
                )
            self._session.flush()
        return self._block

    @_local.setter
    def _local(self, value: Any) -> None:
        if value is not None and self._block is None and self._session is not None:
            self._session.flush()  # the waiting ops run before the block is replaced
        self._block = value

    def item(self, *args: Any) -> Any:
        """``DArray.item`` (so ``float``, ``int``, ``bool``): a one-element result's value
        may be reduced with the reads that follow it (:mod:`~dmesh.ops.compiler.scalars`)."""
        session = self._session
        if not args and session is not None:
            value = session.scalar(self)
            if value is not None:
                return value.item()
        return _item(self, *args)

    def full_array(self) -> Any:
        """``DArray.full_array``; a one-element result's value as :meth:`item` makes it."""
        session = self._session
        if session is not None:
            value = session.scalar(self)
            if value is not None:
                return value
        return _full_array(self)

    def copy(self) -> DArray:
        """``DArray.copy``: recorded while its segment records (a time step's ``u.copy()``
        then breaks nothing), else made from the block (the segment runs first)."""
        recorder = _hooks.recorder
        if isinstance(recorder, Tracer) and recorder.records(self):
            return recorder.copy(self)
        return _copy(self)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"LazyArray({self._spec!r})"


def settled(x: Any) -> Any:
    """``x``, or a plain DArray on its block where ``x`` is a lazy array whose segment ran:
    writes through it reach the same block, by the eager paths (which take DArrays only)."""
    if type(x) is LazyArray and x._block is not None:
        return DArray(x._block, x._spec)
    return x


def _eagerly(name: str) -> Any:
    """``DArray.<name>`` on a lazy array: its segment runs, then the eager method does."""
    method = getattr(DArray, name)

    def run(self: LazyArray, *args: Any, **kwargs: Any) -> Any:
        self._local  # noqa: B018 - runs the segment
        session = self._session
        with session.paused() if session is not None else contextlib.nullcontext():
            return method(self, *args, **kwargs)

    run.__name__ = name
    run.__doc__ = method.__doc__
    return run


for _name in (
    "to_local",
    "__array__",
    "tolist",
    "__setitem__",
    "astype",
):
    setattr(LazyArray, _name, _eagerly(_name))
_item, _full_array, _copy = _eagerly("item"), _eagerly("full_array"), _eagerly("copy")
LazyArray.__bool__ = DArray.__bool__  # type: ignore[method-assign]  # through item()
LazyArray.__getitem__ = DArray.__getitem__  # type: ignore[method-assign]  # the hook records it
LazyArray.local = property(_eagerly("to_local"), doc="This rank's block (runs the segment).")  # type: ignore[assignment]
