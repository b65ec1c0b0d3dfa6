"""The pure core: values that describe distributed arrays, and plans over them.

Nothing here communicates. :mod:`~dmesh.core.abstract_mesh` is a mesh's
shape and names, :mod:`~dmesh.core.placement` the per-dimension placements,
:mod:`~dmesh.core.layout` the block boundaries, :mod:`~dmesh.core.spec` a
DArray's full description, :mod:`~dmesh.core.plan` redistribution planning
and its cost model, :mod:`~dmesh.core.transfers` the rectangles of a
transfer, and :mod:`~dmesh.core.philox` counter-based random bits.
All of it is testable in one process without MPI (an import-linter contract
keeps it away from the communicating collectives).
"""
