"""Run a sharding rule's row on simulated blocks in one process, and compare with NumPy.

One mesh dimension of ``k`` ranks is simulated. For a row ``(output,
*inputs)`` of placements, each operand is cut into ``k`` blocks the way
dispatch would hold it:

* ``Shard(e)``: the slices of dim ``e`` between cut points (balanced, uneven
  or empty blocks, as drawn); operands sharded on the same output dim share
  its cuts (dispatch aligns them), and dims that map to no output dim (a
  reduced or contracted axis) share one set of cuts;
* ``Replicate()``: the whole array on every rank;
* ``Partial(op)``: terms that combine by ``op`` to the global array, drawn
  from the forms dmesh produces: one rank holds the value and the others the
  op's identity (what a reduction over empty blocks leaves), every rank holds
  it (max/min/avg), or a random split (sum).

The op runs on each rank's blocks as dispatch runs it (the rule's ``run``,
specialized for the call when the rule says so, or the callable), and the
``k`` results are combined by the output placement: concatenated along the
sharded dim, required identical for ``Replicate()``, reduced by the op for
``Partial`` (``max``/``min`` propagate NaN, as dmesh's collectives do). The
combination must equal NumPy's result on the global arrays: same shape and
dtype, integers and bools exactly, floats to a tolerance of their precision
with NaN in the same places and infinities of the same sign (the sign of a
zero is not compared: partial sums may add a ``+0.0`` term to ``-0.0``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.ops.registry import Call, Row, Rule

__all__ = ["Blocks", "RowMismatchError", "check_row", "combine", "identity", "numpy_result"]

Draw = Callable[[str, Any], Any]  # (what, hypothesis strategy or options) -> a value


class RowMismatchError(AssertionError):
    """A row gave a different answer than NumPy for some input."""


@dataclass
class Blocks:
    """How one row was simulated: cut points by key, and each operand's blocks."""

    k: int
    cuts: dict[Any, list[int]]
    operands: list[list[Any]]


def identity(op: str, dtype: np.dtype) -> Any:
    """The identity of ``op`` on ``dtype``: what a rank with nothing to reduce holds."""
    if op in ("sum", "avg"):
        return dtype.type(0)
    if op == "prod":
        return dtype.type(1)
    largest = op == "min"
    if dtype.kind == "b":
        return np.bool_(largest)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return dtype.type(info.max if largest else info.min)
    return dtype.type(np.inf if largest else -np.inf)


def combine(op: str, terms: Sequence[np.ndarray]) -> np.ndarray:
    """Partial terms reduced as dmesh's collectives reduce them (dtype kept, NaN propagated)."""
    with np.errstate(all="ignore"):
        return _combine(op, np.stack([np.asarray(t) for t in terms]), len(terms))


def _combine(op: str, stack: np.ndarray, k: int) -> np.ndarray:
    dtype = stack.dtype
    if op == "avg":
        wide = np.float64 if dtype.kind in "biu" else np.float32 if dtype == np.float16 else dtype
        total = np.add.reduce(stack, axis=0, dtype=wide) / k
        return np.asarray(total.astype(dtype))  # a DArray keeps its dtype
    if dtype.kind == "b":  # MPI's bool ops are logical: sum/max are or, prod/min are and
        ufunc = np.logical_or if op in ("sum", "max") else np.logical_and
        return np.asarray(ufunc.reduce(stack, axis=0))
    ufunc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    return np.asarray(ufunc.reduce(stack, axis=0, dtype=dtype))


def _terms(x: Any, op: str, k: int, draw: Draw) -> list[Any]:
    """``k`` partial terms of the global value ``x`` under ``op``."""
    x = np.asarray(x)
    forms = [] if op == "avg" else ["holder"]
    if op in ("max", "min", "avg") or (op in ("sum", "prod") and x.dtype.kind == "b"):
        forms.append("everyone")  # (a bool sum or product is a logical or/and)
    if op == "sum" and x.dtype.kind in "iuf":
        forms.append("split")
    form = draw("partial form", forms)
    if form == "everyone":
        return [x.copy() for _ in range(k)]
    if form == "split":  # arbitrary terms and a last one that makes up the rest
        with np.errstate(all="ignore"):
            rest = [
                np.full_like(x, 0.25 * r if x.dtype.kind == "f" else r + 1) for r in range(k - 1)
            ]
            last = x - sum(rest, np.zeros_like(x)) if rest else x
        return [*rest, np.asarray(last, dtype=x.dtype)]
    holder = draw("holder", list(range(k)))
    fill = identity(op, x.dtype)
    return [x.copy() if r == holder else np.full_like(x, fill) for r in range(k)]


def _cuts(n: int, k: int, draw: Draw) -> list[int]:
    """``k + 1`` cut points from 0 to ``n``: balanced, or uneven with empty blocks."""
    if draw("balanced", [True, False]):
        return [0, *np.cumsum([len(p) for p in np.array_split(np.arange(n), k)]).tolist()]
    inner = sorted(draw("cut", list(range(n + 1))) for _ in range(k - 1))
    return [0, *inner, n]


def _cut_key(rule: Rule, call: Call, i: int, dim: int) -> Any:
    out_dim = rule.dim_map(call)[i][dim]
    return ("out", out_dim) if out_dim is not None else ("hidden",)


def make_blocks(
    rule: Rule, call: Call, row: Row, operands: Sequence[Any], k: int, draw: Draw
) -> Blocks:
    """Each operand's ``k`` blocks under the row's input placements."""
    cuts: dict[Any, list[int]] = {}
    out = row[0]
    out_shape = rule.out_shape(call)
    if isinstance(out, Shard):
        cuts[("out", out.dim)] = _cuts(out_shape[out.dim], k, draw)
    blocks: list[list[Any]] = []
    for i, (x, placement) in enumerate(zip(operands, row[1:], strict=True)):
        if not call.darray[i] or isinstance(placement, Replicate):
            blocks.append([x] * k)
        elif isinstance(placement, Shard):
            n = np.shape(x)[placement.dim]
            key = _cut_key(rule, call, i, placement.dim)
            if key not in cuts:
                cuts[key] = _cuts(n, k, draw)
            cut = cuts[key]
            if cut[-1] != n:
                raise RowMismatchError(
                    f"operand {i} dim {placement.dim} has length {n}, cuts {cut}"
                )
            index = [slice(None)] * np.ndim(x)
            pieces = []
            for r in range(k):
                index[placement.dim] = slice(cut[r], cut[r + 1])
                pieces.append(np.asarray(x)[tuple(index)])
            blocks.append(pieces)
        elif isinstance(placement, Partial):
            blocks.append(_terms(x, placement.op, k, draw))
        else:  # pragma: no cover - every placement kind is handled above
            raise RowMismatchError(f"unknown placement {placement!r}")
    return Blocks(k, cuts, blocks)


def numpy_result(func: Callable[[], Any]) -> Any:
    """NumPy's answer, warnings silenced (domain errors give NaN, as they should)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return func()


def _gather(out: Placement, results: list[np.ndarray], blocks: Blocks) -> np.ndarray:
    if isinstance(out, Shard):
        cut = blocks.cuts[("out", out.dim)]
        for r, block in enumerate(results):
            if block.ndim <= out.dim or block.shape[out.dim] != cut[r + 1] - cut[r]:
                raise RowMismatchError(
                    f"rank {r}'s block has shape {block.shape}; Shard({out.dim}) with cuts "
                    f"{cut} needs {cut[r + 1] - cut[r]} along dim {out.dim}"
                )
        return np.concatenate(results, axis=out.dim)
    if isinstance(out, Partial):
        return combine(out.op, results)
    first = results[0]
    for r, block in enumerate(results[1:], 1):
        same = block.shape == first.shape and block.dtype == first.dtype
        if not same or not np.array_equal(block, first, equal_nan=block.dtype.kind in "fc"):
            raise RowMismatchError(f"Replicate() output differs between ranks 0 and {r}")
    return first


def check_row(
    rule: Rule,
    func: Any,
    call: Call,
    row: Row,
    operands: Sequence[Any],
    expected: np.ndarray,
    k: int,
    draw: Draw,
) -> None:
    """Simulate ``row`` on ``k`` ranks and compare with ``expected`` (raises if they differ)."""
    if _refused(row, operands, expected):
        return  # DArraySpec refuses such a DArray: it cannot occur
    blocks = make_blocks(rule, call, row, operands, k, draw)
    run = rule.specialize(call) if rule.specialize is not None else rule.run
    results = []
    for r in range(k):
        mine = [pieces[r] for pieces in blocks.operands]
        if run is not None:
            result = numpy_result(lambda mine=mine: run(func, list(mine), call))  # type: ignore[misc]
        else:
            result = numpy_result(lambda mine=mine: func(*mine))
        results.append(np.asarray(result))
    got = _gather(row[0], results, blocks)
    problem = compare(got, np.asarray(expected))
    if problem:
        raise RowMismatchError(
            f"{rule.name} row {_show(row)} on {k} ranks, cuts {blocks.cuts}: {problem}\n"
            f"  got      {got!r}\n  expected {np.asarray(expected)!r}"
        )


def compare(got: np.ndarray, expected: np.ndarray) -> str:
    """Why ``got`` is not NumPy's ``expected`` ('' when it is)."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"shape/dtype {got.shape} {got.dtype} != {expected.shape} {expected.dtype}"
    if got.dtype.kind not in "fc":
        return "" if np.array_equal(got, expected) else "values differ"
    if got.dtype.kind == "c":  # which part of a non-finite complex is NaN depends on the order
        finite = np.isfinite(expected)  # of operations (BLAS or not): compare where it is finite
        if not np.array_equal(np.isfinite(got), finite):
            return "non-finite values in different places"
        return _close(got[finite], expected[finite])
    if not np.array_equal(np.isnan(got), np.isnan(expected)):
        return "NaN in different places"
    finite = np.isfinite(expected)
    if not np.array_equal(
        got[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)]
    ):
        return "infinities differ"
    if not np.array_equal(np.isfinite(got), finite):
        return "finite values where NumPy has infinities, or the reverse"
    return _close(got[finite], expected[finite])


def _close(got: np.ndarray, expected: np.ndarray) -> str:
    """Finite values equal to rounding: relative to their dtype and the largest magnitude."""
    rtol = {2: 1e-2, 4: 1e-4, 8: 1e-9}[np.finfo(got.dtype).bits // 8]
    scale = np.max(np.abs(expected), initial=1.0)
    if not np.allclose(got, expected, rtol=rtol, atol=rtol * scale):
        return "values differ beyond rounding"
    return ""


def _refused(row: Row, operands: Sequence[Any], expected: Any) -> bool:
    """Whether the row holds a partial no DArray may hold: max/min of complex, avg of integers."""
    values = [expected, *operands]
    for p, x in zip(row, values):
        kind = np.asarray(x).dtype.kind
        if isinstance(p, Partial) and (
            (p.op in ("max", "min") and kind == "c") or (p.op == "avg" and kind in "biu")
        ):
            return True
    return False


def _show(row: Row) -> str:
    return "(" + ", ".join(repr(p) for p in row) + ")"
