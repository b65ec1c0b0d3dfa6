"""``make bench``: run every benchmark under mpiexec and print its table.

Benchmarks print ratios against a baseline measured in the same run (raw
mpi4py, one-process NumPy); results also go to ``build/bench/*.json``. Then
``bench_scaling.py``, which launches its own ``mpiexec`` job per rank count
(1 up to the cores here), prints the strong-scaling table and writes
``build/bench/scaling.json``; ``bench_chart.py`` draws ``bench.png`` and
``scaling.png``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_chart import draw

from mpi_env import mpiexec_command, rank_env

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = [
    ("bench_collectives.py", 2),
    ("bench_redistribute.py", 2),
    ("bench_dispatch.py", 1),  # the dispatch targets hold at 1 and 2 ranks
    ("bench_dispatch.py", 2),
    ("bench_halo.py", 2),
    ("bench_fft.py", 2),
    ("bench_tsqr.py", 2),
    ("bench_solvers.py", 2),
    ("bench_io.py", 2),
    ("bench_sets.py", 2),
    ("bench_statistics.py", 2),
    ("bench_compile.py", 2),
    ("bench_programs.py", 1),  # NumPy programs run unchanged on DArrays, at 1 and 2 ranks
    ("bench_programs.py", 2),
    ("bench_indexing.py", 1),
    ("bench_gpu.py", 1),  # one line saying it skipped where there is no GPU
]


def main() -> int:
    mpiexec = mpiexec_command()
    failed = 0
    for script, ranks in BENCHMARKS:
        cmd = [*mpiexec, "-n", str(ranks), sys.executable, str(ROOT / "scripts" / script)]
        print(f"$ mpiexec -n {ranks} python scripts/{script}", flush=True)
        failed |= subprocess.run(cmd, env=rank_env(ranks), cwd=ROOT).returncode != 0
    # Strong scaling: several rank counts, so it starts its mpiexec jobs itself.
    print("$ python scripts/bench_scaling.py --model", flush=True)
    cmd = [sys.executable, str(ROOT / "scripts" / "bench_scaling.py"), "--model"]
    failed |= subprocess.run(cmd, cwd=ROOT).returncode != 0
    draw(ROOT / "build" / "bench", ROOT / "build" / "bench" / "bench.png")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
