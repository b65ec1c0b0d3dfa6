"""How much of the NumPy surface dmesh handles: one table of sample calls (issue 14).

Run: ``mpiexec -n 2 python scripts/numpy_coverage.py`` (any rank count;
``python scripts/mpi_env.py 4 mpiexec -n 4 python scripts/numpy_coverage.py``
when oversubscribed). Each sample of ``numpy_coverage_samples`` runs twice on
every rank: on NumPy arrays (the reference) and on the same arrays distributed
with ``Shard(0)`` over a 1-D mesh of all ranks. A sample is

- **handled**: no exception, and every result (gathered with ``full_array()``
  where it is a DArray) has NumPy's shape, dtype and values (exact for ints and
  bools, ``allclose(rtol=1e-10, equal_nan=True)`` for floats), with the same
  bits on every rank; a sample that makes a new array without an array argument
  (``mk.zeros``) must return a DArray;
- **unsupported**: it raised (type and the first 100 characters recorded), or
  made an ndarray where a DArray was asked for;
- **wrong**: it finished with another result ('dtype differs' is wrong too).

A name is handled when all its samples are. Rank 0 prints the wrong answers
first, the table, the counts per group and the unsupported names grouped by
their error. ``--only NAME[,NAME]``, ``--group GROUP``, ``--markdown FILE``.
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import re
import sys
import warnings
from collections import defaultdict
from functools import partial
from typing import Any

import numpy as np
from mpi4py import MPI
from numpy_coverage_samples import (
    GROUPS,
    NAMES,
    NumpyMaker,
    display_name,
    evaluate,
    make_inputs,
    samples,
    split_flags,
)

import dmesh
from dmesh import DArray, Shard

RTOL = 1e-10
Row = dict[str, Any]


class DistributedInputs(dict):  # type: ignore[type-arg]
    """The sample namespace of the distributed run: each input distributed on first use."""

    def __init__(self, arrays: dict[str, np.ndarray], mesh: Any) -> None:
        super().__init__()
        self._arrays = arrays
        self._mesh = mesh

    def __missing__(self, key: str) -> Any:
        if key not in self._arrays:
            raise KeyError(key)
        value = dmesh.distribute(self._arrays[key].copy(), self._mesh, [Shard(0)])
        self[key] = value
        return value


class DmeshMaker:
    """``mk`` of the distributed run: ``dmesh.NAME(..., mesh=mesh)``, else ``np.NAME(..., like=a)``.

    ``used`` records the form each call took, for the table's note.
    """

    def __init__(self, mesh: Any, inputs: DistributedInputs) -> None:
        self.mesh = mesh
        self.inputs = inputs
        self.used: list[str] = []
        self.fft = _FftMaker(self)

    def __getattr__(self, name: str) -> Any:
        return self.make(name, getattr(dmesh, name, None), getattr(np, name, None), "np.")

    def make(self, name: str, ours: Any, theirs: Any, prefix: str) -> Any:
        """The callable for ``name``: dmesh's form if it has one, else NumPy's with ``like=``."""
        if callable(ours):
            self.used.append(f"dmesh.{name}")
            return partial(ours, mesh=self.mesh)

        def with_like(*args: Any, **kwargs: Any) -> Any:
            try:
                made = theirs(*args, like=self.inputs["m"], **kwargs)
                self.used.append(f"{prefix}{name}(like=)")
                return made
            except TypeError as exc:
                if "like" in str(exc) and "keyword" in str(exc):
                    raise NotImplementedError(
                        f"no dmesh.{name}, and {prefix}{name} takes no like="
                    ) from exc
                raise

        return with_like


class _FftMaker:
    def __init__(self, parent: DmeshMaker) -> None:
        self.parent = parent

    def __getattr__(self, name: str) -> Any:
        ours = getattr(dmesh, name, None)
        return self.parent.make(name, ours, getattr(np.fft, name), "np.fft.")


def gather(value: Any) -> Any:
    """``value`` with every DArray replaced by its full array (collective)."""
    if isinstance(value, DArray):
        return value.full_array()
    if isinstance(value, (tuple, list)):
        return [gather(item) for item in value]
    return value


def array_leaves(value: Any) -> list[Any]:
    """The array-valued parts of a result (DArrays and ndarrays of any dimension)."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in array_leaves(item)]
    return [value] if isinstance(value, (DArray, np.ndarray)) else []


def compare(ref: Any, got: Any, shape_only: bool = False) -> str | None:
    """None when ``got`` is NumPy's ``ref``, else what differs ('dtype differs: ...' first)."""
    if isinstance(ref, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(ref):
            kind = f"{len(got)} items" if isinstance(got, (tuple, list)) else type(got).__name__
            return f"got {kind}, expected {len(ref)} items"
        for index, (r, g) in enumerate(zip(ref, got)):
            diff = compare(r, g, shape_only)
            if diff is not None:
                return f"[{index}] {diff}"
        return None
    if isinstance(ref, (np.dtype, type)):
        return None if got == ref else f"got {got!r}, expected {ref!r}"
    r, g = np.asarray(ref), np.asarray(got)
    if r.shape != g.shape:
        return f"shape {g.shape}, expected {r.shape}"
    if r.dtype != g.dtype:
        return f"dtype differs: {g.dtype}, expected {r.dtype}"
    if shape_only:
        return None
    if r.dtype == object:
        same = r.tolist() == g.tolist()
    elif r.dtype.kind in "fc":
        same = bool(np.allclose(g, r, rtol=RTOL, equal_nan=True))
    else:
        same = bool(np.array_equal(g, r))
    if same:
        return None
    if r.dtype.kind in "fc" and r.size:
        return f"max abs diff {np.nanmax(np.abs(g - r)):.3g}"
    return f"values differ: got {np.ravel(g)[:4]}..., expected {np.ravel(r)[:4]}..."


def digest(value: Any) -> str:
    """A hash of a gathered result's bits, to check that every rank got the same."""
    sha = hashlib.sha1()

    def feed(item: Any) -> None:
        if isinstance(item, (tuple, list)):
            sha.update(b"(")
            for part in item:
                feed(part)
            sha.update(b")")
        elif isinstance(item, (np.dtype, type)):
            sha.update(str(item).encode())
        else:
            array = np.asarray(item)
            sha.update(f"{array.dtype.str}{array.shape}".encode())
            if array.dtype == object:
                sha.update(repr(array.tolist()).encode())
            else:
                sha.update(np.ascontiguousarray(array).tobytes())

    feed(value)
    return sha.hexdigest()


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:100]}"


def run_sample(comm: MPI.Comm, mesh: Any, arrays: dict[str, np.ndarray], code: str) -> Row:
    """Classify one sample (collective: every rank runs it and agrees on the verdict)."""
    body, shape_only = split_flags(code)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = evaluate(body, {k: a.copy() for k, a in arrays.items()}, NumpyMaker())
    inputs = DistributedInputs(arrays, mesh)
    maker = DmeshMaker(mesh, inputs)
    error, got, local = None, None, []
    with np.errstate(all="ignore"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = evaluate(body, inputs, maker)
            local = [type(x).__name__ for x in array_leaves(result) if not isinstance(x, DArray)]
            got = gather(result)
        except Exception as exc:
            error = _error(exc)
    errors = comm.allgather(error)
    row: Row = {"forms": ", ".join(dict.fromkeys(maker.used)), "note": ""}
    if caught:
        row["warned"] = " ".join(str(caught[0].message).split())[:80]
    if any(errors):
        raised = [rank for rank, e in enumerate(errors) if e]
        note = next(e for e in errors if e)
        if len(raised) < comm.size:
            note = f"raised on ranks {raised} only: {note}"
        return {**row, "verdict": "unsupported", "note": note}
    note = compare(reference, got, shape_only)
    notes = comm.allgather((note, digest(got)))
    if len({d for _, d in notes}) > 1:
        note = "ranks got different bits"
    note = note or next((n for n, _ in notes if n), None)
    if note is not None:
        return {**row, "verdict": "wrong", "note": note}
    if "mk." in body and local:
        return {**row, "verdict": "unsupported", "note": f"returned {local[0]}, not a DArray"}
    if local and not row.get("forms"):
        row["note"] = f"result is {local[0]}"
    return {**row, "verdict": "handled"}


def name_verdicts(rows: list[Row]) -> dict[tuple[str, str], Row]:
    """One verdict per (group, name): wrong if any sample is, else unsupported if any is."""
    by_name: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        by_name[row["group"], row["name"]].append(row)
    verdicts = {}
    for key, group_rows in by_name.items():
        bad = [r for r in group_rows if r["verdict"] == "wrong"]
        bad = bad or [r for r in group_rows if r["verdict"] == "unsupported"]
        forms = ", ".join(dict.fromkeys(f for r in group_rows for f in r["forms"].split(", ") if f))
        notes = [f"via {forms}"] if forms else []
        notes += list(dict.fromkeys(r["note"] for r in group_rows if r["note"] and not bad))
        notes += list(dict.fromkeys(f"warned: {r['warned']}" for r in group_rows if "warned" in r))
        if bad:
            failing = f" ({len(bad)} of {len(group_rows)} samples)" if len(group_rows) > 1 else ""
            notes.insert(0, f"`{bad[0]['code']}`: {bad[0]['note']}{failing}")
        verdict = bad[0]["verdict"] if bad else "handled"
        error = bad[0]["note"] if bad else ""
        verdicts[key] = {"verdict": verdict, "note": "; ".join(notes), "error": error}
    return verdicts


def error_family(note: str) -> str:
    """The first words of an error, without function names, shapes and placements."""
    text = re.sub(r"^raised on ranks \[[^]]*\] only: ", "", note.split("`: ", 1)[-1])
    kind, _, message = text.partition(": ")
    while re.search(r"\([^()]*\)", message):
        message = re.sub(r" ?\([^()]*\)", "", message)
    message = re.sub(r"(np|dmesh)\.[\w.<>]+", "…", message)
    message = re.sub(r"\d+", "N", message)
    return f"{kind}: {' '.join(message.split()[:9])}"


def summary(rows: list[Row], nranks: int) -> list[str]:
    """The report's lines: wrong answers first, then the table, the counts and the errors."""
    verdicts = name_verdicts(rows)
    lines = [f"# NumPy coverage of dmesh at {nranks} ranks", ""]
    wrong = [r for r in rows if r["verdict"] == "wrong"]
    lines.append(f"## WRONG ANSWERS: {len(wrong)}")
    lines += [
        f"- **{display_name(r['group'], r['name'])}** `{r['code']}`: {r['note']}" for r in wrong
    ]
    dtype = [r for r in wrong if r["note"].lstrip("[0123456789] ").startswith("dtype differs")]
    lines.append(f"\n(of which 'dtype differs': {len(dtype)})\n")
    lines += ["## Counts", "", "| group | handled | total | % |", "|---|---|---|---|"]
    totals = [0, 0]
    for group in GROUPS:
        keys = [key for key in verdicts if key[0] == group]
        if not keys:
            continue
        handled = sum(verdicts[key]["verdict"] == "handled" for key in keys)
        lines.append(f"| {group} | {handled} | {len(keys)} | {100 * handled / len(keys):.1f} |")
        if group in NAMES:
            totals[0] += handled
            totals[1] += len(keys)
    if totals[1]:
        share = 100 * totals[0] / totals[1]
        lines.append(
            f"| **overall** (issue's 4 groups) | {totals[0]} | {totals[1]} | {share:.1f} |"
        )
    families: dict[str, list[str]] = defaultdict(list)
    for (group, name), verdict in verdicts.items():
        if verdict["verdict"] == "unsupported":
            families[error_family(verdict["error"])].append(display_name(group, name))
    lines += ["", "## Unsupported, by error", ""]
    for family, names in sorted(families.items(), key=lambda item: -len(item[1])):
        lines.append(f"- {family} ({len(names)}): {', '.join(names)}")
    lines += ["", "## Table", "", "| name | group | verdict | note |", "|---|---|---|---|"]
    for (group, name), verdict in verdicts.items():
        name, note = (
            text.replace("|", "\\|") for text in (display_name(group, name), verdict["note"])
        )
        lines.append(f"| {name} | {group} | {verdict['verdict']} | {note} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the selected samples on every rank; rank 0 prints the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated names (median, linalg.qr, fft.fft)")
    parser.add_argument("--group", choices=list(GROUPS), help="one group of names")
    parser.add_argument("--markdown", help="write the report to this file")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per sample")
    parser.add_argument("-v", "--verbose", action="store_true", help="name each sample first")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    comm = MPI.COMM_WORLD
    arrays = make_inputs()
    rows: list[Row] = []
    with dmesh.init_mesh() as mesh:
        for group, name, code in samples(args.group):
            full = display_name(group, name)
            if only and not ({name, full, f"{group}.{name}"} & only):
                continue
            if args.verbose and comm.rank == 0:
                print(f"... {full}: {code}", file=sys.stderr, flush=True)
            # A sample that hangs (one rank waits in a collective) ends the run with a traceback.
            faulthandler.dump_traceback_later(args.timeout, exit=True)
            row = run_sample(comm, mesh, arrays, code)
            faulthandler.cancel_dump_traceback_later()
            rows.append({"group": group, "name": name, "code": code, **row})
    if comm.rank == 0:
        text = "\n".join(summary(rows, comm.size))
        print(text)
        if args.markdown:
            with open(args.markdown, "w") as handle:
                handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
