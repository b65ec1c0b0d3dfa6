"""``np.searchsorted``, ``np.digitize`` and ``np.isin`` of DArrays.

The sorted array (``searchsorted``'s ``a``, ``digitize``'s bins, ``isin``'s test
elements once sample-sorted) may be sharded: each query is answered by the one
block that owns it (:func:`dmesh.ops.kernels.routing.route`: a few numbers per
rank, and each query and its answer sent once). The queries may be sharded,
replicated or a NumPy value; the result has the queries' layout. When the sorted
array is not sharded, each rank answers its own queries with NumPy (no message).

``searchsorted`` counts the elements below (or at most) each query; with a
sorted ``a`` that count is the owning block's offset plus its local count,
which is NumPy's answer (NumPy requires ``a`` sorted and orders NaN last, as
the routing does).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

import dmesh.collectives as coll
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError
from dmesh.convert import blocks_on_host, blocks_to
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.kernels.routing import as_replicated, owner_comm, route
from dmesh.ops.kernels.sort import _sort
from dmesh.ops.registry import decompose


def _mesh(*values: Any) -> Any:
    return next(v.mesh for v in values if isinstance(v, DArray))


def _queries_like(v: DArray, answers: np.ndarray) -> DArray:
    """This rank's ``answers`` (one per element of ``v``'s block) in ``v``'s layout."""
    local = answers.reshape(np.shape(v.local))
    return DArray(local, DArraySpec(v.mesh, v.spec.layout, local.dtype))


def _flat_block(v: DArray) -> np.ndarray:
    return np.asarray(v.local).reshape(-1)


def _search(a: DArray, v: DArray, side: str) -> DArray:
    """``np.searchsorted(a, v, side)``: ``a`` 1-D and sorted, both without partial terms."""
    if not v.mesh.is_member:
        return _queries_like(v, np.empty(0, np.intp))

    def count(block: np.ndarray, offset: int, queries: np.ndarray) -> np.ndarray:
        return offset + np.searchsorted(block, queries, side=side)  # type: ignore[call-overload, no-any-return]

    return _queries_like(v, route(a, _flat_block(v), count, side, np.intp))


def _check_side(side: Any) -> str:
    if side not in ("left", "right"):
        raise ArgumentError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    return str(side)


def _sorted_operand(a: Any, mesh: Any, what: str) -> DArray:
    array = as_replicated(a, mesh)
    if array.ndim != 1:
        raise ArgumentError(f"{what} must be 1-D; got shape {array.shape}")
    return array


@decompose(np.searchsorted)
def searchsorted(a: Any, v: Any, side: Any = "left", sorter: Any = None) -> DArray:
    """``np.searchsorted`` with DArrays: a sharded sorted ``a`` and/or sharded queries ``v``.

    Collective when ``a`` is sharded; the result has ``v``'s layout (intp).
    ``sorter`` is applied first as ``np.take(a, sorter)`` (a distributed take
    when either is a DArray).
    """
    side = _check_side(side)
    mesh = _mesh(a, v, sorter)
    if sorter is not None:
        if not isinstance(a, DArray):
            a = as_replicated(a, mesh)
        if np.ndim(sorter) != 1 or np.shape(sorter)[0] != a.shape[0]:
            raise ArgumentError(
                f"searchsorted: sorter must be 1-D of a's length {a.shape[0]}; "
                f"got shape {np.shape(sorter)}"
            )
        a = np.take(a, sorter)
    host_a, _ = blocks_on_host(_sorted_operand(a, mesh, "searchsorted: a"))
    host_v, xp = blocks_on_host(as_replicated(v, mesh))
    result: DArray = blocks_to(_search(host_a, host_v, side), xp)
    return result


def _monotonicity(bins: DArray) -> int:
    """NumPy's ``_monotonicity`` of 1-D ``bins``: 1 rising, -1 falling, 0 neither (collective).

    NumPy skips the leading equal values; the first unequal pair decides the
    direction (rising if ``b[i] < b[i+1]``, else falling, NaN included); then
    a rising sequence fails on any pair with ``b[i] > b[i+1]``, a falling one
    on any with ``b[i] < b[i+1]``. Each block reports its first and last value
    and these facts about its own pairs; every rank adds the pairs across
    block edges and decides alike.
    """
    block = np.asarray(bins.local)
    lo, hi = block[:-1], block[1:]
    unequal = np.flatnonzero(~(lo == hi))
    facts = np.array(
        [
            block.size > 0,
            unequal.size > 0,
            bool(unequal.size) and bool(lo[unequal[0]] < hi[unequal[0]]),
            bool(np.any(lo > hi)),
            bool(np.any(lo < hi)),
        ],
        dtype=np.int64,
    )
    _, comm = owner_comm(bins)
    ends = block[[0, -1]] if block.size else np.zeros(2, block.dtype)
    if comm is not None:
        facts = coll.all_gather(facts, 0, comm, sizes=[5] * comm.Get_size()).reshape(-1, 5)
        ends = coll.all_gather(ends, 0, comm, sizes=[2] * comm.Get_size()).reshape(-1, 2)
    else:
        facts, ends = facts.reshape(1, 5), ends.reshape(1, 2)
    first_rising: bool | None = None  # the direction of the first unequal pair
    any_fall = any_rise = False
    previous = None
    for q in np.flatnonzero(facts[:, 0]).tolist():
        if previous is not None:  # the pair across the edge comes before the block's own
            x, y = previous, ends[q, 0]
            if first_rising is None and x != y:
                first_rising = bool(x < y)
            any_fall, any_rise = any_fall or bool(x > y), any_rise or bool(x < y)
        if first_rising is None and facts[q, 1]:
            first_rising = bool(facts[q, 2])
        any_fall, any_rise = any_fall or bool(facts[q, 3]), any_rise or bool(facts[q, 4])
        previous = ends[q, 1]
    if first_rising is None:
        return 1
    if first_rising:
        return 0 if any_fall else 1
    return 0 if any_rise else -1


@decompose(np.digitize)
def digitize(x: Any, bins: Any, right: Any = False) -> DArray:
    """``np.digitize`` with DArrays: ``x`` and/or ``bins`` sharded (collective when bins are).

    The monotonicity check is NumPy's, made from each block's ends and a few
    flags; falling bins are flipped (``np.flip``) and searched, as NumPy does.
    """
    mesh = _mesh(x, bins)
    xs = as_replicated(x, mesh)
    if xs.dtype.kind == "c":
        raise ArgumentTypeError("digitize: x may not be complex")
    b = _sorted_operand(bins, mesh, "digitize: bins")
    host_b, _ = blocks_on_host(b)
    host_x, xp = blocks_on_host(xs)
    mono = _monotonicity(host_b) if host_b.mesh.is_member else 1
    if mono == 0:
        raise ArgumentError("digitize: bins must be monotonically increasing or decreasing")
    side = "left" if right else "right"  # backwards: the arguments are swapped, as NumPy's
    if mono == 1:
        result = _search(host_b, host_x, side)
    else:
        found = _search(blocks_on_host(np.flip(b))[0], host_x, side)
        result = _queries_like(found, b.shape[0] - np.asarray(found.local))
    out: DArray = blocks_to(result, xp)
    return out


_KINDS = (None, "sort", "table")


@decompose(np.isin)
def isin(element: Any, test_elements: Any, assume_unique: Any = False, invert: Any = False, *,
         kind: Any = None) -> DArray:  # fmt: skip
    """``np.isin`` with DArrays; the result has ``element``'s layout (bool).

    Test elements that are not sharded (a NumPy array, a replicated DArray):
    each rank runs NumPy's ``isin`` on its block, no message. Sharded ones are
    sample-sorted (flattened), and each element is looked up by the block
    that owns its value (collective). ``assume_unique`` only lets NumPy skip
    work, so the sharded path ignores it; ``kind`` is checked as NumPy does.
    """
    if kind not in _KINDS:
        raise ArgumentError(f"isin: invalid kind {kind!r}; use None, 'sort' or 'table'")
    mesh = _mesh(element, test_elements)
    queries = as_replicated(element, mesh)
    tests = as_replicated(test_elements, mesh)
    if kind == "table" and not all(t.dtype.kind in "uib" for t in (queries, tests)):
        raise ArgumentError(
            "isin: the 'table' method is only supported for boolean or integer arrays "
            f"(got {queries.dtype} and {tests.dtype}); use kind='sort' or None"
        )
    if kind == "table" and tests.size and any(p.is_shard() for p in tests.placements):
        # NumPy refuses a table whose range overflows the test elements' dtype (RuntimeError).
        low, high = int(np.min(tests)), int(np.max(tests))
        if tests.dtype.kind != "b" and high - low > np.iinfo(tests.dtype).max:
            raise RuntimeError(
                "isin: kind='table', but the range of the test elements exceeds the maximum "
                f"integer of {tests.dtype}; use kind=None or 'sort'"
            )
    invert = bool(operator.truth(invert))
    host_q, xp = blocks_on_host(queries)
    host_t, _ = blocks_on_host(tests)
    if not host_q.mesh.is_member:
        return blocks_to(_queries_like(host_q, np.empty(0, bool)), xp)  # type: ignore[no-any-return]
    if not any(p.is_shard() for p in host_t.placements):  # each rank has every test element
        local = np.isin(np.asarray(host_q.local), np.asarray(host_t.local), assume_unique,
                        invert, kind=kind)  # fmt: skip
        return blocks_to(_queries_like(host_q, local), xp)  # type: ignore[no-any-return]
    ordered = _sort(np.ravel(host_t), 0, None)

    def member(block: np.ndarray, offset: int, received: np.ndarray) -> np.ndarray:
        # NumPy's own isin on the owner: its lookup table for integers (kind=None) is far
        # faster than a binary search of each query in the sorted block.
        return np.isin(received, block, assume_unique=assume_unique, invert=invert, kind=kind)

    answers = route(ordered, _flat_block(host_q), member, "right", bool)
    return blocks_to(_queries_like(host_q, answers), xp)  # type: ignore[no-any-return]
