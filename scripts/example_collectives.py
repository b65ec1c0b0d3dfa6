"""A first look at meshes and functional collectives.

Run: ``mpiexec -n 4 python scripts/example_collectives.py`` (any rank count).
Every line below runs on every rank; each collective is called by all ranks
of its group, in the same order.
"""

from __future__ import annotations

import numpy as np

import dmesh
import dmesh.collectives as C


def main() -> None:
    with dmesh.init_mesh((-1, 1), names=("x", "y")) as mesh:
        rank = mesh.rank or 0
        x = np.arange(6.0) + rank

        # Sum over one mesh dimension; every rank of it gets the result.
        total = C.all_reduce(x, "sum", (mesh, "x"))
        expected = sum(np.arange(6.0) + r for r in range(mesh.size("x")))
        assert np.array_equal(total, expected)

        # Pieces of different lengths (rank 0's is empty), in rank order.
        rows = C.all_gather(x[: rank % 3], 0, mesh.flatten())
        assert rows.size == sum(r % 3 for r in range(mesh.size()))

        # Start a reduction, compute while it travels, use it: it waits then.
        pending = C.all_reduce(x, "avg", mesh.flatten(), async_op=True)
        local = float(np.sin(x).sum())  # overlaps the communication
        mean = float(np.sum(pending))

        if rank == 0:
            print(f"{mesh}: sum {total.tolist()}, gathered {rows.size} rows")
            print(f"sum of the mean over ranks {mean}, local work gave {local:.3f}")


if __name__ == "__main__":
    main()
