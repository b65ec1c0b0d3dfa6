"""Reduce operations by name, and how each is carried out for a given dtype.

The result of a reduction across ranks is what ``ufunc.reduce`` would give
over a stacked axis with the input's dtype kept, e.g. ``np.add.reduce(stack,
axis=0, dtype=x.dtype)``; ``"avg"`` is ``sum / group size`` and, like
``np.mean``, gives float64 for integer and bool data.

MPI only defines its logical operations on ``MPI_C_BOOL`` and no arithmetic
or bitwise ones, so bool data uses the ops NumPy's bool ufuncs reduce to:
``add``/``maximum``/``bitwise_or`` are logical or, ``multiply``/``minimum``/
``bitwise_and`` logical and, ``bitwise_xor`` logical xor.

MPI's ``MAX`` and ``MIN`` leave NaN undefined (MPICH's compare and drop it, so
the answer depends on which rank holds the NaN, and ranks can disagree).
Float ``"max"``/``"min"`` therefore use user-defined commutative ops that
apply ``np.maximum``/``np.minimum``, which propagate NaN as NumPy's
reductions do, and break the tie of ``-0.0`` and ``+0.0`` the same way
whichever operand comes first (max gives ``+0.0``, min ``-0.0``). They run
on host memory: a device buffer is staged through the host for them
(:attr:`ReducePlan.host_op`), whatever the MPI library.

Every rank must get the same bits, and MPI combines the terms in a
different order on each rank: a sum of two NaNs keeps the sign (and payload)
of one of them, and so does ``np.maximum`` of two NaNs. So a float or complex
result of a group of two or more ranks has its NaNs made the one quiet NaN
``+nan`` (:func:`canonical_nan`: one pass when the result holds no NaN).
Nothing is needed where the result cannot differ between ranks: integer and
bool data have no NaN, and a one-rank group combines nothing (its result is
its input, like a one-term ``Partial``, which dmesh never reduces either).
Large float results avoid even the pass: ``all_reduce`` computes each element
on one rank and copies it (:mod:`dmesh.collectives.reductions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from mpi4py import MPI

from dmesh.collectives.dtypes import mpi_datatype
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, suggest

REDUCE_OPS: tuple[str, ...] = (
    "sum", "prod", "min", "max", "avg", "band", "bor", "bxor", "land", "lor", "lxor",
)  # fmt: skip

_MPI_OPS = {
    "sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX, "avg": MPI.SUM,
    "band": MPI.BAND, "bor": MPI.BOR, "bxor": MPI.BXOR,
    "land": MPI.LAND, "lor": MPI.LOR, "lxor": MPI.LXOR,
}  # fmt: skip

_BOOL_OPS = {
    "sum": MPI.LOR, "max": MPI.LOR, "bor": MPI.LOR, "lor": MPI.LOR,
    "prod": MPI.LAND, "min": MPI.LAND, "band": MPI.LAND, "land": MPI.LAND,
    "bxor": MPI.LXOR, "lxor": MPI.LXOR,
}  # fmt: skip

_INTEGER_ONLY = frozenset({"band", "bor", "bxor", "land", "lor", "lxor"})
_ORDERED = frozenset({"min", "max"})


@dataclass(frozen=True)
class ReducePlan:
    """How to reduce one dtype with one op.

    ``wire`` is the dtype sent (it differs from the input only for ``"avg"``)
    and ``datatype`` its MPI datatype, ``mpi_op`` the MPI operation,
    ``result`` the dtype returned, ``average`` whether the sum is divided by
    the group size afterwards, and ``truth``
    whether integer results are mapped to 0/1: MPI applies no op when a group
    has one rank, so ``"land"`` of 2 would stay 2 there but become 1 on two
    ranks; mapping makes the answer independent of the rank count.
    """

    op: str
    mpi_op: MPI.Op
    wire: np.dtype
    datatype: MPI.Datatype
    result: np.dtype
    average: bool
    truth: bool = False
    plain: bool = False  # the received buffer is the result as is (no post-processing)
    host_op: bool = False  # a user-defined op: MPI applies it to host buffers only
    canonical: bool = False  # a float or complex result: NaNs made +nan where ranks combine

    def finish(self, received: Any, nranks: int) -> Any:
        """Turn the reduced buffer (ours to modify) into the result of ``nranks`` ranks."""
        canonical = self.canonical and nranks > 1  # (one rank: its own terms, nothing combined)
        if self.plain:
            return canonical_nan(received) if canonical else received
        if self.average:
            received /= nranks
        elif self.truth:
            received = received != 0
        result = received if received.dtype == self.result else received.astype(self.result)
        return canonical_nan(result) if canonical else result


_SMALL = 32  # up to this many elements, Python's sum of ``tolist()`` beats one ``min``


def canonical_nan(x: Any) -> Any:
    """``x`` (a contiguous float or complex array, modified in place) with every NaN ``+nan``.

    One pass when ``x`` holds no NaN: ``min`` propagates NaN, so one ``min``
    says whether there is any. Small arrays (the scalars of solvers, the
    8-element reductions) are checked in Python instead: ``x.item()`` or the
    sum of ``x.tolist()`` (0.1-0.2 us against 1 us for ``min``), which is NaN
    whenever an element is (and for ``inf + -inf``: then the exact check).
    """
    size = x.size
    if size <= _SMALL:
        if size == 1:
            value = x.item()
        elif size:
            value = sum(x.ravel().tolist())
        else:
            return x
        if value == value:
            return x
    flat = x.reshape(-1)
    if x.dtype.kind == "c":
        flat = flat.view(x.real.dtype)
    smallest = flat.min()
    if smallest != smallest:
        flat[flat != flat] = np.nan
    return x


def check_op(op: Any) -> str:
    """Validate an op name; raise with the allowed names otherwise."""
    if not isinstance(op, str):
        raise ArgumentTypeError(
            f"op: expected one of the names {', '.join(REDUCE_OPS)}; got {type(op).__name__}: "
            f"{op!r}"
        )
    if op not in _MPI_OPS:
        raise ArgumentError(
            f"op={op!r} is not a reduce op{suggest(op, REDUCE_OPS)}; "
            f"allowed: {', '.join(REDUCE_OPS)}"
        )
    return op


_plans: dict[tuple[Any, str], ReducePlan] = {}


def reduce_plan(op: Any, dtype: np.dtype) -> ReducePlan:
    """The :class:`ReducePlan` for ``op`` on ``dtype``; raises for invalid pairs."""
    # Keyed by the dtype's one-letter code: hashing a dtype object costs more,
    # and this lookup is on every reduction's path. Only valid pairs are stored.
    try:
        return _plans[op, dtype.char]
    except (KeyError, TypeError):
        plan = _plan(check_op(op), dtype)
        _plans[op, dtype.char] = plan
        return plan


def known_plan(op: Any, code: str) -> ReducePlan | None:
    """The plan of an (op, dtype code) pair already validated by :func:`reduce_plan`, else None."""
    try:
        return _plans.get((op, code))
    except TypeError:  # an unhashable op: reduce_plan gives the error message
        return None


@lru_cache(maxsize=512)
def _plan(op: str, dtype: np.dtype) -> ReducePlan:
    kind = dtype.kind
    if kind == "c" and op in _ORDERED:
        raise ArgumentTypeError(
            f"op={op!r} is not defined for complex data ({dtype}): complex numbers are "
            "not ordered; reduce .real or abs(x) instead"
        )
    if op in _INTEGER_ONLY and kind not in "biu":
        raise ArgumentTypeError(
            f"op={op!r} needs integer or bool data, got {dtype}; "
            "for float data use 'sum', 'prod', 'min', 'max' or 'avg'"
        )
    if op == "avg":
        wire: np.dtype
        if kind in "biu":
            wire = np.dtype(np.float64)
        elif dtype == np.float16:
            wire = np.dtype(np.float32)  # accumulate like np.mean does for float16
        else:
            wire = dtype
        result = np.dtype(np.float64) if kind in "biu" else dtype
        return ReducePlan(
            op, MPI.SUM, wire, mpi_datatype(wire), result, average=True, canonical=kind in "fc"
        )
    if kind == "f" and op in _ORDERED:
        return ReducePlan(
            op, _nan_propagating(op, dtype), dtype, mpi_datatype(dtype), dtype,
            average=False, plain=True, host_op=True, canonical=True,
        )  # fmt: skip
    if dtype == np.float16:  # MPI has no float16 arithmetic: NumPy's, in a user-defined op
        return ReducePlan(
            op, _ufunc_op(op, dtype), dtype, mpi_datatype(dtype), dtype,
            average=False, plain=True, host_op=True, canonical=True,
        )  # fmt: skip
    mpi_op = _BOOL_OPS[op] if kind == "b" else _MPI_OPS[op]
    truth = kind in "iu" and op in ("land", "lor", "lxor")
    return ReducePlan(
        op, mpi_op, dtype, mpi_datatype(dtype), dtype, average=False, truth=truth,
        plain=not truth, canonical=kind in "fc",
    )  # fmt: skip


@lru_cache(maxsize=4)
def _ufunc_op(op: str, dtype: np.dtype) -> MPI.Op:
    """A commutative MPI op applying ``np.add`` or ``np.multiply`` to ``dtype``'s bytes.

    For dtypes MPI cannot compute with (float16); kept for the life of the process.
    """
    ufunc = np.add if op == "sum" else np.multiply

    def combine(inbuf: Any, inoutbuf: Any, datatype: MPI.Datatype) -> None:
        inout = np.frombuffer(inoutbuf, dtype)
        ufunc(np.frombuffer(inbuf, dtype), inout, out=inout)

    return MPI.Op.Create(combine, commute=True)


@lru_cache(maxsize=16)
def _nan_propagating(op: str, dtype: np.dtype) -> MPI.Op:
    """A commutative MPI op applying ``np.maximum`` or ``np.minimum`` to ``dtype`` (NaN wins).

    Created once per (op, dtype) and kept for the life of the process, like
    MPI's predefined ops.
    """
    ufunc = np.maximum if op == "max" else np.minimum
    # Zeros: the sum of two zeros is +0.0 unless both are -0.0, so ``a + b`` is the
    # max of two zeros, and ``-(-a + -b)`` their min, whichever comes first.
    sign = 1.0 if op == "max" else -1.0

    def combine(inbuf: Any, inoutbuf: Any, datatype: MPI.Datatype) -> None:
        incoming = np.frombuffer(inbuf, dtype)
        inout = np.frombuffer(inoutbuf, dtype)
        zeros = (incoming == 0) & (inout == 0)
        ties = sign * (sign * incoming[zeros] + sign * inout[zeros]) if zeros.any() else None
        ufunc(incoming, inout, out=inout)
        if ties is not None:
            inout[zeros] = ties

    return MPI.Op.Create(combine, commute=True)
