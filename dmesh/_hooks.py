"""The one upward link: how DArray reaches the op layer without importing ``dmesh.ops``.

``dmesh.ops`` fills these in when it is imported (``dmesh/__init__.py``
imports it last), so no module of the middle layer imports ``dmesh.ops`` and
the layers stay ``dmesh.ops -> dmesh -> dmesh.collectives``. NumPy's
protocols, the arithmetic operators and ``a[key]`` all pass through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (ufunc, method, inputs, kwargs) -> result; installed by ops.dispatch.
dispatch_ufunc: Callable[[Any, str, tuple[Any, ...], dict[str, Any]], Any] | None = None
# (func, types, args, kwargs) -> result; installed by ops.dispatch.
dispatch_function: Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any] | None = None
# (ufunc, inputs, index of the temporary operand whose block may hold the
# result) -> result; installed by ops.dispatch (see dmesh._elision).
dispatch_donated: Callable[[Any, tuple[Any, ...], int], Any] | None = None
# (ufunc, inputs) -> result of ``ufunc(*inputs)`` for DArray operators with
# DArray or Python scalar operands, past NumPy's protocol; installed by ops.dispatch.
dispatch_operator: Callable[[Any, tuple[Any, ...]], Any] | None = None
# (ufunc, view, scalar) -> the view, or None: ``view op= scalar`` made straight on the
# blocks of a live detached view (``row = a[4]; row += 1``), past the ufunc hook's
# keyword handling; None where it does not apply. Installed by ops.dispatch (None
# while a debug tool watches).
in_place_view: Callable[[Any, Any, Any], Any] | None = None
# The op layer's step cache while no debug tool watches (None while one does):
# DArray's operators read a cached plain call's fused closure from it directly,
# as ``dispatch_operator`` would (``dmesh.ops.pipeline.steps``); installed by ops.dispatch.
operator_steps: dict[Any, Any] | None = None
# (array, key) -> DArray; installed by dmesh.ops.indexing (``a[key]``).
getitem: Callable[[Any, Any], Any] | None = None
# (array, key, value) -> None; installed by dmesh.ops.indexing (``a[key] = value``).
setitem: Callable[[Any, Any, Any], None] | None = None

# While dmesh.compile traces a function: its recorder, which dmesh functions that
# communicate by themselves (dmesh.map_overlap) ask to record their call on the
# trace's stand-ins (``recorder.records(a)``) instead of running it, and which
# redistributions ask first (``recorder.redistribute(a, mesh, layout)``: the
# recorded result, or NotImplemented to move as usual).
recorder: Any = None

# While a compiled function runs in segments (dmesh.ops.compiler.segments), ops wait
# in a segment until something needs their values: this is called before a DArray's
# block is handed out or written in place (``a.local``, ``a.fill``, ``a.sort``), so
# the waiting ops run first and see the block as it was.
before_block_access: Callable[[], None] | None = None

# dmesh.array_api, the Array API namespace ``DArray.__array_namespace__`` returns;
# installed by dmesh/__init__.py (the namespace sits above DArray's layer).
array_namespace: Any = None

# Above 0 while NumPy's own implementation of a function runs on DArrays
# (dmesh.ops.numpy_implementations): a DArray then refuses ``__array__``, so that
# a function that would need the whole array raises instead of gathering it.
gathers_refused: int = 0


class GatherRefusedError(BaseException):
    """``np.asarray(a)`` of a DArray inside NumPy code that runs on DArrays.

    A ``BaseException``, so that NumPy's own ``except Exception:`` (``np.array_equiv``
    answers False when its arguments do not convert) cannot turn the refusal into a
    wrong answer; the decomposition path turns it into an ``UnsupportedError``.
    """


# Set when a DArray refused a gather since the decomposition path last cleared it:
# even a refusal that NumPy's code caught makes the path raise.
gather_was_refused: bool = False
