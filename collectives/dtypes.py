"""Which array dtypes travel over MPI, and as which MPI datatype."""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from dmesh.collectives.errors import ArgumentTypeError

# Single-character codes of the dtypes collectives accept, in a fixed order so
# that a dtype can travel as a small integer inside a header message.
_CODES = "?bBhHiIlLqQefdgFDG"
SUPPORTED_CODES = frozenset(_CODES)
_BY_CODE: dict[str, MPI.Datatype] = {code: MPI._typedict[code] for code in _CODES}
# float16 travels as its two bytes. MPI has no standard float16 datatype:
# mpi4py maps "e" to MPICH's MPIX_C_FLOAT16, which Open MPI lacks (Allreduce
# with it crashed Open MPI 4.1.4 with a segmentation fault). Moves need only
# the bytes; reductions of float16 apply NumPy's ufunc in a user-defined op
# (reduce_ops), so every MPI computes them alike.
_BY_CODE["e"] = MPI.UINT16_T


def mpi_datatype(dtype: np.dtype) -> MPI.Datatype:
    """The predefined MPI datatype of ``dtype`` (native byte order).

    mpi4py's own table of predefined types, the one it uses for buffers it
    describes itself. (``mpi4py.util.dtlib.from_numpy_dtype`` returns a
    duplicated, user-defined type, on which MPI defines no reduction.)
    float16 is the exception: ``MPI.UINT16_T``, its bytes (see above), so a
    buffer of float16 must always be passed with this datatype.
    """
    return _BY_CODE[dtype.char]


def host_datatype(x: Any) -> MPI.Datatype | None:
    """The MPI datatype of a NumPy array's elements, or None if not native and supported.

    For the fast paths: one dict lookup instead of the checks of
    :func:`check_dtype` (which gives the error message when this says None).
    """
    dtype = x.dtype
    return _BY_CODE.get(dtype.char) if dtype.isnative else None


def check_dtype(dtype: np.dtype, argument: str) -> np.dtype:
    """Return ``dtype`` if collectives can move it, else raise ``ArgumentTypeError``."""
    if dtype.char not in _CODES or not dtype.isnative:
        raise ArgumentTypeError(
            f"{argument}: dtype {dtype} is not supported; collectives move bool, integer, "
            "float and complex arrays in native byte order (convert with .astype)"
        )
    return dtype


def dtype_code(dtype: np.dtype) -> int:
    """A small integer naming ``dtype``, for header messages."""
    return _CODES.index(dtype.char)


_DTYPES = tuple(np.dtype(code) for code in _CODES)


def dtype_from_code(code: int) -> np.dtype:
    """Inverse of :func:`dtype_code`."""
    return _DTYPES[code]
