"""Environment settings for running MPICH ranks, shared by tests, benchmarks and demos.

``python scripts/mpi_env.py N command...`` runs ``command`` with the settings
for N ranks (``make demo`` does).

When more ranks run than there are cores, MPICH's waiting ranks busy-poll and
steal the core of the rank doing the work. Measured on the 2-core dev machine
(4 ranks, one rank multiplying matrices while three wait): 0.100 s of work
with MPICH's defaults, 0.101 s with ``MPIR_CVAR_CH4_PROGRESS_THROTTLE=1``,
0.047 s (the one-rank time) with ``MPIR_CVAR_ENABLE_HEAVY_YIELD=1`` and
``MPIR_CVAR_POLLS_BEFORE_YIELD=10``: a waiting rank then sleeps in
``nanosleep`` after 10 empty polls instead of spinning. Only used when
oversubscribed, since sleeping adds latency when every rank has its own core.

Sleeping costs latency when oversubscribed too, and the test suite is
latency-bound (thousands of small collectives, little arithmetic): on the same
machine, 3 and 4 ranks, a tiny ``Allreduce`` took 34-55 us with MPICH's defaults
(spin, ``sched_yield`` every 1000 polls) and 540-570 us with the settings
above; the three heaviest test files at 4 ranks, with other jobs running
beside them, took 31.5 and 34.1 s against 39.7 s (43.3 s sleeping after 1000
polls instead of 10). ``latency_bound=True`` (scripts/run_tests.py)
keeps MPICH's defaults.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

OVERSUBSCRIBED = {
    "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1",
    "MPIR_CVAR_POLLS_BEFORE_YIELD": "10",
}
# One BLAS thread per rank: ranks are the parallelism.
SINGLE_THREADED = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def rank_env(
    nranks: int, base: dict[str, str] | None = None, *, latency_bound: bool = False
) -> dict[str, str]:
    """Return ``base`` (default ``os.environ``) with the settings for ``nranks`` ranks here.

    ``latency_bound``: the ranks mostly exchange small messages (the test
    suite), so waiting ranks keep spinning even when oversubscribed.
    """
    env = dict(os.environ if base is None else base)
    for key, value in SINGLE_THREADED.items():
        env.setdefault(key, value)
    if nranks > (os.cpu_count() or 1) and not latency_bound:
        for key, value in OVERSUBSCRIBED.items():
            env.setdefault(key, value)
    return env


def mpiexec_command() -> list[str]:
    """The launcher that tests and benchmarks start their jobs with.

    ``$MPIEXEC``, split as a shell would, when set: a site MPI's launcher with
    its options, e.g. ``MPIEXEC="mpiexec --allow-run-as-root"`` for an Open MPI
    run as root (mpi4py must load that MPI too: ``MPI4PY_LIBMPI``). Otherwise
    the ``mpiexec`` beside this Python (the virtual environment's MPICH), else
    the one on ``PATH``.
    """
    chosen = os.environ.get("MPIEXEC", "").strip()
    if chosen:
        return shlex.split(chosen)
    return [shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"]


if __name__ == "__main__":
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        sys.exit("usage: python scripts/mpi_env.py NRANKS COMMAND [ARGS...]")
    os.execvpe(sys.argv[2], sys.argv[2:], rank_env(int(sys.argv[1])))
