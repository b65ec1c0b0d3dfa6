"""Contractions (``matmul``, ``dot``, ``inner``, ``outer``, ``einsum``): rules from subscripts.

One generator (DTensor's ``_matrix_ops`` idea): for subscripts such as
``ij,jk->ik``, on one mesh dimension,

* everything replicated;
* for each index kept in the output: the output is sharded on it and every
  operand that has it is sharded on it too (the others are replicated);
  ``S(0), R -> S(0)`` is the row-sharded product, ``R, S(1) -> S(1)`` the
  column-sharded one;
* for each contracted index: every operand that has it is sharded on it and
  the output is ``Partial("sum")`` (the contraction-sharded product);
* a product is linear in each operand: one ``Partial("sum")`` operand with the
  others replicated gives a partial output.

Combined over mesh dims these give the 2-D-mesh block products; the cost
model chooses among them.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from dmesh.collectives.errors import ArgumentError, UnsupportedError
from dmesh.core.placement import Partial, Replicate, Shard
from dmesh.ops.registry import Call, Row, register

R = Replicate()


def einsum_rows(inputs: tuple[str, ...], output: str) -> list[Row]:
    """Single-mesh-dim rows for ``inputs -> output`` subscripts."""
    rows: list[Row] = [(R,) * (len(inputs) + 1)]
    letters = dict.fromkeys("".join(inputs))
    for letter in letters:
        operands = tuple(Shard(term.index(letter)) if letter in term else R for term in inputs)
        if letter in output:
            rows.append((Shard(output.index(letter)), *operands))
        else:
            rows.append((Partial("sum"), *operands))
    p = Partial("sum")
    for i in range(len(inputs)):
        rows.append((p, *(p if j == i else R for j in range(len(inputs)))))
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


def _subscripts_for(name: str, ndims: tuple[int, ...]) -> tuple[tuple[str, ...], str]:
    """Subscripts of ``matmul``/``dot``/``inner``/``outer`` for operands of these ndims."""
    letters = iter(string.ascii_letters)
    if name == "outer":
        a = "".join(next(letters) for _ in range(ndims[0]))
        b = "".join(next(letters) for _ in range(ndims[1]))
        return (a, b), a + b
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
    if name == "matmul" and a_nd == b_nd:
        batch = "".join(next(letters) for _ in range(a_nd - 2))
        return (batch + "iz", batch + "zk"), batch + "ik"
    raise UnsupportedError(
        f"np.{name} of operands with {a_nd} and {b_nd} dims is not supported yet "
        "(supported: 1-D and 2-D operands, and matmul of equal-rank batches)"
    )


def _parse_binary(name: str) -> Any:
    def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        if len(args) != 2 or kwargs:
            raise UnsupportedError(f"np.{name} on DArrays takes two operands and no keywords")
        ndims = tuple(int(getattr(x, "ndim", 0)) for x in args)
        inputs, output = _subscripts_for(name, ndims)
        return list(args), (inputs, output)

    return parse


def _parse_einsum(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Any], tuple[Any, ...]]:
    if not args or not isinstance(args[0], str) or "->" not in args[0] or "." in args[0] or kwargs:
        raise UnsupportedError(
            "np.einsum on DArrays needs explicit subscripts with '->' (no '...', no keywords)"
        )
    left, output = args[0].replace(" ", "").split("->")
    inputs = tuple(left.split(","))
    if len(inputs) != len(args) - 1:
        raise ArgumentError(f"np.einsum: {len(inputs)} subscripts for {len(args) - 1} operands")
    return list(args[1:]), (inputs, output)


def _run_einsum(func: Any, blocks: list[Any], call: Call) -> Any:
    # optimize=True lets einsum hand pairwise contractions to BLAS (tensordot).
    inputs, output = call.static
    return np.einsum(",".join(inputs) + "->" + output, *blocks, optimize=True)


def _rows(call: Call) -> list[Row]:
    return einsum_rows(*call.static)


def _shape(call: Call) -> tuple[int, ...]:
    inputs, output = call.static
    return einsum_shape(inputs, output, call.shapes)


def _dims(call: Call) -> tuple[tuple[int | None, ...], ...]:
    return einsum_dims(*call.static)


_BINARY = (("matmul", np.matmul), ("dot", np.dot), ("inner", np.inner), ("outer", np.outer))
for _name, _func in _BINARY:
    # run=None: the blocks of every row are valid operands of the function
    # itself (BLAS for matmul/dot), whose local result is the output block.
    register(_func, name=f"contraction.{_name}", out_shape=_shape, parse=_parse_binary(_name),
             dim_map=_dims)(_rows)  # fmt: skip
register(np.einsum, name="contraction.einsum", out_shape=_shape, parse=_parse_einsum,
         run=_run_einsum, dim_map=_dims)(_rows)  # fmt: skip
