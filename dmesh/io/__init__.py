"""Files: parallel ``.npy`` (:mod:`~dmesh.io.npy`) and checkpoints (:mod:`~dmesh.io.checkpoint`).

Both write and read with collective MPI-IO, each rank its own blocks, and
agree on every error before raising it on all ranks.
"""
