"""Contractions (``matmul``, ``dot``, ``inner``, ``outer``, ``vdot``, ``tensordot``,
``einsum``): which strategy dmesh picks, and what it sends (pure).

Every contraction is an einsum to dmesh, with one generator of rows per mesh
dim (``dmesh.ops.rules.contractions``): everything replicated; for each
output index, the output and every operand that has it sharded on it (the
others replicated); for each contracted index that every operand has, every
operand sharded on it and the output ``Partial("sum")``. Dispatch combines
the rows over the mesh dims and prices each combination by what moving the
operands there costs (``dmesh.core.plan.estimate_cost``: per step, the bytes
per rank plus ``LATENCY_BYTES = 10 kB``, a local slice 1), the cheapest
first, ties to the first row (replicated, then the indices in order of
appearance). The result's later reduction is not priced: a partial result
costs nothing until its value is needed.

:func:`contraction_strategy` gives the choice, :func:`contraction` the
traffic: each operand's redistribution in operand order (slices are free),
the local product, then what makes the result a value (``then``, as in
:mod:`dmesh.scaling.reductions`: ``"item"``, or the placements of a
``redistribute``).
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Sequence

from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.core.plan import estimate_cost
from dmesh.scaling.reductions import Then, moved, value_calls
from dmesh.scaling.traffic import Call, Traffic, per_rank

__all__ = [
    "contraction",
    "contraction_strategy",
    "einsum_rows",
    "matmul",
    "product_subscripts",
    "tensordot_subscripts",
]

R = Replicate()


def einsum_rows(inputs: Sequence[str], output: str) -> list[tuple[Placement, ...]]:
    """dmesh's single-mesh-dim rows ``(output, *operands)`` for ``inputs -> output``."""
    rows: list[tuple[Placement, ...]] = [(R,) * (len(inputs) + 1)]
    for letter in dict.fromkeys("".join(inputs)):
        operands = tuple(Shard(t.index(letter)) if letter in t else R for t in inputs)
        if letter in output:
            rows.append((Shard(output.index(letter)), *operands))
        elif all(letter in t for t in inputs):
            rows.append((Partial("sum"), *operands))
    return rows


def _split(subscripts: str) -> tuple[tuple[str, ...], str]:
    left, _, output = subscripts.replace(" ", "").partition("->")
    return tuple(left.split(",")), output


def _output_shape(
    inputs: Sequence[str], output: str, shapes: Sequence[Sequence[int]]
) -> tuple[int, ...]:
    sizes = {c: n for term, shape in zip(inputs, shapes) for c, n in zip(term, shape)}
    return tuple(sizes[c] for c in output)


def contraction_strategy(mesh_shape: Sequence[int], subscripts: str,
                         shapes: Sequence[Sequence[int]], itemsizes: Sequence[int],
                         placements: Sequence[Sequence[Placement]]
                         ) -> tuple[Layout, list[Layout], float]:  # fmt: skip
    """The result's layout, each operand's target and the price dispatch chooses.

    ``subscripts`` is an explicit einsum (``"ij,jk->ik"``, each index once per
    operand), the operands balanced with ``placements``. For a 1-D mesh of
    ``p`` ranks and ``A (m, k) @ B (k, n)`` of item sizes ``s_a, s_b``, the
    prices are ``0`` where the operands fit a row as they are (``S(0) @ R ->
    S(0)``, ``R @ S(1) -> S(1)``, ``S(1) @ S(0) -> P``), ``1`` for a slice
    (``R @ S(0)`` slices ``A`` to ``S(1)``: ``P``), and for ``S(0) @ S(0)``:
    ``L + s_a m k (p-1) / p^2`` (``A`` to ``S(1)`` by ``all_to_all``, result
    ``P``) against ``L + s_b k n (p-1) / p`` (``B`` gathered, result ``S(0)``),
    ``L = 10 kB``: ``A`` moves unless ``m > p n s_b / s_a``.
    """
    inputs, output = _split(subscripts)
    mesh = tuple(mesh_shape)
    sources = [Layout.balanced(mesh, tuple(p), tuple(s)) for p, s in zip(placements, shapes)]
    out_shape = _output_shape(inputs, output, shapes)
    best: tuple[float, Layout, list[Layout]] | None = None
    for combo in itertools.product(einsum_rows(inputs, output), repeat=len(mesh)):
        cost, targets = 0.0, []
        for i, (src, itemsize) in enumerate(zip(sources, itemsizes)):
            target = Layout.balanced(mesh, tuple(row[i + 1] for row in combo), src.shape)
            cost += 0.0 if target == src else estimate_cost(src, target, itemsize)
            targets.append(target)
        if best is None or cost < best[0]:
            result = Layout.balanced(mesh, tuple(row[0] for row in combo), out_shape)
            best = (cost, result, targets)
    assert best is not None
    return best[1], best[2], best[0]


def contraction(mesh_shape: Sequence[int], subscripts: str, shapes: Sequence[Sequence[int]],
                itemsizes: Sequence[int], placements: Sequence[Sequence[Placement]],
                result_itemsize: int, then: Then = None) -> list[Traffic]:  # fmt: skip
    """Every rank's calls for a contraction (``np.einsum(subscripts, ...)``), then ``then``.

    The operands move to :func:`contraction_strategy`'s targets, in order;
    the product is local. A ``Partial`` result (a contracted index sharded
    over ``p_m`` ranks) costs, made replicated, one ``all_reduce`` of its
    block per such mesh dim (last first): ``s m n / P_kept`` bytes in and out
    for an ``m x n`` result; made ``S(d)``, a ``reduce_scatter``.
    """
    result, targets, _ = contraction_strategy(mesh_shape, subscripts, shapes, itemsizes, placements)
    mesh = tuple(mesh_shape)
    sources = [Layout.balanced(mesh, tuple(p), tuple(s)) for p, s in zip(placements, shapes)]

    def calls(coord: tuple[int, ...]) -> list[Call]:
        out = [
            call
            for src, dst, size in zip(sources, targets, itemsizes)
            for call in moved(src, dst, size, coord)
        ]
        return out + value_calls(result, then, result_itemsize, coord)

    return per_rank(mesh_shape, calls)


def product_subscripts(name: str, ndims: Sequence[int]) -> str:
    """dmesh's einsum for ``np.matmul``/``dot`` (1-D and 2-D operands), ``inner``,
    ``outer`` (operands raveled first) and ``vdot`` (raveled, 1-D)."""
    a_nd, b_nd = ndims
    if name == "outer":
        return "a,b->ab"
    if name == "vdot":
        return "i,i->"
    if name == "inner":
        letters = iter(string.ascii_letters[1:])
        a = "".join(next(letters) for _ in range(a_nd - 1)) + "a"
        b = "".join(next(letters) for _ in range(b_nd - 1)) + "a"
        return f"{a},{b}->{a[:-1] + b[:-1]}"
    if name in ("matmul", "dot") and 1 <= a_nd <= 2 and 1 <= b_nd <= 2:
        a = ("i" if a_nd == 2 else "") + "z"
        b = "z" + ("k" if b_nd == 2 else "")
        return f"{a},{b}->{a[:-1] + b[1:]}"
    raise ValueError(f"product_subscripts: np.{name} of {a_nd}-D and {b_nd}-D operands")


def tensordot_subscripts(ndims: Sequence[int], a_axes: Sequence[int],
                         b_axes: Sequence[int]) -> str:  # fmt: skip
    """dmesh's einsum for ``np.tensordot(a, b, (a_axes, b_axes))``: the free dims of
    ``a``, then of ``b``, in order."""
    a_nd, b_nd = ndims
    letters = iter(string.ascii_letters)
    a = "".join(next(letters) for _ in range(a_nd))
    a_axes = [x % a_nd for x in a_axes]
    b_axes = [x % b_nd for x in b_axes]
    b = "".join(a[a_axes[b_axes.index(d)]] if d in b_axes else next(letters) for d in range(b_nd))
    free = "".join(c for d, c in enumerate(a) if d not in a_axes)
    free += "".join(c for d, c in enumerate(b) if d not in b_axes)
    return f"{a},{b}->{free}"


def matmul(mesh_shape: Sequence[int], a_shape: Sequence[int], b_shape: Sequence[int],
           itemsize: int, a_placements: Sequence[Placement],
           b_placements: Sequence[Placement], then: Then = None) -> list[Traffic]:  # fmt: skip
    """``a @ b`` (``np.matmul``/``np.dot``) of 1-D or 2-D operands of one dtype, then ``then``.

    :func:`contraction` with ``"iz,zk->ik"`` (a 1-D operand drops its ``i``
    or ``k``). On a 1-D mesh: ``S(0) @ R`` and ``R @ S(1)`` send nothing;
    ``S(1) @ S(0)``, ``R @ S(0)`` and ``S(1) @ R`` give ``P`` (a slice of the
    replicated operand), whose value is one ``all_reduce`` of ``s m n`` bytes;
    ``S(0) @ S(0)`` moves ``A`` by ``all_to_all`` or gathers ``B`` (see
    :func:`contraction_strategy`). On a 2-D mesh the rows combine:
    ``(S(0), R) @ (R, S(1)) -> (S(0), S(1))`` sends nothing, and
    ``(S(1), S(1))``-like layouts of a contracted index give ``P`` on each
    mesh dim that shards it.
    """
    subscripts = product_subscripts("matmul", (len(a_shape), len(b_shape)))
    return contraction(
        mesh_shape, subscripts, (a_shape, b_shape), (itemsize, itemsize),
        (a_placements, b_placements), itemsize, then,
    )  # fmt: skip
