"""``np.fft`` on DArrays: local transforms, and all-to-all transposes for sharded axes.

An axis is transformed where a block holds it whole (no mesh dim of size > 1
shards it), with ``numpy.fft`` (``cupy.fft`` on a CUDA mesh) on the block. A
sharded axis that is to be transformed first gives its sharding to another
axis: ``Shard(i) -> Shard(j)`` on the mesh dims that shard ``i``, one
all-to-all over each such mesh dim (``DArray.with_layout``, which packs the
pieces into one ``Alltoall(v)``). This is the slab decomposition on a 1-D mesh
and the pencil decomposition on a 2-D mesh. No rank ever holds more than a
block, and the output stays where the last transpose put it.

The axis that takes the sharding (the plan is a pure function of the layout,
cached: :func:`dmesh.core.fft_plan.plan_fft`) is the nearest one that needs no more transforms
and is not sharded, searching up (``i + 1, i + 2, ...``, cyclically) for
forward transforms and down for inverse ones. Outputs, all axes transformed:

=============================  ==================  ==================
input                          ``fftn``            ``ifftn``
=============================  ==================  ==================
3-D ``(S(0),)``                ``(S(1),)``         ``(S(2),)``
3-D ``(S(1),)``                ``(S(2),)``         ``(S(0),)``
2-D ``(S(0),)``                ``(S(1),)``         ``(S(1),)``
3-D ``(S(0), S(1))``           ``(S(1), S(2))``    ``(S(2), S(0))``
3-D ``(S(1), S(2))``           ``(S(2), S(0))``    ``(S(0), S(1))``
``Replicate()`` everywhere     unchanged           unchanged
=============================  ==================  ==================

So the inverse of an output starts on the axes its blocks hold and walks the
sharding back: ``ifftn(fftn(a))`` has ``a``'s placements, one transpose per
sharded mesh dim each way. ``rfftn``/``irfftn`` give the same layouts (the
sharded axis of the spectrum is a full-length one) unless the real (last)
axis is sharded: ``rfftn`` transforms it first and ``irfftn`` last, as NumPy
does, so its sharding is moved away first (one more transpose) and
``irfftn`` cannot end sharded there. Axes not transformed keep their
sharding unless a sharded axis needs one of them; a 2-D array sharded on
both axes of a 2-D mesh nests the shardings (``(S(0), S(0))``), which moves
by the general transfer. Partial inputs are reduced first; replicated inputs
need no message. Where the time goes (2 ranks, 128^3 complex128, slab,
cProfile): the local ``numpy.fft`` passes 80%, the ``Alltoall`` 11%, packing
the pieces 7%. Keeping the intermediates and the packed and received pieces
in buffers reused between calls (no fresh pages), or sending the strided
pieces with an MPI vector datatype instead of packing them, measured the same
on a quiet machine (within 4%): ``with_layout`` is good enough. The ``fftn``
takes about 0.95x the time of mpi4py-fft's ``PFFT`` (FFTW) on the same slab
decomposition at 128^3 and 0.76x at 256^3, 0.7x of ``PFFT`` with NumPy's FFT
(medians of alternating batches, ``scripts/bench_fft.py``). At 256^2 (the
spectral solver of ``scripts/bench_programs.py``, 2 ranks) the transposes
matter more: with each rank's own piece kept out of MPI
(:func:`dmesh.collectives.all_to_all`) an ``rfft2`` takes about 200 us and
an ``irfft2`` 225 us against ``PFFT``'s 255 and 205, and the solver 1.01x
``PFFT``'s time. FFTW's own local passes are faster than pocketfft's on bare
buffers (``rfft`` of 128 x 256 float64: 39 us against 50), so local passes
through mpi4py-fft's FFTW wrapper were tried (``FFTW_ESTIMATE`` plans, for
the same bits on every rank; aligned results; the caller's block copied in
where misaligned; NumPy's scaling in one more pass): in the solver's
transforms at 2 ranks, 4 ``irfft2`` and an ``rfft2`` took 1.31-1.36 ms
against 1.12 with pocketfft and 1.09-1.17 for ``PFFT``. Not kept.

A 1-D array sharded along its only axis (no other axis can take the
sharding) takes the four-step algorithm instead (``fft``, ``ifft``, ``rfft``,
``irfft``, with ``n`` cutting or padding: ``ops/kernels/fft_1d.py``). Not
supported (``UnsupportedError`` on every rank, before any message): repeated
axes, and ``out=``.
"""

from __future__ import annotations

import functools
import warnings
from functools import lru_cache
from typing import Any

import numpy as np

from dmesh import _hooks
from dmesh.collectives import tracing
from dmesh.collectives.device import array_module
from dmesh.collectives.errors import (
    ArgumentError,
    ArgumentTypeError,
    AxisArgumentError,
    UnsupportedError,
)
from dmesh.core.fft_plan import axis_blocks, one_d_transforms, plan_fft
from dmesh.core.layout import Layout
from dmesh.core.placement import Partial, Placement, Replicate
from dmesh.core.plan import plan_redistribution
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.registry import decompose
from dmesh.redistribution import run_steps

__all__ = ["plan_fft"]

_NORMS = (None, "backward", "ortho", "forward")


@lru_cache(maxsize=256)
def _result_dtype(dtype: np.dtype, funcs: tuple[str, ...]) -> np.dtype:
    """The dtype ``numpy.fft`` gives after ``funcs`` (for ranks that hold no data)."""
    probe = np.zeros(4, dtype)
    for func in funcs:
        probe = getattr(np.fft, func)(probe)
    return np.dtype(probe.dtype)


# -- arguments ---------------------------------------------------------------------
def _axis(axis: Any, ndim: int, name: str) -> int:
    try:
        value = int(axis)
    except TypeError as exc:
        raise ArgumentTypeError(f"np.fft.{name}: axes must be ints, got {axis!r}") from exc
    if not -ndim <= value < ndim:
        raise AxisArgumentError(value, ndim, f"np.fft.{name}")
    return value % ndim


def _length(n: Any, name: str) -> int:
    if int(n) < 1:
        raise ArgumentError(f"np.fft.{name}: Invalid number of FFT data points ({n}) specified.")
    return int(n)


def _cook(
    shape: tuple[int, ...], s: Any, axes: Any, invreal: bool, name: str
) -> tuple[list[int], list[int]]:
    """Lengths and axes of an n-D transform, as ``numpy.fft``'s ``_cook_nd_args``."""
    if axes is None:
        if s is not None:
            warnings.warn(
                "`axes` should not be `None` if `s` is not `None` (Deprecated in NumPy 2.0); "
                "pass axes",
                DeprecationWarning,
                stacklevel=4,
            )
            axes = list(range(-len(s), 0))
        else:
            axes = list(range(len(shape)))
    axes = [_axis(ax, len(shape), name) for ax in axes]
    if len(set(axes)) != len(axes):
        raise UnsupportedError(
            f"np.fft.{name} on DArrays: repeated axes {axes} are not supported; give each axis once"
        )
    if s is None:
        lengths: list[Any] = [shape[ax] for ax in axes]
        if invreal and axes:
            lengths[-1] = 2 * (shape[axes[-1]] - 1)
    else:
        lengths = list(s)
        if len(lengths) != len(axes):
            raise ArgumentError(f"np.fft.{name}: Shape and axes have different lengths.")
        for i, (n, ax) in enumerate(zip(lengths, axes)):
            if n is None:
                lengths[i] = 2 * (shape[ax] - 1) if invreal and i == len(axes) - 1 else shape[ax]
            elif n == -1:
                lengths[i] = shape[ax]
    return [_length(n, name) for n in lengths], axes


# -- execution ---------------------------------------------------------------------
def _run(a: Any, kind: str, s: Any, axes: Any, norm: Any, out: Any, name: str) -> DArray:
    """``np.fft.<name>`` of the DArray ``a`` (collective when a transformed axis is sharded)."""
    if not isinstance(a, DArray):
        raise UnsupportedError(
            f"np.fft.{name} of a NumPy array with a DArray out=: out= is not supported"
        )
    if out is not None:
        raise UnsupportedError(f"np.fft.{name} on DArrays: out= is not supported; use the result")
    if norm not in _NORMS:
        raise ArgumentError(
            f'np.fft.{name}: Invalid norm value {norm!r}; should be "backward", "ortho" or '
            '"forward"'
        )
    if kind in ("rfft", "irfft") and axes is not None and not len(axes):
        raise ArgumentError(f"np.fft.{name}: at least one axis must be transformed")
    if kind == "rfft" and a.dtype.kind == "c":
        raise ArgumentTypeError(f"np.fft.{name}: the input must be real, got {a.dtype}")
    lengths, axes = _cook(a.shape, s, axes, kind == "irfft", name)
    if not axes:
        return a  # NumPy returns its input unchanged
    if a.ndim == 1 and axis_blocks(a.spec.layout, 0) > 1:  # no other axis: the four-step FFT
        return _sharded_1d(a, kind, lengths, norm)
    transforms = one_d_transforms(kind, lengths, axes)
    # Planned before any message, from what every rank knows: the layout
    # reduce_partials() will give (it rebalances, as every redistribute does).
    start = a.spec.layout
    if any(isinstance(p, Partial) for p in start.placements):
        placements: tuple[Placement, ...] = tuple(
            Replicate() if isinstance(p, Partial) else p for p in start.placements
        )
        start = Layout.balanced(start.mesh_shape, placements, start.shape)
    steps, final = plan_fft(start, transforms, kind in ("fft", "rfft"), name)
    a = a.reduce_partials().with_layout(start)  # (moves nothing: the layouts agree)
    recorder = _hooks.recorder
    if recorder is not None and recorder.records(a):  # dmesh.compile traces: the plan recorded
        return _recorded(recorder, a, steps, norm, name)
    mesh = a.mesh
    if mesh.coordinate is None:  # outside the mesh: an empty block, no message
        xp = array_module(a.local)
        dtype = _result_dtype(np.dtype(a.dtype), tuple(t[2] for t in transforms))
        return DArray(xp.empty((0,) * len(final.shape), dtype), DArraySpec(mesh, final, dtype))
    block = a.local
    layout = a.spec.layout
    for step in steps:
        if step[0] == "transform":
            block = _passes(block, passes=step[1], norm=norm)
        elif tracing.hooked:  # watched: as any move
            spec = DArraySpec(mesh, layout, np.dtype(block.dtype))
            block = DArray(block, spec).with_layout(step[1]).local
        else:  # the transpose's planned steps run on the block (cached plan, no DArray)
            block = run_steps(block, plan_redistribution(layout, step[1], True), mesh, mesh)
        layout = step[-1]
    return DArray(block, DArraySpec(mesh, final, np.dtype(block.dtype)))


def _passes(block: Any, passes: tuple[Any, ...], norm: Any) -> Any:
    """A plan's ``"transform"`` step on a block: the 1-D transforms ``(axis, n, func)`` of
    axes the block holds whole, in order (no message)."""
    fft = array_module(block).fft
    for axis, n, func in passes:
        block = getattr(fft, func)(block, n=n, axis=axis, norm=norm)
    return block


def _recorded(recorder: Any, a: DArray, steps: tuple[Any, ...], norm: Any, name: str) -> DArray:
    """The plan's steps on ``a``, a stand-in of the function ``dmesh.compile`` traces: each
    ``"transform"`` step a node on the block (its layout and dtype known from the plan),
    each transpose a recorded redistribution. No block is read, so FFTs no longer break a
    traced function (its plan runs them as the eager path does, with the same bits)."""
    x: DArray = a
    dtype = np.dtype(a.dtype)
    for step in steps:
        if step[0] == "transform":
            dtype = _result_dtype(dtype, tuple(func for _, _, func in step[1]))
            spec = DArraySpec(a.mesh, step[2], dtype)
            what = f"np.fft.{name} passes {step[1]} norm={norm!r}"
            x = recorder.block_map(
                functools.partial(_passes, passes=step[1], norm=norm), x, spec, what
            )
        else:
            x = x.with_layout(step[1])
    return x


# -- the NumPy functions -----------------------------------------------------------
def _one(a: Any, kind: str, n: Any, axis: Any, norm: Any, out: Any) -> DArray:
    lengths = None if n is None else [_length(n, kind)]  # -1 is no default here, as in NumPy
    if isinstance(a, DArray) and a.ndim == 1 and out is None and axis_blocks(a.spec.layout, 0) > 1:
        _axis(axis, 1, kind)
        return _sharded_1d(a, kind, lengths, norm)
    return _run(a, kind, lengths, [axis], norm, out, kind)


def _sharded_1d(a: DArray, kind: str, lengths: Any, norm: Any) -> DArray:
    """``np.fft.<kind>`` of a 1-D DArray sharded along its axis: the four-step algorithm."""
    if norm not in _NORMS:
        raise ArgumentError(
            f'np.fft.{kind}: Invalid norm value {norm!r}; should be "backward", "ortho" or '
            '"forward"'
        )
    if kind == "rfft" and a.dtype.kind == "c":
        raise ArgumentTypeError(f"np.fft.{kind}: the input must be real, got {a.dtype}")
    from dmesh.ops.kernels.fft_1d import sharded_1d  # the module builds on this one

    return sharded_1d(a, kind, None if lengths is None else lengths[0], norm)


@decompose(np.fft.fft)
def fft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.fft`` of a DArray along ``axis`` (collective when ``axis`` is sharded).

    A sharded ``axis`` gives its sharding to the nearest unsharded axis above it (cyclically);
    see the module docstring for the output layout.
    """
    return _one(a, "fft", n, axis, norm, out)


@decompose(np.fft.ifft)
def ifft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.ifft`` of a DArray; a sharded ``axis`` gives its sharding to the next axis down."""
    return _one(a, "ifft", n, axis, norm, out)


@decompose(np.fft.rfft)
def rfft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.rfft`` of a real DArray: ``n // 2 + 1`` outputs along ``axis`` (as :func:`fft`)."""
    return _one(a, "rfft", n, axis, norm, out)


@decompose(np.fft.irfft)
def irfft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.irfft``: ``n`` real outputs along ``axis`` (default ``2 (m - 1)``); see ifft."""
    return _one(a, "irfft", n, axis, norm, out)


@decompose(np.fft.fftn)
def fftn(a: Any, s: Any = None, axes: Any = None, norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.fftn`` of a DArray (collective when a transformed axis is sharded).

    Slab/pencil: each sharded axis gives its sharding to the nearest axis up
    that is done and unsharded, so ``(S(0),)`` becomes ``(S(1),)`` and
    ``(S(0), S(1))`` becomes ``(S(1), S(2))`` for a 3-D array (module docstring).
    """
    return _run(a, "fft", s, axes, norm, out, "fftn")


@decompose(np.fft.ifftn)
def ifftn(a: Any, s: Any = None, axes: Any = None, norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.ifftn`` of a DArray: shardings move down, undoing :func:`fftn`'s layout.

    ``ifftn`` of ``fftn``'s ``(S(1),)`` output gives ``(S(0),)`` again, with no
    redistribution before it starts.
    """
    return _run(a, "ifft", s, axes, norm, out, "ifftn")


@decompose(np.fft.fft2)
def fft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.fft2``: :func:`fftn` over ``axes`` (default the last two)."""
    return _run(a, "fft", s, axes, norm, out, "fft2")


@decompose(np.fft.ifft2)
def ifft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.ifft2``: :func:`ifftn` over ``axes`` (default the last two)."""
    return _run(a, "ifft", s, axes, norm, out, "ifft2")


@decompose(np.fft.rfftn)
def rfftn(a: Any, s: Any = None, axes: Any = None, norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.rfftn`` of a real DArray: the last of ``axes`` gets ``s[-1] // 2 + 1`` outputs.

    The real axis is transformed first (moving its sharding away first if it
    is sharded), then the others as in :func:`fftn`: ``(S(0),)`` gives
    ``(S(1),)`` for a 3-D array, sharded along the full-length axis 1.
    """
    return _run(a, "rfft", s, axes, norm, out, "rfftn")


@decompose(np.fft.irfftn)
def irfftn(a: Any, s: Any = None, axes: Any = None, norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.irfftn``: real output, ``s[-1]`` (default ``2 (m - 1)``) long on the last axis.

    The c2c axes go first as in :func:`ifftn`, the real axis last; ``irfftn``
    of :func:`rfftn`'s ``(S(1),)`` output gives ``(S(0),)`` with no
    redistribution before it starts. Give ``s`` for odd lengths, as in NumPy.
    """
    return _run(a, "irfft", s, axes, norm, out, "irfftn")


@decompose(np.fft.rfft2)
def rfft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None, out: Any = None) -> DArray:
    """``np.fft.rfft2``: :func:`rfftn` over ``axes`` (default the last two)."""
    return _run(a, "rfft", s, axes, norm, out, "rfft2")


@decompose(np.fft.irfft2)
def irfft2(
    a: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None, out: Any = None
) -> DArray:
    """``np.fft.irfft2``: :func:`irfftn` over ``axes`` (default the last two)."""
    return _run(a, "irfft", s, axes, norm, out, "irfft2")
