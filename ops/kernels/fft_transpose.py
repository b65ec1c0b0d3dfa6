"""The distributed FFT's transposes and intermediates in reused buffers.

Where the time of ``np.fft.fftn`` goes (2 ranks, 128^3 complex128, slab,
cProfile over 10 calls on the 2-core dev machine): the local ``numpy.fft``
passes 80%, the ``MPI_Alltoall`` 11%, packing the pieces 7%. But every pass
wrote a fresh array: five of them per ``fftn`` (two transforms, the packed
send buffer, the receive buffer, the last transform), each as large as the
block, and a fresh array of more than 32 MiB is new pages from the kernel
every time (glibc maps it and unmaps it on free): filling a fresh 128 MiB
array took 100 ms there, a reused one 27 ms; ``np.fft.fft`` along the last
axis of a 128 x 256 x 256 block 291 ms fresh, 152 ms into ``out=``.

So the intermediates here live in three flat buffers kept between calls (two
for transform outputs and the packed pieces, one for what arrives), and only
the result is a fresh array. The transpose is the same all-to-all as
``DArray.with_layout`` (``plan_redistribution``'s one ``all_to_all`` step):
the pieces packed concat-axis-first into the free buffer, one ``Alltoall``
(equal pieces) or ``Alltoallv``, and what arrives is read in place as a view
with the concat axis moved back (the next transform reads that view, so there
is no unpacking copy). Sending the strided pieces with an MPI vector datatype
instead of packing them measured the same (117 vs 124 ms, 932 vs 895 ms): the
packing copy was never the cost, the fresh pages were.

The buffers hold up to three blocks of the largest transform since the last
:func:`release_workspace`; blocks under 1 MiB use fresh arrays (small ones
come from the heap, not new pages) and keep nothing. Host (NumPy) blocks
only; other blocks, and any transpose that is not one all-to-all, take
``with_layout``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmesh.collectives import tracing
from dmesh.collectives.blocks import offsets_of
from dmesh.collectives.dtypes import mpi_datatype
from dmesh.core.layout import Layout
from dmesh.core.plan import plan_redistribution
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray

__all__ = ["Workspace", "release_workspace"]

# Blocks smaller than this (bytes) use fresh arrays: the heap serves them.
MIN_REUSED_BYTES = 1 << 20
_BUFFERS: dict[str, np.ndarray] = {}


def release_workspace() -> None:
    """Drop the buffers the distributed FFT keeps between calls (up to three blocks)."""
    _BUFFERS.clear()


class Workspace:
    """The buffers of one distributed FFT: ``"a"`` and ``"b"`` for transform outputs and
    packed pieces, ``"recv"`` for what a transpose brings. ``holding`` names the
    buffer the current block lives in (None: the caller's array or a fresh one)."""

    def __init__(self, block: Any) -> None:
        self.enabled = type(block) is np.ndarray and block.nbytes >= MIN_REUSED_BYTES
        self.holding: str | None = None

    def _view(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        size = math.prod(shape)
        buf = _BUFFERS.get(name)
        if buf is None or buf.dtype != dtype or buf.size < size:
            buf = _BUFFERS[name] = np.empty(size, dtype)
        return buf[:size].reshape(shape)

    def free(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray | None:
        """A buffer of ``shape`` that does not hold the current block (None: use a fresh one)."""
        if not self.enabled:
            return None
        name = "b" if self.holding == "a" else "a"
        self.holding = name
        return self._view(name, shape, np.dtype(dtype))

    def transform(
        self, fft: Any, block: Any, n: int, axis: int, func: str, norm: Any, last: bool
    ) -> Any:
        """``fft.<func>(block, n, axis, norm)``, into a free buffer unless it is the result."""
        shape = list(block.shape)
        shape[axis] = n // 2 + 1 if func == "rfft" else n
        dtype = np.fft.ifft(np.zeros(1, block.dtype)).dtype
        if func == "irfft":
            dtype = np.dtype(dtype.char.lower())  # complex -> the real of its precision
        out = None if last else self.free(tuple(shape), dtype)
        if out is None:
            self.holding = None
            return getattr(fft, func)(block, n=n, axis=axis, norm=norm)
        return getattr(fft, func)(block, n=n, axis=axis, norm=norm, out=out)

    def move(self, block: Any, mesh: Any, before: Layout, after: Layout, last: bool) -> Any:
        """``block`` (in ``before``) in ``after``: one all-to-all into the buffers, else
        ``with_layout``. Collective over the mesh."""
        steps = plan_redistribution(before, after, True)
        one = len(steps) == 1 and steps[0][0] == "all_to_all"  # else nested: the general way
        if not self.enabled or last or tracing.hooked or not one:
            self.holding = None
            spec = DArraySpec(mesh, before, np.dtype(block.dtype))
            return DArray(block, spec).with_layout(after).local
        _, m, i, j, split_sizes, concat_sizes = steps[0]
        comm = mesh.comm(m)
        rank = comm.Get_rank()
        # Pack: piece p of the split axis j, concat axis i first, one after another.
        send = self._view("b" if self.holding == "a" else "a", (block.size,), block.dtype)
        offset, start = 0, 0
        for size in split_sizes:
            index = [slice(None)] * block.ndim
            index[j] = slice(start, start + size)
            piece = np.moveaxis(block[tuple(index)], i, 0)
            send[offset : offset + piece.size].reshape(piece.shape)[...] = piece
            offset += piece.size
            start += size
        rest = [s for d, s in enumerate(block.shape) if d != i]
        rest[j - (j > i)] = split_sizes[rank]
        recv = self._view("recv", (sum(concat_sizes), *rest), np.dtype(block.dtype))
        self.holding = "recv"
        row = math.prod(rest)
        per_piece = block.size // block.shape[j] if block.shape[j] else 0
        send_counts = [s * per_piece for s in split_sizes]
        recv_counts = [s * row for s in concat_sizes]
        datatype = mpi_datatype(block.dtype)
        if min(send_counts) == max(send_counts) == min(recv_counts) == max(recv_counts):
            comm.Alltoall([send, datatype], [recv, datatype])
        else:
            comm.Alltoallv(
                [send, (send_counts, offsets_of(send_counts)), datatype],
                [recv, (recv_counts, offsets_of(recv_counts)), datatype],
            )
        return np.moveaxis(recv, 0, i)  # a view: the next transform reads it in place
