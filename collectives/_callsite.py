"""Where a collective was called from: the first frame outside dmesh's packages.

Debug records and reports name the user's line (``prog.py:12 in main``), and
the outermost library call on the way (``DArray.full_array``, ``dmesh.halo``)
as the op when no NumPy call is in progress. ``dmesh`` registers its folder
(``dmesh.ops`` and ``dmesh.collectives`` live inside it) with
:func:`add_library_path`; NumPy's frames are skipped.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import numpy as np

__all__ = ["add_library_path", "find_caller"]

_library_paths: list[str] = [os.path.dirname(os.path.abspath(__file__)) + os.sep]
_skipped_paths: list[str] = [
    os.path.dirname(os.path.abspath(np.__file__)) + os.sep,
    os.path.abspath(contextlib.__file__),
]


def add_library_path(folder: str) -> None:
    """Treat frames in ``folder`` as library code when looking for the caller."""
    path = os.path.abspath(folder) + os.sep
    if path not in _library_paths:
        _library_paths.append(path)


def _qualname(code: Any) -> str:
    return str(getattr(code, "co_qualname", code.co_name))  # co_qualname: Python 3.11+


# How a special method is written by its caller: "DArray.__float__" -> "float(DArray)".
_SPELLED = {
    "__float__": "float({})",
    "__int__": "int({})",
    "__bool__": "bool({})",
    "__complex__": "complex({})",
    "__index__": "operator.index({})",
    "__array__": "np.asarray({})",
    "__getitem__": "{}[...]",
    "__setitem__": "{}[...] = v",
}


def _spelled(qualname: str) -> str:
    owner, _, method = qualname.rpartition(".")
    form = _SPELLED.get(method)
    return form.format(owner) if form is not None and owner else qualname


def find_caller() -> tuple[str, str, str]:
    """(site "file:line in function", the caller's file and function, outermost library call)."""
    frame = sys._getframe(1)
    library = ""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(tuple(_library_paths)):
            library = _qualname(frame.f_code)
            if "." not in library:  # a function: name the package users call it from
                module = str(frame.f_globals.get("__name__", ""))
                public = "dmesh.collectives" if module.startswith("dmesh.collectives.") else ""
                package = public or module.partition(".")[0]  # dmesh.halo, dmesh.save
                library = f"{package}.{library}" if package else library
        elif not filename.startswith(tuple(_skipped_paths)):
            name = _qualname(frame.f_code)
            where = f"{os.path.basename(filename)}:{frame.f_lineno} in {name}"
            return where, f"{filename}:{name}", _spelled(library)
        frame = frame.f_back  # type: ignore[assignment]
    return "(no caller outside dmesh)", "", _spelled(library)
