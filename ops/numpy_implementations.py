"""The decomposition path: NumPy's own implementation of a function, run on DArrays.

Many NumPy functions are written in Python as a sequence of NumPy calls
(``np.cov``, ``np.average``, ``np.atleast_2d``, ``np.trapezoid``...). Run with
DArray arguments, each inner call dispatches by its own rule, so the
function is as distributed as its parts, except that most begin with
``np.asarray(a)``, which would gather the whole array on every rank.

:func:`run_implementation` runs such a function (a NumPy function without a
rule or a decomposition of dmesh's) on a copy of its code whose module
globals see ``asarray``, ``asanyarray``, ``array`` (and ``np.``/``_nx.`` of
them) that keep a DArray a DArray. Every other function of the same module
is rebound the same way, so NumPy's private helpers (``_ureduce``...) keep
DArrays too. While it runs, a DArray refuses to be gathered (``__array__``):
a function whose implementation needs the whole array (an ``np.empty`` it
fills by assignment, an ``np.nditer``) raises a clear
:class:`UnsupportedError` on every rank, at the same point of the same code
on each, instead of moving the array. The wrappers of ndarray methods
(``numpy._core.fromnumeric``, which call ``a.method``, itself ``np.func``)
never take this path.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from dmesh import _hooks
from dmesh.collectives.errors import UnsupportedError
from dmesh.darray import DArray

__all__ = ["implementation_of", "run_implementation"]

# Modules whose functions call ndarray methods that are themselves np.func on
# DArrays (a loop), or wrap C functions: never rebound.
_EXCLUDED_MODULES = ("numpy._core.fromnumeric", "numpy._core.multiarray", "numpy._core._methods")

_state = threading.local()


def _contains_darray(x: Any) -> bool:
    if isinstance(x, DArray):
        return True
    if isinstance(x, (list, tuple)):
        return any(_contains_darray(v) for v in x)
    return False


def _stacked(x: Any) -> Any:
    """A nested list or tuple holding DArrays, as one DArray (``np.stack`` of its items)."""
    if isinstance(x, DArray):
        return x
    if isinstance(x, (list, tuple)) and _contains_darray(x):
        return np.stack([_stacked(v) for v in x])
    return np.asarray(x)


def _keep(
    a: Any, dtype: Any = None, order: Any = None, *, copy: Any = None, ndmin: int = 0, **kw: Any
) -> Any:
    """``np.asarray``/``asanyarray``/``array`` that keeps DArrays (and lists of them)."""
    if not _contains_darray(a):
        call: Any = np.array if copy is not None or ndmin else np.asarray
        extra: dict[str, Any] = {"ndmin": ndmin} if ndmin else {}
        if copy is not None:
            extra["copy"] = copy
        return call(a, dtype=dtype, order=order, **extra, **kw)
    result = _stacked(a)
    if result.ndim == 0:  # a value (np.linspace's bounds): one small collective read
        return np.array(result.item(), dtype=result.dtype if dtype is None else dtype, ndmin=ndmin)
    if dtype is not None and np.dtype(dtype) != result.dtype:
        result = result.astype(dtype)
    elif copy:
        result = result.copy()
    if result.ndim < ndmin:
        result = result.reshape((1,) * (ndmin - result.ndim) + result.shape)
    return result


def _asarray(a: Any, dtype: Any = None, order: Any = None, **kw: Any) -> Any:
    return _keep(a, dtype, order, copy=kw.pop("copy", None), **_plain(kw))


def _array(a: Any, dtype: Any = None, *, copy: Any = True, order: Any = "K", **kw: Any) -> Any:
    return _keep(a, dtype, order, copy=copy, **_plain(kw))


def _plain(kw: dict[str, Any]) -> dict[str, Any]:
    kw.pop("like", None)  # (a DArray's namespace is NumPy's: like= changes nothing here)
    kw.pop("subok", None)
    kw.pop("device", None)
    return kw


_OVERRIDES: dict[str, Any] = {
    "asarray": _asarray,
    "asanyarray": _asarray,
    "array": _array,
    "ascontiguousarray": _asarray,
    "asarray_chkfinite": _asarray,
}


class _NumpyView(types.ModuleType):
    """``np`` (or ``_nx``) as the rebound code sees it: NumPy, with the overrides."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__(real.__name__)
        self.__dict__["_real"] = real

    def __getattr__(self, name: str) -> Any:
        if name in _OVERRIDES:
            return _OVERRIDES[name]
        return getattr(self.__dict__["_real"], name)


_environments: dict[int, dict[str, Any]] = {}
_rebound: dict[Any, types.FunctionType] = {}


def _environment(module_globals: dict[str, Any]) -> dict[str, Any]:
    """A copy of a NumPy module's globals in which conversions keep DArrays (cached)."""
    env = _environments.get(id(module_globals))
    if env is not None:
        return env
    env = dict(module_globals)
    _environments[id(module_globals)] = env
    for name, value in module_globals.items():
        if name in _OVERRIDES:
            env[name] = _OVERRIDES[name]
        elif isinstance(value, types.ModuleType) and value.__name__.startswith("numpy"):
            if any(hasattr(value, n) for n in _OVERRIDES):
                env[name] = _NumpyView(value)
        elif isinstance(value, types.FunctionType) and value.__globals__ is module_globals:
            env[name] = _copy(value, env)
    return env


def _copy(func: types.FunctionType, env: dict[str, Any]) -> types.FunctionType:
    copy = types.FunctionType(
        func.__code__, env, func.__name__, func.__defaults__, func.__closure__
    )
    copy.__kwdefaults__ = func.__kwdefaults__
    copy.__dict__.update(func.__dict__)
    return copy


def implementation_of(func: Any) -> types.FunctionType | None:
    """The rebound Python implementation of NumPy function ``func``, or None if it has none."""
    if func in _rebound:
        return _rebound[func]
    impl = getattr(func, "_implementation", None)
    if not isinstance(impl, types.FunctionType) or not impl.__module__.startswith("numpy"):
        return None
    if impl.__module__ in _EXCLUDED_MODULES:
        return None
    rebound = _copy(impl, _environment(impl.__globals__))
    _rebound[func] = rebound
    return rebound


@contextmanager
def _running(func: Any) -> Iterator[None]:
    running: list[Any] = getattr(_state, "running", None) or []
    _state.running = running
    running.append(func)
    _hooks.gathers_refused += 1
    try:
        yield
    finally:
        _hooks.gathers_refused -= 1
        running.pop()


def run_implementation(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func(*args, **kwargs)`` by NumPy's own implementation with DArrays flowing through.

    Raises :class:`UnsupportedError` when ``func`` has no Python implementation,
    when it calls itself again on the way (it would loop), or when it would need
    the whole array (a gather).
    """
    label = f"np.{getattr(func, '__name__', func)}"
    impl = implementation_of(func)
    if impl is None or func in (getattr(_state, "running", None) or ()):
        raise UnsupportedError(_unsupported(label, "it has no rule and no decomposition"))
    refused_before, _hooks.gather_was_refused = _hooks.gather_was_refused, False
    try:
        with _running(func):
            result = impl(*args, **kwargs)
        if _hooks.gather_was_refused:  # refused, and NumPy's code caught it: no answer
            raise UnsupportedError(
                _unsupported(label, "its NumPy implementation needs a whole array (a gather)")
            )
        return result
    except _hooks.GatherRefusedError as refused:
        raise UnsupportedError(_unsupported(label, f"its NumPy implementation {refused}")) from None
    except AttributeError as missing:
        if "DArray" not in str(missing):
            raise
        raise UnsupportedError(
            _unsupported(label, f"its NumPy implementation uses what a DArray lacks ({missing})")
        ) from None
    finally:
        _hooks.gather_was_refused = refused_before or _hooks.gather_was_refused


def _unsupported(label: str, why: str) -> str:
    return (
        f"{label} on DArrays is not supported yet: {why}; gather with a.full_array() "
        "if the array is small, or use a supported operation"
    )
