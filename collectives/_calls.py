"""What a collective call is, for the debug tools: its description, and the check that ranks agree.

:mod:`dmesh.collectives.tracing` describes each watched call here (which
communicator, shapes and dtype, the caller's site), compares the
descriptions across ranks in checking mode, and counts the bytes it moved.
Communicators get their readable names here (``name_group``).
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from dmesh.collectives._callsite import find_caller
from dmesh.collectives.errors import CollectiveMismatchError, DMeshError
from dmesh.collectives.group import resolve_group

_group_names: dict[int, tuple[str, int | None]] = {}


def name_group(comm: MPI.Comm, name: str, mesh_dim: int | None = None) -> None:
    """Give ``comm`` a name for records and reports (a mesh dim's communicator)."""
    if comm != MPI.COMM_NULL:
        _group_names[comm.py2f()] = (name, mesh_dim)


def forget_group(comm: MPI.Comm) -> None:
    """Drop ``comm``'s name (before it is freed: handles are reused)."""
    if comm != MPI.COMM_NULL:
        _group_names.pop(comm.py2f(), None)


def group_name(comm: MPI.Comm) -> tuple[str, int | None]:
    """``comm``'s name for reports and its mesh dim, if it has one."""
    group, mesh_dim = _group_names.get(comm.py2f(), (None, None))
    if group is None:
        group = "COMM_WORLD" if comm == MPI.COMM_WORLD else "a communicator"
    return group, mesh_dim


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
class Call:
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


def describe(name: str, fn: Any, kwargs: dict[str, Any]) -> Call | None:
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
    group, mesh_dim = group_name(comm)
    fingerprint = repr((name, agreed_dtype, agreed_shapes, comm.Get_size(), caller))
    return Call(
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


def text_of(call: Call) -> str:
    shapes = "" if call.shapes is None else ", ".join(f"{call.dtype}{list(s)}" for s in call.shapes)
    return f"{call.name}({shapes}) on {call.group} at {call.site}"


def nbytes(value: Any) -> int:
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v) for v in value)
    if value is None or not hasattr(value, "shape"):
        return 0
    return int(np.prod(value.shape, dtype=np.int64)) * int(np.dtype(value.dtype).itemsize)


def check_agreement(call: Call) -> None:
    """Compare ``call`` across its communicator; raise on every rank if they differ."""
    comm = call.comm
    digest = hashlib.blake2b(call.fingerprint.encode(), digest_size=8).digest()
    mine = np.frombuffer(digest, dtype=np.int64).copy()
    every = np.empty(comm.Get_size(), dtype=np.int64)
    comm.Allgather([mine, MPI.INT64_T], [every, MPI.INT64_T])
    if (every == every[0]).all():
        return
    texts = comm.allgather(text_of(call))  # every rank is here: the digests reached all
    lines = [f"  rank {r}: {t}" for r, t in enumerate(texts)]
    raise CollectiveMismatchError(
        f"the ranks of {call.group} ({comm.Get_size()} ranks) called different collectives "
        "(checking mode, DMESH_CHECK); without it they would hang or exchange wrong data:\n"
        + "\n".join(lines)
        + "\nEvery rank must make the same collective calls in the same order; look for "
        "a branch on the rank or on data that differs between ranks."
    )


def sent_bytes(name: str, values: dict[str, Any], comm: MPI.Comm) -> int:
    """Bytes of this rank's input that the collective sends."""
    x = values.get("xs", values.get("x"))
    if name == "permute":  # only a rank that is a source sends
        rank = comm.Get_rank()
        try:
            sends = any(int(src) == rank for src, _ in values.get("pairs", ()))
        except (TypeError, ValueError):
            sends = False
        return nbytes(x) if sends else 0
    if name in ("broadcast", "scatter"):  # only the source's input is read
        return nbytes(x) if values.get("src", 0) == comm.Get_rank() else 0
    return nbytes(x)
