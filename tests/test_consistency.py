"""The consistency suite, generated from the registry: every registered op has sample
inputs (tests/samples.py) and agrees with NumPy, run two ways.

- ``test_op_agrees_with_numpy``: values inside every domain, every Replicate/Shard
  placement of the first operand on each mesh dim, and Partial ones on the first
  mesh dim (dispatch reduces them where the op's rule does not take them):
  Partial("sum") and, in turn, one of max, min, prod and avg, so that each sample
  meets every kind over the meshes of one run of the suite (2, 3, 4 ranks and
  (2, 2)); dmesh refuses avg for integers and max/min for complex numbers. Then a
  first operand that is a slice of a sharded array twice as long: its blocks are
  uneven and the first or the last rank's is empty. The part cut off holds NaN (or
  the integer maximum): a value leaking from it shows.
- ``test_hostile_values``: NaN, both infinities, both zeros, negatives, values
  outside each function's domain and integer extremes, for the ops whose NumPy
  answer is well defined on them; compared NaN-aware (NaN equals NaN of either sign,
  infinities match in sign). Where values of different blocks meet, each axis
  sharded alone (on a 2-D mesh over its second mesh dim, and two axes over both);
  elementwise ops get one sharded layout; Partial operands as above.

Every result, gathered, and every Python scalar of a one-element result (``item()``,
``float()``/``complex()``, ``bool()``, ``int()``) must also be the same bits on every
rank: a reduction whose result depends on the order of its terms (a NaN's sign, a
zero's) shows. Each test agrees once, over all its checks (``BitVerdict``).
Registering an op without samples makes ``test_every_registered_op_has_samples`` fail.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI
from samples import ELEMENTWISE, HOSTILE, SAMPLES, Sample, call, key_name

import dmesh
from dmesh import Partial, Replicate, Shard
from dmesh.collectives.errors import UnsupportedError
from dmesh.core.placement import Placement
from dmesh.ops.kernels.linalg import REPLICATED_MATRIX
from dmesh.ops.registry import decompositions, registered
from helpers import BitVerdict

# BUG: dmesh.distribute(x, mesh, [Partial("avg")]) gives every rank x as its term and
# the reduction is sum / n: on 3 ranks (x + x + x) / 3 is x only to one ulp (5 of 20
# elements of uniform(0.25, 0.75) are off), so np.array_equal(p, x) is False (NumPy:
# True) and np.linalg.eig of a 1-ulp-off matrix flips eigenvectors' signs. Left out on
# mesh dims whose size is no power of two until fixed:
INEXACT_AVERAGE = {np.array_equal, np.linalg.eig}


def _same(got: np.ndarray, expected: np.ndarray) -> bool:
    """Shape, dtype and values: floats to 1e-12, NaN equal to NaN (any sign), infinities
    equal only with their sign; other dtypes exactly."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return False
    if got.dtype.kind in "fc":
        return bool(np.allclose(got, expected, rtol=1e-12, atol=1e-12, equal_nan=True))
    return bool(np.array_equal(got, expected))


def _scalars(value: Any) -> dict[str, Any]:
    """The Python scalars of a one-element array or DArray (collective for a DArray)."""
    kind = np.dtype(value.dtype).kind
    out = {"item": value.item(), "bool": bool(value)}
    if kind == "c":
        out["complex"] = complex(value)
    else:
        out["float"] = float(value)
    if kind in "biu":
        out["int"] = int(value)
    return out


def check_result(verdict: BitVerdict, label: str, got: Any, expected: Any) -> None:
    """Record whether ``got`` (dmesh's) is NumPy's ``expected``, and its bits on this rank.

    A DArray is gathered; one with one element also gives its Python scalars
    (``item``, ``float``/``complex``, ``bool``, and ``int`` for integers), each
    checked against NumPy's and recorded, so that every rank must hold the same
    bits of each. Collective when ``got`` holds DArrays.
    """

    def bits(name: str, value: np.ndarray) -> None:
        verdict.bits(name, value)

    if isinstance(got, (tuple, list)):  # qr, unique, split...: item by item
        verdict.check(len(got) == len(expected), f"{label}: {len(got)} results")
        for i, (g, e) in enumerate(zip(got, expected)):
            check_result(verdict, f"{label}[{i}]", g, e)
        return
    if not isinstance(got, dmesh.DArray):  # a Python value (np.shape, np.allclose, lstsq's rank)
        verdict.check(type(got) is type(expected) and got == expected, f"{label}: {got!r}")
        # Bits of the value, never of a pointer (np.asarray of None or a dtype is an object).
        bits(
            label,
            np.asarray(got.str if isinstance(got, np.dtype) else repr(got) if got is None else got),
        )
        return
    full = np.asarray(got.full_array())
    want = np.asarray(expected)
    bits(label, full)
    verdict.check(_same(full, want), f"{label}: {full!r} != NumPy's {want!r}")
    if got.size != 1 or want.size != 1:
        return
    mine, numpy = _scalars(got), _scalars(want.reshape(()))
    for name, value in mine.items():
        bits(f"{label}.{name}()", np.array(value))
        same = type(value) is type(numpy[name]) and _same(np.array(value), np.array(numpy[name]))
        verdict.check(same, f"{label}.{name}(): {value!r} != NumPy's {numpy[name]!r}")


def placements(
    mesh: dmesh.DeviceMesh,
    x: np.ndarray,
    shards: str,
    kinds: tuple[str, ...],
) -> list[list[Placement]]:
    """Placements for the first operand ``x``: Shard/Replicate combinations, then
    Partial of each of ``kinds`` that dmesh allows for ``x``, on the first mesh dim.

    ``shards``: ``"every"`` combination of Replicate and Shard(axis) on each mesh
    dim; ``"each"``: Shard(axis) of each axis alone on the last mesh dim (on a 2-D
    mesh its blocks meet over the second mesh dim; the 1-D mesh of the same run has
    the first) and, on a 2-D mesh, Shard(0) and Shard(last axis) together;
    ``"one"``: Shard(0) on the first mesh dim. dmesh refuses Partial("avg") of
    integers and bools (their average is no integer) and Partial min/max of complex
    numbers (they are not ordered).
    """
    rest = [Replicate()] * (mesh.ndim - 1)
    if not x.ndim:
        return [[Replicate(), *rest]]
    if shards == "every":
        choices: list[Placement] = [Replicate(), *(Shard(d) for d in range(x.ndim))]
        combos = [list(p) for p in itertools.product(choices, repeat=mesh.ndim)]
    elif shards == "each":
        combos = [[*rest, Shard(d)] for d in range(x.ndim)]
        combos += [[Shard(0), Shard(x.ndim - 1)]] if mesh.ndim == 2 else []
    else:
        combos = [[Shard(0), *rest]]
    for op in kinds:
        if (op == "avg" and x.dtype.kind in "biu") or (
            op in ("min", "max") and x.dtype.kind == "c"
        ):
            continue
        combos.append([Partial(op), *rest])
    return combos


def first_array(args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> np.ndarray:
    """The first array operand of a sample's arguments (NEP 35: else the ``like=`` array)."""
    if args and isinstance(args[0], list) and args[0] and isinstance(args[0][0], np.ndarray):
        return np.asarray(args[0][0])  # np.concatenate, np.stack: a list of operands
    found = next((x for x in args if isinstance(x, np.ndarray)), None)
    if found is None and kwargs and isinstance(kwargs.get("like"), np.ndarray):
        return kwargs["like"]  # type: ignore[no-any-return]
    if found is None:
        raise AssertionError(f"a sample without an array operand: {args} {kwargs}")
    return found


# Functions that write into their first operand: that operand is compared after the call.
IN_PLACE = {np.put, np.place, np.putmask, np.copyto, np.put_along_axis, np.fill_diagonal}
# Functions whose values are unspecified: only the shape and dtype are compared.
VALUES_UNSPECIFIED = {np.empty_like, np.empty}


def _in_place(key: Any) -> bool:
    return key in IN_PLACE or (isinstance(key, tuple) and key[1] == "at")


def _copies(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The sample's arrays copied: an in-place call must not change the sample itself."""
    return tuple(
        x.copy() if isinstance(x, np.ndarray)
        else [v.copy() if isinstance(v, np.ndarray) else v for v in x] if isinstance(x, list)
        else x
        for x in args
    )  # fmt: skip


def run_sample(
    verdict: BitVerdict,
    label: str,
    key: Any,
    sample: Sample,
    first: Callable[[np.ndarray], dmesh.DArray],
    mesh: dmesh.DeviceMesh,
) -> None:
    """Call ``key`` on the sample's arrays as DArrays and check the result (collective).

    ``first`` makes the first array operand (each array of a list of them, as
    np.concatenate takes first) a DArray; the other arrays are replicated. The
    np.linalg functions that need their matrix whole must refuse a sharded one.
    """
    args, kwargs = sample
    func = call(key)
    reference = _copies(args)
    with np.errstate(all="ignore"):
        expected = func(*reference, **kwargs)
    if _in_place(key):
        expected = reference[0]
    args = _copies(args)
    if isinstance(kwargs.get("like"), np.ndarray):  # NEP 35: like= is the distributed operand
        kwargs = {**kwargs, "like": first(kwargs["like"])}
        if any(p.is_partial() for p in kwargs["like"].placements):
            return  # (like= gives a mesh and a layout to follow, not values)
    replicated = [Replicate()] * mesh.ndim
    dist: list[Any] = []
    firsts: list[dmesh.DArray] = []  # the operands ``first`` made
    for i, x in enumerate(args):
        if i == 0 and isinstance(x, list) and x and isinstance(x[0], np.ndarray):
            x = [first(a) for a in x]
            firsts += x
        elif isinstance(x, np.ndarray) and not firsts:
            x = first(x)
            firsts.append(x)
        elif isinstance(x, np.ndarray):
            x = dmesh.distribute(x, mesh, replicated)
        dist.append(x)
    sharded = any(p.is_shard() for a in firsts for p in a.placements)
    if key in REPLICATED_MATRIX and sharded:
        try:
            func(*dist, **kwargs)
        except UnsupportedError:  # every rank refuses it, having agreed to
            return
        verdict.check(False, f"{label}: a sharded matrix was not refused")
        return
    if isinstance(key, tuple) and key[1] == "at" and firsts[0].placements[0].is_partial():
        return  # ufunc.at refuses a partial target (tests/test_ufunc_methods.py)
    with np.errstate(all="ignore"):
        got = func(*dist, **kwargs)
    if _in_place(key):
        got = dist[0]
    if key in VALUES_UNSPECIFIED:
        shape, dtype = got.shape, got.dtype
        ok = shape == expected.shape and dtype == expected.dtype
        verdict.check(ok, f"{label}: {shape} {dtype} != NumPy's {expected.shape} {expected.dtype}")
        return
    check_result(verdict, label, got, expected)


def _filler(dtype: np.dtype) -> Any:
    """A value that changes any answer it leaks into."""
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return True if dtype.kind == "b" else np.nan


def sliced(mesh: dmesh.DeviceMesh, x: np.ndarray, *, head: bool) -> dmesh.DArray:
    """``x`` as a slice along axis 0 of an array twice as long, sharded on axis 0 (and on
    its last axis on a second mesh dim): the cut-off half fills the first (``head``) or
    the last rank's block, which the slice leaves empty, and the other blocks are uneven."""
    if x.ndim == 0:
        return dmesh.distribute(x, mesh, [Replicate()] * mesh.ndim)
    filler = np.full(x.shape, _filler(x.dtype), x.dtype)
    whole = np.concatenate([filler, x] if head else [x, filler])
    rest = [Shard(x.ndim - 1) if x.ndim > 1 else Replicate()] * (mesh.ndim - 1)
    a = dmesh.distribute(whole, mesh, [Shard(0), *rest])
    n = len(x)
    return a[n:] if head else a[:n]


def partials(mesh: dmesh.DeviceMesh, turn: int) -> tuple[str, ...]:
    """Partial("sum") and one other kind, in turn: over the meshes of 2, 3 and 4 ranks
    and (2, 2), which one run of the suite covers, a sample meets every kind."""
    place = mesh.shape[0] - 1 if mesh.ndim == 1 else 4
    return ("sum", ("max", "min", "prod", "avg")[(turn + place) % 4])


@pytest.mark.pure  # reads the registry, no communication
def test_every_registered_op_has_samples() -> None:
    missing = [k for k in [*registered(), *decompositions()] if k not in SAMPLES]
    assert not missing, f"registered without samples: {missing}"


@pytest.mark.parametrize("key", list(SAMPLES), ids=key_name)
def test_op_agrees_with_numpy(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, key: Any) -> None:
    turn, size = list(SAMPLES).index(key), mesh.shape[0]
    with BitVerdict(comm) as verdict:  # one agreement per test, not one per placement
        for i, sample in enumerate(SAMPLES[key]):
            kinds = partials(mesh, turn + i)
            for first in placements(mesh, first_array(*sample), "every", kinds):
                if first[0] == Partial("avg") and key in INEXACT_AVERAGE and size & (size - 1):
                    continue  # BUG: see above
                label = f"{key_name(key)} sample {i} {first}"
                place = functools.partial(dmesh.distribute, mesh=mesh, placements=first)
                run_sample(verdict, label, key, sample, place, mesh)
            head = (turn + i) % 2 == 0  # the first rank's block empty, or the last one's
            label = f"{key_name(key)} sample {i} sliced, {'first' if head else 'last'} empty"
            place = functools.partial(sliced, mesh, head=head)
            run_sample(verdict, label, key, sample, place, mesh)


@pytest.mark.parametrize("key", list(HOSTILE), ids=key_name)
def test_hostile_values(comm: MPI.Intracomm, mesh: dmesh.DeviceMesh, key: Any) -> None:
    shards = "one" if key in ELEMENTWISE else "each"  # where values of blocks meet: each
    turn = list(SAMPLES).index(key) + 2  # another kind than the in-domain sample's
    with BitVerdict(comm) as verdict:
        for i, sample in enumerate(HOSTILE[key]):
            kinds = partials(mesh, turn + i)
            for first in placements(mesh, first_array(*sample), shards, kinds):
                label = f"{key_name(key)} hostile sample {i} {first}"
                place = functools.partial(dmesh.distribute, mesh=mesh, placements=first)
                run_sample(verdict, label, key, sample, place, mesh)
