"""Collective assertions: every rank reaches the same verdict, so none waits alone."""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from mpi_env import rank_env  # scripts/ is not a package: found through sys.path


def assert_all(comm: MPI.Comm, ok: bool, message: str = "") -> None:
    """Raise ``AssertionError`` on every rank if ``ok`` is false on any rank."""
    flags = comm.allgather(bool(ok))
    if not all(flags):
        bad = [r for r, f in enumerate(flags) if not f]
        raise AssertionError(f"failed on rank(s) {bad}: {message}")


class Verdict:
    """The checks of a loop, recorded on each rank and agreed on once, at the end.

    ``assert_all`` is an allgather per check; a loop over every pair of
    placements spent most of its time in them at 4 ranks on 2 cores. ``check``
    and ``equal`` communicate nothing and change no control flow, so the ranks
    stay in step; leaving the ``with`` block (or ``agree``) raises on every rank
    if any rank recorded a failure, quoting the first ones. An exception inside
    the block propagates without communicating, as it would without a Verdict.
    """

    def __init__(self, comm: MPI.Comm) -> None:
        self.comm = comm
        self.failures: list[str] = []

    def check(self, ok: bool, message: str = "") -> None:
        """Record one local check."""
        if not ok:
            self.failures.append(message)

    def equal(self, actual: Any, expected: Any, *, rtol: float = 0.0, atol: float = 0.0) -> None:
        """Record a comparison of arrays as ``assert_equal_all`` makes it, without communicating."""
        self.check(*_compare(actual, expected, rtol, atol))

    def agree(self) -> None:
        """Raise on every rank if a check failed on any rank (collective)."""
        shown = "\n".join(self.failures[:3])
        more = len(self.failures) - 3
        assert_all(self.comm, not self.failures, shown + (f"\n... {more} more" if more > 0 else ""))

    def __enter__(self) -> Verdict:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            self.agree()


class BitVerdict(Verdict):
    """A Verdict that also records the bytes of values every rank must hold bit for bit.

    ``bits`` keeps a digest of a value this rank holds and communicates
    nothing; ``agree`` is still one allgather, of the failures and the digests,
    and raises on every rank if a check failed on any rank or if a value's
    bytes differ between ranks (a NaN's sign, a zero's, one ulp). Only then a
    second allgather fetches the first differing values, to show each rank's.
    """

    def __init__(self, comm: MPI.Comm) -> None:
        super().__init__(comm)
        self.labels: list[str] = []
        self.values: list[np.ndarray] = []
        self.digests: list[bytes] = []

    def bits(self, label: str, value: Any) -> None:
        """Record ``value`` (an array or a Python scalar): its dtype, shape and bytes."""
        data = np.ascontiguousarray(value)
        digest = hashlib.blake2b(f"{data.dtype.str}{data.shape}".encode(), digest_size=8)
        digest.update(data.tobytes())
        self.labels.append(label)
        self.values.append(data)
        self.digests.append(digest.digest())

    def agree(self) -> None:
        """Raise on every rank if a check failed or a value differs between ranks (collective)."""
        mine = (self.failures[:3], len(self.failures), b"".join(self.digests))
        everyone = self.comm.allgather(mine)  # the same list on every rank: the same decision
        shown = [f"rank {r}: {m}" for r, (first, _, _) in enumerate(everyone) for m in first]
        count = sum(n for _, n, _ in everyone)
        digests = [d for _, _, d in everyone]
        common = min(len(d) for d in digests) // 8
        differ = [i for i in range(common) if len({d[8 * i : 8 * i + 8] for d in digests}) > 1]
        if len({len(d) for d in digests}) > 1:
            differ.append(common)  # ranks recorded different numbers of values
        if differ:
            at = differ[0]
            label = self.labels[at] if at < len(self.labels) else "(a value some ranks lack)"
            held = self.comm.allgather(self.values[at] if at < len(self.values) else None)
            shown.insert(
                0,
                f"ranks hold different bits ({len(differ)} values): {label}: "
                + _first_difference(held),
            )
        if count or differ:
            more = f"\n... {count} failed checks in all, over the ranks" if count > 3 else ""
            raise AssertionError("\n".join(shown[:4]) + more)


def _first_difference(held: list[np.ndarray | None]) -> str:
    """Each rank's first element whose bytes differ between ranks, with its bytes in hex."""
    if any(v is None or v.shape != held[0].shape or v.dtype != held[0].dtype for v in held):
        return "; ".join(f"rank {r}: {v!r}" for r, v in enumerate(held))
    flat = [np.ascontiguousarray(v).reshape(-1) for v in held if v is not None]
    for k in range(flat[0].size):
        if len({f[k : k + 1].tobytes() for f in flat}) > 1:
            return f"element {k}: " + "; ".join(
                f"rank {r}: {f[k]!r} ({f[k : k + 1].tobytes().hex()})" for r, f in enumerate(flat)
            )
    return "no element differs"


def _compare(actual: Any, expected: Any, rtol: float, atol: float) -> tuple[bool, str]:
    """(equal, why not): arrays compared exactly, or to ``rtol``/``atol``."""
    try:
        actual_np = np.asarray(actual)
        expected_np = np.asarray(expected)
        if actual_np.shape != expected_np.shape or actual_np.dtype != expected_np.dtype:
            raise AssertionError(
                f"shape/dtype {actual_np.shape} {actual_np.dtype} != "
                f"{expected_np.shape} {expected_np.dtype}"
            )
        if rtol == 0.0 and atol == 0.0:
            np.testing.assert_array_equal(actual_np, expected_np)
        else:
            np.testing.assert_allclose(actual_np, expected_np, rtol=rtol, atol=atol)
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


def assert_equal_all(
    comm: MPI.Comm, actual: Any, expected: Any, *, rtol: float = 0.0, atol: float = 0.0
) -> None:
    """Compare arrays (exactly, or to ``rtol``/``atol``) and agree on the verdict."""
    assert_all(comm, *_compare(actual, expected, rtol, atol))


def hostile_values(shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    """Distinct values of ``shape`` with hostile ones among them: -0.0, NaN, +-inf for
    floats, the extremes for integers."""
    n = int(np.prod(shape))
    x = (np.arange(n) * 7 % (n + 3) - n // 2).astype(dtype)
    if x.dtype.kind == "f" and n >= 4:
        x[:4] = [-0.0, np.nan, np.inf, -np.inf]
    elif x.dtype.kind == "i" and n >= 2:
        x[:2] = [np.iinfo(dtype).min, np.iinfo(dtype).max]
    return x.reshape(shape)


def same_on_every_rank(comm: MPI.Comm, value: Any) -> None:
    """Every rank holds the same bits of ``value`` (not only close values)."""
    mine = np.ascontiguousarray(value).tobytes()
    assert_all(comm, len(set(comm.allgather(mine))) == 1, f"ranks differ: {value!r}")


def assert_raises_all(
    comm: MPI.Comm,
    exc_type: type[BaseException],
    fn: Any,
    *args: Any,
    match: str | None = None,
    **kwargs: Any,
) -> BaseException | None:
    """Check that ``fn(*args, **kwargs)`` raises ``exc_type`` on every rank."""
    import re

    caught: BaseException | None = None
    try:
        fn(*args, **kwargs)
        ok, message = False, "no exception"
    except Exception as exc:
        caught = exc
        if not isinstance(exc, exc_type):
            ok, message = False, f"raised {type(exc).__name__}: {exc}"
        else:
            ok = match is None or re.search(match, str(exc)) is not None
            message = f"message {str(exc)!r} does not match {match!r}"
    assert_all(comm, ok, message)
    return caught


def signature_mismatches(ours: Any, theirs: Any, names: Sequence[str]) -> list[str]:
    """The ``names`` whose function in module ``ours`` lacks a docstring or differs from the
    one in ``theirs`` (the reference, array_api_strict) in a parameter's name, kind or default."""

    def shape(func: Any) -> list[tuple[Any, ...]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(func).parameters.values()]

    return [
        name
        for name in names
        if not getattr(ours, name).__doc__
        or shape(getattr(ours, name)) != shape(getattr(theirs, name))
    ]


def launch_job(
    script: str,
    ranks: int,
    timeout: float = 90,
    extra_env: dict[str, str] | None = None,
    args: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``python script *args`` as a separate ``mpiexec -n ranks`` job; capture its output.

    Called by one rank of the test. Each rank of the job writes its stdout and
    stderr to files of its own (MPICH's ``-outfile-pattern``), read back in
    rank order, so that ``stdout`` holds whole lines, rank 0's first: two ranks
    sharing one pipe once produced ``rank 0: ...rank 1: ...`` on one line
    (``PYTHONUNBUFFERED`` makes ``print`` two writes). ``mpiexec``'s own output
    follows the ranks'. The environment drops this job's process manager
    variables so that the child job starts a manager of its own, and gets the
    settings of ``scripts/mpi_env.py`` for ``ranks`` ranks; ``extra_env`` is
    added to it. The job runs in a session of its own: past ``timeout`` seconds
    every process of it is killed (no rank is left spinning) and
    ``subprocess.TimeoutExpired`` carries what the ranks had written.
    """
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI", "HYDRA", "MPI"))}
    env = rank_env(ranks, env)
    env.update(extra_env or {})
    with tempfile.TemporaryDirectory(prefix="dmesh-job-") as folder:
        cmd = [
            mpiexec, "-n", str(ranks),
            "-outfile-pattern", f"{folder}/out.%r", "-errfile-pattern", f"{folder}/err.%r",
            sys.executable, script, *args,
        ]  # fmt: skip
        with subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            start_new_session=True,
        ) as process:  # fmt: skip
            try:
                own_out, own_err = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                own_out, own_err = process.communicate()
                raise subprocess.TimeoutExpired(
                    cmd, timeout, _per_rank(folder, "out", ranks) + own_out,
                    _per_rank(folder, "err", ranks) + own_err,
                ) from None  # fmt: skip
        stdout = _per_rank(folder, "out", ranks) + own_out
        stderr = _per_rank(folder, "err", ranks) + own_err
    return subprocess.CompletedProcess(cmd, process.returncode, stdout, stderr)


def _per_rank(folder: str, stream: str, ranks: int) -> str:
    """The ``stream`` files of ranks 0..ranks-1 in ``folder``, joined in rank order."""
    texts = []
    for rank in range(ranks):
        path = Path(folder) / f"{stream}.{rank}"
        if path.exists():
            text = path.read_text(errors="replace")
            texts.append(text if text.endswith("\n") or not text else text + "\n")
    return "".join(texts)


def flat_results(result: Any) -> list[Any]:
    """A result's arrays in order, nested tuples and lists flattened (counts, then edges...)."""
    if isinstance(result, (tuple, list)):
        return [x for part in result for x in flat_results(part)]
    return [result]
