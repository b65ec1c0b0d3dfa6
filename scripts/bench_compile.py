"""dmesh.compile micro-benchmark: a 20-op chain on tiny arrays, compiled vs eager vs NumPy.

Run at 2 ranks::

    .venv/bin/python scripts/mpi_env.py 2 .venv/bin/mpiexec -n 2 .venv/bin/python \
        scripts/bench_compile.py

Prints, on rank 0, the median time per call of the chain compiled (a replay),
eager, and as the same 20 NumPy calls on the local blocks, as ratios to the
NumPy time (issue 16's target: compiled at most 2x); then eight independent
sums (eight reductions eager, one coalesced call compiled) and the demo's
heat-diffusion step (map_overlap: its per-call shape verdict, an all-reduce,
is made once at the plan's first run), a program with a graph break (run in
segments) and two all-gathers (packed into one call), with the MPI calls
each makes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import dmesh
from dmesh import Replicate, Shard
from dmesh.debug import CommMode
from dmesh.ops.compiler import compile


def chain(x: Any, y: Any) -> Any:
    """20 ops: 16 elementwise (operators, ufuncs, scalars, broadcasting) and 4 reductions."""
    a = x * 2.0
    b = a + y
    c = np.sin(b)
    d = c * c
    e = d - 0.5
    f = np.exp(e)
    g = f / (1.0 + d)
    h = np.abs(g)
    s = np.sum(h, axis=0)  # sharded axis summed: Partial
    i = h * s
    j = np.sqrt(i)
    k = j + x
    m = np.mean(k, axis=1)
    n = np.maximum(k, 0.25)
    t = np.sum(n)
    u = n - t
    v = np.tanh(u)
    w = v * y
    z = np.sum(w, axis=1)
    return w, m, z


def eight_sums(x: Any) -> Any:
    """8 independent sums over the sharded axis, each consumed: 8 reductions eager."""
    sums = [np.sum(x * (i + 1.5), axis=0) for i in range(8)]
    return [np.sqrt(np.abs(s)) for s in sums]


def eight_totals(x: Any) -> Any:
    """8 independent whole-array sums, each consumed: 8 all-reduces eager."""
    return [np.sqrt(np.abs(np.sum(x * (i + 1.5)))) for i in range(8)]


def broken(x: Any) -> Any:
    """A graph break (a value read) between two parts: compiled, it runs in two segments."""
    a = np.sin(x * 2.0) + 1.0
    s, t = np.sum(a, axis=0), np.sum(a * a, axis=0)
    scale = 2.0 if float(np.max(x)) > 0 else 1.0  # the break: a value steers Python
    b = (a - s / t) * scale
    return np.sqrt(np.abs(b)), np.sum(b, axis=0), np.sum(b * b, axis=0)


def gathers(x: Any) -> Any:
    """Two sharded arrays replicated (two all-gathers eager, one packed call compiled)."""
    replicated = [Replicate()] * x.mesh.ndim
    a = (x * 2.0).redistribute(x.mesh, replicated)
    b = np.cos(x).redistribute(x.mesh, replicated)
    return a + b, a * b


def heat_step(padded: Any, alpha: float) -> Any:
    """The demo's explicit diffusion step on a padded block."""
    centre = padded[1:-1, 1:-1]
    out = padded.copy()
    neighbours = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
    out[1:-1, 1:-1] = centre + alpha * (neighbours - 4 * centre)
    return out


def heat(u: Any) -> Any:
    """One step of the demo's heat diffusion: a map_overlap (halo exchange)."""
    return dmesh.map_overlap(heat_step, u, depth=1, boundary="constant", alpha=0.1)


def median_time(fn: Callable[[], Any], comm: MPI.Comm, repeat: int = 2000) -> float:
    for _ in range(50):
        fn()
    samples = []
    for _ in range(7):
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        samples.append((time.perf_counter() - start) / repeat)
    return float(np.median(samples))


def main() -> None:
    comm = MPI.COMM_WORLD
    mesh = dmesh.init_mesh((comm.Get_size(),))
    rng = np.random.default_rng(0)
    x = dmesh.distribute(rng.standard_normal((8, 4)), mesh, [Shard(0)])
    y = dmesh.distribute(rng.standard_normal(4), mesh, [Replicate()])
    compiled = compile(chain)
    compiled(x, y)
    if compiled.breaks:
        raise SystemExit(f"the chain did not compile: {compiled.breaks}")
    xl, yl = x.local, y.local
    times = {
        "numpy (local blocks)": median_time(lambda: chain(xl, yl), comm),
        "dmesh eager": median_time(lambda: chain(x, y), comm),
        "dmesh.compile": median_time(lambda: compiled(x, y), comm),
    }
    u = dmesh.distribute(rng.standard_normal((64, 64)), mesh, [Shard(0)])
    sums = eager_and_compiled(eight_sums, x, comm, 2000)
    totals = eager_and_compiled(eight_totals, x, comm, 2000)
    heats = eager_and_compiled(heat, u, comm, 500)
    segments = eager_and_compiled(broken, x, comm, 1000)
    packed = eager_and_compiled(gathers, x, comm, 2000)
    if comm.Get_rank() == 0:
        base = times["numpy (local blocks)"]
        print(f"20-op chain, (8, 4) float64 Shard(0) on {comm.Get_size()} ranks")
        for name, t in times.items():
            print(f"  {name:22s} {t * 1e6:8.1f} us/call  {t / base:5.2f}x numpy")
        for title, rows in (
            ("8 independent sums over the sharded axis, each consumed", sums),
            ("8 independent whole-array sums (all-reduces), each consumed", totals),
            ("heat-diffusion step (map_overlap), (64, 64) float64 Shard(0)", heats),
            ("a graph break (float of a max) between two parts: two segments", segments),
            ("two arrays replicated (all-gathers)", packed),
        ):
            print(title)
            for name, (t, calls) in rows.items():
                print(f"  {name:22s} {t * 1e6:8.1f} us/call  MPI calls {calls}")


def eager_and_compiled(
    fn: Callable[[Any], Any], x: Any, comm: MPI.Comm, repeat: int
) -> dict[str, tuple[float, dict[Any, int]]]:
    """``fn(x)`` eager and compiled: the median time per call and the collectives made."""
    compiled = compile(fn)
    compiled(x)
    rows = {}
    for name, call in (("dmesh eager", fn), ("dmesh.compile", compiled)):
        with CommMode() as calls:
            call(x)
        rows[name] = (median_time(lambda call=call: call(x), comm, repeat), calls.counts())
    return rows


if __name__ == "__main__":
    main()
