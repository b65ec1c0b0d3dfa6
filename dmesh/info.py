"""``python -m dmesh.info``: what a new cluster offers dmesh, the first thing to run there.

Run it the way jobs will run (``mpiexec -n 8 python -m dmesh.info`` or
``srun python -m dmesh.info``); rank 0 prints the MPI library and version,
the thread level, whether the library is CUDA-aware, ranks per node, the
GPUs each node sees, and a suggested mesh shape. Collective over
``MPI.COMM_WORLD``; one process works too.
"""

from __future__ import annotations

import sys
from typing import Any

from mpi4py import MPI

from dmesh.collectives.device import cuda_aware, cupy_module

__all__ = ["main", "report"]

_THREAD_LEVELS = {
    MPI.THREAD_SINGLE: "single",
    MPI.THREAD_FUNNELED: "funneled",
    MPI.THREAD_SERIALIZED: "serialized",
    MPI.THREAD_MULTIPLE: "multiple",
}


def _gpus_seen() -> int:
    cupy = cupy_module()
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # a CuPy without a driver or device sees none
        return 0


def report(comm: MPI.Intracomm = MPI.COMM_WORLD) -> dict[str, Any]:
    """The facts ``python -m dmesh.info`` prints, the same dict on every rank (collective)."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        per_node = comm.allgather(node.Get_size() if node.Get_rank() == 0 else 0)
        gpus = comm.allgather(_gpus_seen() if node.Get_rank() == 0 else None)
    finally:
        node.Free()
    nodes = [n for n in per_node if n]
    gpu_counts = [g for g in gpus if g is not None]
    # Only ask about CUDA-awareness where every rank has a GPU: the probe
    # sends a device buffer, and a rank without one could not take part.
    aware = cuda_aware(comm) if all(g > 0 for g in comm.allgather(_gpus_seen())) else None
    size = comm.Get_size()
    shape = (len(nodes), nodes[0]) if len(nodes) > 1 and len(set(nodes)) == 1 else None
    return {
        "library": MPI.Get_library_version().strip().splitlines()[0].rstrip("\0"),
        "mpi_version": "{}.{}".format(*MPI.Get_version()),
        "mpi4py": __import__("mpi4py").__version__,
        "thread_level": _THREAD_LEVELS.get(MPI.Query_thread(), str(MPI.Query_thread())),
        "ranks": size,
        "nodes": len(nodes),
        "ranks_per_node": nodes,
        "gpus_per_node": gpu_counts,
        "cuda_aware": aware,
        "suggested_mesh": shape if shape is not None else tuple(MPI.Compute_dims(size, 1)),
    }


def _format(facts: dict[str, Any]) -> str:
    aware = facts["cuda_aware"]
    lines = [
        f"MPI library      {facts['library']}",
        f"MPI standard     {facts['mpi_version']} (mpi4py {facts['mpi4py']})",
        f"thread level     {facts['thread_level']}",
        f"ranks            {facts['ranks']} on {facts['nodes']} node(s), "
        f"per node {facts['ranks_per_node']}",
        f"GPUs per node    {facts['gpus_per_node']}",
        "CUDA-aware MPI   "
        + ("n/a (no GPU on every rank)" if aware is None else "yes" if aware else "no (staged)"),
        f"suggested mesh   dmesh.init_mesh({facts['suggested_mesh']})"
        + ("  # (nodes, ranks per node)" if len(facts["suggested_mesh"]) == 2 else ""),
    ]
    return "\n".join(lines)


def main() -> int:
    """Print the report on rank 0."""
    facts = report()
    if MPI.COMM_WORLD.Get_rank() == 0:
        print(_format(facts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
