"""Contractions (``matmul``, ``dot``, ``inner``, ``outer``, ``einsum``): rules from subscripts.

One generator (DTensor's ``_matrix_ops`` idea): for subscripts such as
``ij,jk->ik``, each index once per operand, on one mesh dimension,

* everything replicated;
* for each index kept in the output: the output is sharded on it and every
  operand that has it is sharded on it too (the others are replicated);
  ``S(0), R -> S(0)`` is the row-sharded product, ``R, S(1) -> S(1)`` the
  column-sharded one;
* for each contracted index that **every** operand has: every operand is
  sharded on it and the output is ``Partial("sum")`` (the contraction-sharded
  product). Each rank sums the products of its block of the index (an empty
  block sums to 0), so the terms add up to the global sum whatever the
  values, inf and NaN included.

Two rows that look linear are not offered, because they are wrong for
non-finite values. A ``Partial("sum")`` operand times replicated others: the
terms of a partial value are often 0 (a rank whose block of a reduced axis
is empty holds the identity), and ``0 * inf`` is NaN where NumPy, multiplying
the reduced value, gets inf; partial operands are reduced first. And a
contracted index that some operand lacks (``ij,k->k``'s ``i``): a rank's
kernel may sum it out before multiplying (einsum's optimized paths do),
which is the same partial-times-replicated product inside one rank.

Combined over mesh dims the rows give the 2-D-mesh block products; the cost
model chooses among them. Operands a row cannot take as they are are
rewritten by ``parse`` first: ``outer`` flattens operands that are not 1-D
(``np.ravel``, as NumPy does), ``einsum`` replaces an operand with a
repeated index (``ii->i``, ``iij->j``) by its diagonal (:func:`take_diagonal`).
Operands that cut a contracted index at different places are aligned by
propagation.

Locally, ``einsum`` runs NumPy's default loop, which multiplies before it
sums, except for two operands sharing every contracted index whose product
has at least ``LOOP_BELOW`` terms (the same products either way, so BLAS
through ``optimize=True``) or when the caller passes ``optimize=``. NumPy's
own answers for inf times an index summed out of one operand depend on its
loop (and on the block shapes), so such einsums match NumPy for finite
values only. A repeated call's parse is a lookup by subscripts and specs.
"""

from __future__ import annotations

import math
import string
from collections import Counter
from typing import Any

import numpy as np

from dmesh.collectives.device import array_module
from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.layout import Layout, sharding_mesh_dims
from dmesh.core.placement import Partial, Placement, Replicate, Shard
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import Call, Row, register

__all__ = [
    "broadcast_loops", "call_dims", "call_rows", "call_shape", "checked", "einsum_dims",
    "einsum_rows", "einsum_shape", "flatten", "gufunc_subscripts", "ndim_of", "parse_binary",
    "parse_subscripts", "shape_of", "take_diagonal",
]  # fmt: skip

R = Replicate()


def einsum_rows(inputs: tuple[str, ...], output: str) -> list[Row]:
    """Single-mesh-dim rows for ``inputs -> output`` subscripts (each index once per operand)."""
    rows: list[Row] = [(R,) * (len(inputs) + 1)]
    letters = dict.fromkeys("".join(inputs))
    for letter in letters:
        operands = tuple(Shard(term.index(letter)) if letter in term else R for term in inputs)
        if letter in output:
            rows.append((Shard(output.index(letter)), *operands))
        elif all(letter in term for term in inputs):  # see the module docstring
            rows.append((Partial("sum"), *operands))
    return rows


def einsum_shape(
    inputs: tuple[str, ...], output: str, shapes: tuple[tuple[int, ...], ...]
) -> tuple[int, ...]:
    """Output shape of an einsum with these subscripts and operand shapes."""
    sizes: dict[str, int] = {}
    for term, shape in zip(inputs, shapes):
        for letter, n in zip(term, shape):
            if sizes.setdefault(letter, n) != n:
                raise ArgumentError(
                    f"operands do not match: index {letter!r} has lengths {sizes[letter]} and {n}"
                )
    return tuple(sizes[letter] for letter in output)


def einsum_dims(inputs: tuple[str, ...], output: str) -> tuple[tuple[int | None, ...], ...]:
    """For each operand, the output dim of each of its dims (None: contracted)."""
    return tuple(tuple(output.index(c) if c in output else None for c in term) for term in inputs)


def shape_of(x: Any) -> tuple[int, ...]:
    """Shape of an operand: a DArray's global shape, else NumPy's (``()`` for a scalar)."""
    return x.shape if isinstance(x, DArray) else tuple(np.shape(x))


def ndim_of(x: Any) -> int:
    """Dims of an operand: a DArray's, else NumPy's (0 for a Python scalar)."""
    return x.ndim if isinstance(x, DArray) else int(np.ndim(x))


def flatten(x: Any) -> Any:
    """``x`` as a 1-D operand (``np.ravel``; a DArray's may redistribute); scalars as they are."""
    if isinstance(x, DArray) and x.ndim != 1:
        return np.ravel(x)
    if not isinstance(x, DArray) and np.ndim(x) > 1:
        return np.ravel(x)
    return x


def parse_subscripts(subscripts: str, ndims: tuple[int, ...]) -> tuple[tuple[str, ...], str]:
    """Input and output subscripts of ``np.einsum`` for operands of ``ndims`` dims, checked.

    Without ``->`` the output is NumPy's implicit one: the indices that occur
    once, in alphabetical (ASCII) order, so ``"ii"`` is a trace.
    """
    text = subscripts.replace(" ", "")
    if "." in text:
        raise UnsupportedError(
            f"np.einsum({subscripts!r}) on DArrays: ellipsis ('...') subscripts are not "
            "supported; write every index out, e.g. 'ij,jk->ik'"
        )
    left, arrow, output = text.partition("->")
    inputs = tuple(left.split(","))
    if not arrow:
        counts = Counter(left.replace(",", ""))
        output = "".join(sorted(c for c, n in counts.items() if n == 1))
    letters = set(left.replace(",", "") + output)
    bad = sorted(letters - set(string.ascii_letters))
    if bad:
        raise ArgumentError(f"np.einsum({subscripts!r}): invalid subscript(s) {bad}; use letters")
    if len(inputs) != len(ndims):
        raise ArgumentError(
            f"np.einsum({subscripts!r}): {len(inputs)} subscripts for {len(ndims)} operands"
        )
    for i, (term, ndim) in enumerate(zip(inputs, ndims)):
        if len(term) != ndim:
            raise ArgumentError(
                f"np.einsum({subscripts!r}): operand {i} has {ndim} dims but subscripts {term!r}"
            )
    repeated = sorted(c for c, n in Counter(output).items() if n > 1)
    missing = sorted(set(output) - set(left))
    if repeated or missing:
        raise ArgumentError(
            f"np.einsum({subscripts!r}): output indices must occur once and appear in an "
            f"input (repeated: {repeated}, in no input: {missing})"
        )
    return inputs, output


def take_diagonal(x: Any, term: str) -> tuple[Any, str]:
    """The diagonal of ``x`` over each index repeated in ``term``, and ``term`` with each once.

    ``np.einsum("iij->ij", x)`` for a DArray: the diagonal index sits where it
    first occurs. Of the dims of a repeated index, the one sharded over the
    most blocks stays as it is and the others are replicated first (a
    row-sharded square matrix moves nothing); each rank then takes the
    diagonal of its block, whose kept dim covers global indices ``[s, t)``,
    from the other dims' indices ``[s, t)``. Taking elements commutes with
    every partial reduction, so ``Partial`` placements stay as they are.
    """
    unique = "".join(dict.fromkeys(term))
    shape = shape_of(x)
    for letter in unique:
        lengths = sorted({shape[d] for d, c in enumerate(term) if c == letter})
        if len(lengths) > 1:
            raise ArgumentError(
                f"np.einsum: the dims of index {letter!r} in {term!r} have lengths {lengths}; "
                "a repeated index takes a diagonal and needs equal lengths"
            )
    if not isinstance(x, DArray):  # a replicated plain array: NumPy's own diagonal
        return np.einsum(f"{term}->{unique}", x).copy(), unique
    layout = x.spec.layout

    def blocks(d: int) -> int:
        return math.prod(layout.mesh_shape[m] for m in sharding_mesh_dims(layout.placements, d))

    kept = {c: max((d for d, e in enumerate(term) if e == c), key=blocks) for c in unique}
    dropped = {d for d, c in enumerate(term) if kept[c] != d}
    placements = tuple(
        R if isinstance(p, Shard) and p.dim in dropped else p for p in layout.placements
    )
    bounds = tuple(None if d in dropped else cut for d, cut in enumerate(layout.bounds))
    source = Layout(layout.mesh_shape, placements, x.shape, bounds)
    moved = x.with_layout(source)  # collective; nothing moves when no dropped dim is sharded
    new_dim = {kept[c]: unique.index(c) for c in unique}
    out_placements: tuple[Placement, ...] = tuple(
        Shard(new_dim[p.dim]) if isinstance(p, Shard) else p for p in placements
    )
    out = Layout(
        layout.mesh_shape,
        out_placements,
        tuple(x.shape[kept[c]] for c in unique),
        tuple(bounds[kept[c]] for c in unique),
    )
    spec = DArraySpec(x.mesh, out, x.dtype)
    coord = x.mesh.coordinate
    if coord is None:  # outside the mesh: an empty block
        return DArray(array_module(moved.local).empty(spec.local_shape(), x.dtype), spec), unique
    block = source.block(coord)
    index = tuple(
        slice(*block[kept[c]]) if d in dropped else slice(None) for d, c in enumerate(term)
    )
    local = np.einsum(f"{term}->{unique}", moved.local[index]).copy()  # not a view of x
    return DArray(local, spec), unique


def checked(operands: list[Any], inputs: tuple[str, ...], output: str) -> list[Any]:
    """The operands, once their shapes fit the subscripts (NumPy's error otherwise, on every rank).

    A contracted index cut at different places in two operands (``a[1:]``
    against a balanced vector) is aligned by propagation, which gives every
    operand dim that maps to no output dim, sharded over the same mesh dims,
    the same boundaries (``dmesh.ops.propagation``).
    """
    einsum_shape(inputs, output, tuple(shape_of(x) for x in operands))
    return operands


def _subscripts_for(name: str, ndims: tuple[int, ...]) -> tuple[tuple[str, ...], str]:
    """Subscripts of ``matmul``/``dot``/``inner`` for operands of these ndims."""
    letters = iter(string.ascii_letters)
    a_nd, b_nd = ndims
    if name == "inner":
        shared = next(letters)
        a = "".join(next(letters) for _ in range(a_nd - 1)) + shared
        b = "".join(next(letters) for _ in range(b_nd - 1)) + shared
        return (a, b), a[:-1] + b[:-1]
    if a_nd == 0 or b_nd == 0:
        raise UnsupportedError(f"np.{name} of a 0-d operand: use multiplication")
    shared = "z"
    if name in ("dot", "matmul") and a_nd <= 2 and b_nd <= 2:
        a = ("i" if a_nd == 2 else "") + shared
        b = shared + ("k" if b_nd == 2 else "")
        return (a, b), a[:-1] + b[1:]
    if name == "matmul":  # batches, right-aligned (NumPy's broadcasting of the stack dims)
        return gufunc_subscripts(("iz", "zk"), "ik", ndims, vector=(a_nd == 1, b_nd == 1))
    raise UnsupportedError(
        f"np.{name} of operands with {a_nd} and {b_nd} dims is not supported yet "
        "(supported: 1-D and 2-D operands; use np.matmul or np.tensordot for stacks)"
    )


def gufunc_subscripts(
    cores: tuple[str, ...],
    out_core: str,
    ndims: tuple[int, ...],
    vector: tuple[bool, ...] = (),
) -> tuple[tuple[str, ...], str]:
    """Einsum subscripts of a generalized ufunc: core dims last, loop dims broadcast.

    ``cores`` are the core subscripts of each operand (``"iz"``, ``"zk"`` for
    matmul); an operand marked in ``vector`` is 1-D and takes only the last
    core index of a left operand (first of a right one), and its other core
    index leaves the output, as ``matmul`` does with a 1-D operand. The loop
    dims take letters not used by the cores, right-aligned over operands.
    """
    vector = vector or (False,) * len(cores)
    terms = list(cores)
    out = out_core
    for i, flag in enumerate(vector):
        if flag:  # (z,) @ (..., z, k) -> (..., k); (..., i, z) @ (z,) -> (..., i)
            dropped = cores[i][0] if i == 0 else cores[i][-1]
            terms[i] = cores[i].replace(dropped, "")
            out = out.replace(dropped, "")
    loops = [nd - len(t) for nd, t in zip(ndims, terms)]
    if min(loops) < 0:
        bad = next(i for i, n in enumerate(loops) if n < 0)
        raise np.linalg.LinAlgError(  # as NumPy: too few dims for the core signature
            f"operand {bad} has {ndims[bad]} dims, the core signature needs {len(terms[bad])}"
        )
    pool = [c for c in string.ascii_letters if c not in "".join(cores) + out_core]
    width = max(loops)
    if width > len(pool):
        raise UnsupportedError(f"a stack of {width} loop dims is too deep for einsum letters")
    batch = "".join(pool[:width])
    inputs = tuple(batch[width - n :] + t for n, t in zip(loops, terms))
    return inputs, batch + out


def broadcast_loops(operands: list[Any], inputs: tuple[str, ...], cores: str) -> list[Any]:
    """The operands with each loop dim of length 1 broadcast to the other operands' length.

    The einsum rows need each index to have one length; NumPy broadcasts a
    loop dim of length 1 (``(1, n, k) @ (5, k, m)``), so such an operand is
    ``np.broadcast_to`` the common length first (a DArray's stays a view of
    its blocks). Indices in ``cores`` are not loop dims; lengths that differ
    otherwise are left to :func:`einsum_shape` (NumPy's error).
    """
    sizes: dict[str, int] = {}
    for term, x in zip(inputs, operands):
        for c, n in zip(term, shape_of(x)):
            if c not in cores and n != 1:
                sizes.setdefault(c, n)
    out = []
    for term, x in zip(inputs, operands):
        shape = shape_of(x)
        target = tuple(
            sizes.get(c, n) if n == 1 and c not in cores else n for c, n in zip(term, shape)
        )
        out.append(x if target == shape else np.broadcast_to(x, target))
    return out


def parse_binary(name: str) -> Any:
    """The ``parse`` of ``np.<name>(a, b)`` (matmul, dot, inner): subscripts from the ndims."""

    def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        if len(args) != 2 or kwargs:
            raise UnsupportedError(f"np.{name} on DArrays takes two operands and no keywords")
        inputs, output = _subscripts_for(name, (ndim_of(args[0]), ndim_of(args[1])))
        operands = broadcast_loops(list(args), inputs, "izk")
        return checked(operands, inputs, output), (inputs, output)

    return parse


def _parse_outer(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Any], tuple[Any, ...]]:
    """``np.outer(a, b)``: both flattened, so the rule sees 1-D operands (or scalars)."""
    if len(args) != 2 or kwargs:
        raise UnsupportedError("np.outer on DArrays takes two operands and no keywords (no out=)")
    operands = [flatten(x) for x in args]
    inputs = tuple(c if ndim_of(x) else "" for c, x in zip("ab", operands))
    return operands, (inputs, "ab")


def _outer_shape(call: Call) -> tuple[int, ...]:
    # A scalar operand counts as one element, as NumPy's ravel makes it.
    return tuple(shape[0] if shape else 1 for shape in call.shapes)


LOOP_BELOW = 1 << 15  # terms of a product (its indices' lengths multiplied): see _parse_einsum
# (subscripts, optimize=, its type, operand specs) -> the static part of a call seen before
# on DArrays that need no diagonal (its checks hold for the same shapes). Bounded: specs
# hold meshes.
_parsed: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _parse_einsum(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Any], tuple[Any, ...]]:
    optimize = kwargs.get("optimize", False) if kwargs else False
    try:  # a call seen before is a lookup
        key: Any = (args[0], optimize, type(optimize), *[x._spec for x in args[1:]])
        static = _parsed.get(key)
    except (IndexError, AttributeError, TypeError):  # no subscripts, a plain operand, a list
        key = static = None
    if static is not None and len(kwargs) == ("optimize" in kwargs):  # (none or optimize=)
        return list(args[1:]), static
    if set(kwargs) - {"optimize"} or optimize not in (False, True, "greedy", "optimal"):
        raise UnsupportedError(
            f"np.einsum on DArrays takes optimize=False, True, 'greedy' or 'optimal' and no "
            f"other keywords (got {kwargs})"
        )
    if not args or not isinstance(args[0], str):
        raise UnsupportedError(
            "np.einsum on DArrays needs the subscripts as a string first, "
            "e.g. np.einsum('ij,jk->ik', a, b) (the sublist form is not supported)"
        )
    operands = list(args[1:])
    inputs, output = parse_subscripts(args[0], tuple(ndim_of(x) for x in operands))
    einsum_shape(inputs, output, tuple(shape_of(x) for x in operands))  # before any diagonal
    terms = list(inputs)
    for i, term in enumerate(inputs):
        if len(set(term)) < len(term):  # a repeated index: the rows need each once
            operands[i], terms[i] = take_diagonal(operands[i], term)
    # An optimized path may sum an index out of one operand, or contract a pair,
    # before multiplying by the rest: with inf, 0 * inf = NaN (or the reverse)
    # where NumPy's default loop, which multiplies first, gives another answer.
    # Two operands sharing every contracted index make the same products
    # either way, so they take BLAS unasked where the product is large (below
    # LOOP_BELOW terms the loop costs less than planning a path, and gives
    # NumPy's own bits); others only when asked.
    contracted = set("".join(terms)) - set(output)
    pairwise = len(terms) == 2 and all(c in terms[0] and c in terms[1] for c in contracted)
    lengths = {c: n for term, x in zip(terms, operands) for c, n in zip(term, shape_of(x))}
    optimize = optimize or (pairwise and math.prod(lengths.values()) >= LOOP_BELOW)
    static = (tuple(terms), output, optimize)
    operands = checked(operands, tuple(terms), output)
    if key is not None and terms == list(inputs) and all(type(x) is DArray for x in operands):
        if len(_parsed) >= 1024:
            _parsed.clear()
        _parsed[key] = static
    return operands, static


def _run_einsum(func: Any, blocks: list[Any], call: Call) -> Any:
    inputs, output, optimize = call.static
    # Over an empty block of a contracted index the sum is 0, but an
    # optimized path may first sum one operand out and multiply that 0 by
    # inf; the plain loop, with nothing to iterate, gives the 0 directly.
    if optimize and any(
        n == 0 and c not in output
        for term, block in zip(inputs, blocks)
        for c, n in zip(term, np.shape(block))
    ):
        optimize = False
    return np.einsum(",".join(inputs) + "->" + output, *blocks, optimize=optimize)


def call_rows(call: Call) -> list[Row]:
    """:func:`einsum_rows` of a call whose ``static`` starts with ``(inputs, output)``."""
    return einsum_rows(*call.static[:2])


def call_shape(call: Call) -> tuple[int, ...]:
    """:func:`einsum_shape` of a call whose ``static`` starts with ``(inputs, output)``."""
    inputs, output = call.static[:2]
    return einsum_shape(inputs, output, call.shapes)


def call_dims(call: Call) -> tuple[tuple[int | None, ...], ...]:
    """:func:`einsum_dims` of a call whose ``static`` starts with ``(inputs, output)``."""
    return einsum_dims(*call.static[:2])


_BINARY = (("matmul", np.matmul), ("dot", np.dot), ("inner", np.inner))
for _name, _func in _BINARY:
    # run=None: the blocks of every row are valid operands of the function
    # itself (BLAS for matmul/dot), whose local result is the output block.
    register(_func, name=f"contraction.{_name}", out_shape=call_shape, parse=parse_binary(_name),
             dim_map=call_dims)(call_rows)  # fmt: skip
register(np.outer, name="contraction.outer", out_shape=_outer_shape, parse=_parse_outer,
         dim_map=call_dims)(call_rows)  # fmt: skip
register(np.einsum, name="contraction.einsum", out_shape=call_shape, parse=_parse_einsum,
         run=_run_einsum, dim_map=call_dims)(call_rows)  # fmt: skip
