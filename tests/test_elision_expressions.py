"""Generated arithmetic expressions with temporaries: elision reuses blocks, never a value.

Temporary elision is on by default: in ``(a * b + c) / (a - 2.0)`` the
blocks of ``a * b`` and of the sum may hold later results. Each generated
expression is compiled from source (so its operators are the interpreter's
own ``BINARY_OP`` instructions, as in user code) and run on DArrays whose
blocks are big enough to be offered (``dmesh._elision.ELIDE_BYTES``), then
compared with the same expression on NumPy bit for bit; the named operands
must be unchanged afterwards, whatever was reused. Derandomized
(tests/conftest.py): every rank draws the same expressions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard, _elision
from helpers import assert_equal_all

WORLD = MPI.COMM_WORLD.Get_size()
N = _elision.ELIDE_BYTES // 8 * WORLD + 3  # float64 blocks at the elision size, uneven
NAMES = ("a", "b", "c")
OPERATORS = ("+", "-", "*", "/")


def expressions(depth: int = 3) -> st.SearchStrategy[str]:
    leaves = st.sampled_from([*NAMES, "2.0", "0.5", "-3.0"])

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.builds(
            lambda x, op, y: f"({x} {op} {y})", inner, st.sampled_from(OPERATORS), inner
        )

    return st.recursive(leaves, extend, max_leaves=2**depth).filter(
        lambda text: any(name in text for name in NAMES)
    )


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    values = {name: rng.standard_normal(N) for name in NAMES}
    values["a"][:4] = [np.nan, np.inf, -0.0, 1e308]
    values["b"][:4] = [1.0, -np.inf, 0.0, 1e308]
    return values


@given(text=expressions())
def test_generated_expressions(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, text: str) -> None:
    code = compile(text, "<expression>", "eval")
    plain = inputs()
    shard = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    arrays: dict[str, Any] = {k: dmesh.distribute(v, mesh, shard) for k, v in plain.items()}
    with np.errstate(all="ignore"):
        want = eval(code, {}, dict(plain))
        for _ in range(2):  # the first call decides, the second takes donations
            got = eval(code, {}, arrays)
    assert_equal_all(comm, got.full_array(), want)
    for name in NAMES:  # operands with names are never reused
        assert_equal_all(comm, arrays[name].full_array(), plain[name])
