"""Whether a Python operator method was called by the interpreter's operator instruction itself.

Temporary elision (``dmesh._elision``) may reuse an operand's block only when
nothing but the interpreter's value stack refers to the operand. A reference
count cannot tell that apart from a DArray that C code (Cython, mypyc, a C
extension) holds in a local while it computes ``t + c`` and reads ``t``
afterwards. NumPy closes that hole by walking the C stack (``check_callers``
in its ``temp_elide.c``): it elides only when every C frame between its
operator and the interpreter loop belongs to Python or NumPy. This module
does the same from Python, through ``ctypes``:

* at import, a probe class's operators are called from Python code
  (``P() + P()``, ``P() + 1.0``, ``1.0 + P()``, for each operator DArray
  elides), and the return addresses of the C frames between the probe
  method's interpreter loop and its caller's are recorded: the interpreter's
  own path from a ``BINARY_OP`` instruction to a Python ``__add__`` (or
  ``__radd__``), a handful of frames in ``libpython``;
* :func:`called_by_instruction` takes the C stack (``backtrace``) of a real
  call and compares the same stretch with the recorded paths. C code that
  reached the operator by itself (``PyNumber_Add`` from a Cython function)
  adds its own frames, so the stretch differs and elision is refused.

The builtin ``sum`` is the one C caller admitted besides the instruction
(:func:`called_by_sum`): it holds its running total and each item alone and
drops them right after adding, as the value stack does, so NumPy elides
there too (``sum(np.roll(z, i) for i in ...)``). Calibration records its
path as well, and a check compares the stretch up to sum's own frame (the
one that called ``PyNumber_Add``), whatever call reached sum.

The stretch is found by the interpreter loop's frames
(``_PyEval_EvalFrameDefault``, named by ``dladdr``), never by the frames'
count, so it holds whatever Python frames the call runs under. Where any of
this is unavailable (no ``backtrace`` or ``dladdr``, as on Windows; a Python
that does not export its loop; a probe whose stretch cannot be found) it
reports ``False`` for every call, and elision stays off: a missed reuse,
never a wrong one. A check costs some 4 us (``backtrace`` is most of it), so
elision asks only for blocks where a fresh allocation costs more.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, cast

__all__ = ["available", "called_by_instruction", "called_by_sum"]

# Frames taken at calibration: ctypes' own (libffi, _ctypes), the loop running
# the operator method, the interpreter's path to it and the caller's loop fit
# in well under this. Checks then take only as many as calibration needed
# (unwinding is most of a check's cost); a stack cut short is a refusal.
_DEPTH = 48
_depth = [_DEPTH]

OPERATORS = ("add", "sub", "mul", "truediv", "pow")


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _native() -> tuple[Any, Any, int] | None:
    """``backtrace``, ``dladdr`` and the interpreter loop's address, or None where missing."""
    try:
        # PyDLL: the calls keep the GIL, so no other thread's backtrace can
        # write into the one frame buffer while this thread reads it.
        libc = ctypes.PyDLL(None)
        backtrace = libc.backtrace
        dladdr = libc.dladdr
        loop = ctypes.cast(ctypes.pythonapi._PyEval_EvalFrameDefault, ctypes.c_void_p).value
    except (OSError, AttributeError, TypeError, ValueError):
        return None
    backtrace.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    backtrace.restype = ctypes.c_int
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    dladdr.restype = ctypes.c_int
    return (backtrace, dladdr, loop) if loop else None


_NATIVE = _native()
_frames = (ctypes.c_void_p * _DEPTH)()
# Return address -> whether it lies in the interpreter loop (dladdr, once per address).
_in_loop: dict[int, bool] = {}


def _is_loop(address: int) -> bool:
    known = _in_loop.get(address)
    if known is None:
        assert _NATIVE is not None
        _, dladdr, loop = _NATIVE
        info = _DlInfo()
        # The symbol holding a return address is the one that holds address - 1
        # (a call can be a function's last instruction).
        found = dladdr(ctypes.c_void_p(address - 1), ctypes.byref(info))
        known = bool(found) and info.dli_saddr == loop
        if len(_in_loop) < 4096:  # bounded: addresses are a program's call sites
            _in_loop[address] = known
    return known


def _stretch(loops_above: int, count: int) -> tuple[int, ...] | None:
    """The return addresses between the ``loops_above``-th interpreter loop frame and the next.

    Counted from the top of the ``count`` frames last taken into
    ``_frames``; None when they show fewer loop frames than that.
    """
    seen = 0
    start = -1
    for i in range(count):
        address = _frames[i]
        if address is None:
            return None
        if _is_loop(address):
            seen += 1
            if seen == loops_above:
                start = i + 1
            elif seen == loops_above + 1:
                _deepest[0] = max(_deepest[0], i + 1)
                # (no None among them: every address up to i was checked)
                return tuple(cast("list[int]", _frames[start:i]))
    return None


# The most frames a recorded stretch needed, with its closing loop frame.
_deepest = [0]


# (operator, reflected) -> the stretches a call from a Python operator
# instruction shows; filled by _calibrate.
_paths: dict[tuple[str, bool], frozenset[tuple[int, ...]]] = {}
# The same for the builtin sum adding its items (``add`` only).
_sum_paths: dict[tuple[str, bool], frozenset[tuple[int, ...]]] = {}
# How many loop frames lie above (and including) the operator method's own,
# seen from inside :func:`called_by_instruction`; 0 until calibrated.
_loops_above = [0]


def called_by_sum(name: str, reflected: bool) -> bool:
    """Whether the operator method calling this was run by the builtin ``sum`` adding its
    items (``sum(np.roll(z, i) for i in ...)``), as recorded at import.

    ``sum`` holds its running total in a C local that it releases right after
    each addition, and each item only until it is added: a total (or an item
    the iterator made) that nothing else refers to is a temporary there, as on
    the interpreter's value stack. Only ``add`` has such paths.
    """
    paths = _sum_paths.get((name, reflected))
    if paths is None:
        return False
    assert _NATIVE is not None
    count = _NATIVE[0](_frames, _depth[0])
    stack = ("sum", name, reflected, *_frames[:count])
    verdict = _verdicts.get(stack)
    if verdict is None:
        stretch = _stretch(_loops_above[0], count)
        verdict = stretch is not None and any(stretch[: len(p)] == p for p in paths)
        if len(_verdicts) < 4096:
            _verdicts[stack] = verdict
    return verdict


def called_by_instruction(name: str, reflected: bool) -> bool:
    """Whether the operator method calling this was run by a Python operator instruction.

    ``name`` is the operator (``add``, ``sub``, ``mul``, ``truediv``,
    ``pow``) and ``reflected`` says whether the method is ``__radd__`` and
    the like. True only when the C frames between the method and the Python
    code that ran the operator are the interpreter's own path, as recorded at
    import.
    """
    paths = _paths.get((name, reflected))
    if paths is None:
        return False
    assert _NATIVE is not None
    count = _NATIVE[0](_frames, _depth[0])
    # A program makes its operator calls from a few places: the verdict on a
    # whole stack is remembered, so a repeated one costs the unwinding only.
    stack = (name, reflected, *_frames[:count])
    verdict = _verdicts.get(stack)
    if verdict is None:
        stretch = _stretch(_loops_above[0], count)
        verdict = stretch is not None and stretch in paths
        if len(_verdicts) < 4096:
            _verdicts[stack] = verdict
    return verdict


# (operator, reflected, *return addresses) -> called_by_instruction's verdict.
_verdicts: dict[tuple[Any, ...], bool] = {}


def available() -> bool:
    """Whether the check works on this interpreter (else every call is refused)."""
    return bool(_paths)


def _probe_class(record: Callable[[str, bool], None]) -> type:
    def method(name: str, reflected: bool) -> Callable[[Any, Any], Any]:
        def operator(self: Any, other: Any) -> Any:
            record(name, reflected)
            return self

        return operator

    namespace = {}
    for name in OPERATORS:
        namespace[f"__{name}__"] = method(name, False)
        namespace[f"__r{name}__"] = method(name, True)
    return type("_Probe", (), namespace)


def _loops_to(stretch_symbol: bytes, count: int) -> int:
    """The loop frames above the first frame in ``stretch_symbol`` among ``count`` taken."""
    assert _NATIVE is not None
    _, dladdr, _ = _NATIVE
    loops = 0
    for i in range(count):
        address = _frames[i]
        if address is None:
            return 0
        info = _DlInfo()
        if dladdr(ctypes.c_void_p(address - 1), ctypes.byref(info)) and (
            info.dli_sname == stretch_symbol
        ):
            return loops
        loops += _is_loop(address)
    return 0


def _through_caller_of(symbol: bytes, stretch: tuple[int, ...]) -> tuple[int, ...] | None:
    """``stretch`` up to and including the frame that called ``symbol`` (None: not in it)."""
    assert _NATIVE is not None
    for i, address in enumerate(stretch[:-1]):
        info = _DlInfo()
        if _NATIVE[1](ctypes.c_void_p(address - 1), ctypes.byref(info)) and (
            info.dli_sname == symbol
        ):
            return stretch[: i + 2]
    return None


def _calibrate() -> None:
    """Record the interpreter's path from each operator instruction to a Python method."""
    if _NATIVE is None:
        return
    found: dict[tuple[str, bool], set[tuple[int, ...]]] = {}
    depth: list[int] = []

    # locate and record take the stack themselves, one Python call below the
    # operator method, as called_by_instruction does (on Pythons that run
    # each Python call in a loop frame of its own, the counts then agree).
    def locate(name: str, reflected: bool) -> None:
        assert _NATIVE is not None
        count = _NATIVE[0](_frames, _DEPTH)
        # The operator method's own loop is the last one above PyNumber_Add.
        depth.append(_loops_to(b"PyNumber_Add", count))

    def record(name: str, reflected: bool) -> None:
        assert _NATIVE is not None
        stretch = _stretch(_loops_above[0], _NATIVE[0](_frames, _DEPTH))
        if stretch is not None:
            found.setdefault((name, reflected), set()).add(stretch)

    locator = _probe_class(locate)()
    _ = locator + locator
    if not depth or depth[0] < 1:
        return
    _loops_above[0] = depth[0]
    probe = _probe_class(record)()
    for _ in range(2):  # twice: a specialised instruction must take the same path
        _ = probe + probe
        _ = probe + 1.0
        _ = 1.0 + probe
        _ = probe - probe
        _ = probe - 1.0
        _ = 1.0 - probe
        _ = probe * probe
        _ = probe * 1.0
        _ = 1.0 * probe
        _ = probe / probe
        _ = probe / 1.0
        _ = 1.0 / probe
        _ = probe**probe
        _ = probe**1.0
        _ = 1.0**probe
    # A path that includes no frame at all would accept any caller reached
    # without C in between, which no operator instruction is: refuse it.
    for key, stretches in found.items():
        if stretches and all(stretches):
            _paths[key] = frozenset(stretches)
    if len(_paths) != 2 * len(OPERATORS):
        _paths.clear()
        return
    _depth[0] = _deepest[0] + 2  # a little slack for the check's own frames
    found.clear()
    for _ in range(2):  # the first item (after sum's int start), the later ones, a start
        _ = sum([probe, probe, probe])
        _ = sum([probe, probe], probe)
    for key, stretches in found.items():
        # Up to sum's own frame, the one that called PyNumber_Add: how the caller
        # reached sum (a specialised call or the generic vectorcall) does not matter.
        prefixes = {_through_caller_of(b"PyNumber_Add", s) for s in stretches - _paths[key]}
        if key[0] == "add" and prefixes and None not in prefixes:
            _sum_paths[key] = frozenset(p for p in prefixes if p is not None)
    _depth[0] = _deepest[0] + 2  # (sum's stretch is deeper: unwind as far)


_calibrate()
