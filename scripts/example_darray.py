"""DArrays: split an array over a mesh, move it between layouts, draw random numbers.

Run: ``mpiexec -n 4 python scripts/example_darray.py`` (any rank count).
"""

from __future__ import annotations

import numpy as np

import dmesh
from dmesh import Partial, Replicate, Shard


def main() -> None:
    with dmesh.init_mesh((-1, 1), names=("x", "y")) as mesh:
        a = np.arange(48.0).reshape(8, 6)
        d = dmesh.distribute(a, mesh, [Shard(0), Shard(1)])
        columns = d.redistribute(mesh, [Shard(1), Replicate()])  # an all-to-all
        assert np.array_equal(columns.full_array(), a)

        # Partial values: each rank holds a term; the array is their sum.
        terms = dmesh.from_local(np.ones((2, 3)), mesh, [Partial("sum"), Replicate()])
        total = terms.redistribute(mesh, [Replicate(), Replicate()]).local
        assert np.array_equal(total, np.full((2, 3), mesh.size()))

        dmesh.random.seed(7)
        r = dmesh.random.normal(size=(1000,), mesh=mesh)
        mean = float(np.asarray(r).mean())
        if mesh.rank == 0:
            print(f"{d}: local block {d.local.shape}; after redistribute {columns.local.shape}")
            print(f"mean of 1000 normal draws (the same at any rank count): {mean:.6f}")


if __name__ == "__main__":
    main()
