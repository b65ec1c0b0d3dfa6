"""Ops with their own communication algorithm, one file per algorithm."""

from dmesh.ops.kernels import partition, search, sets  # noqa: F401  # order, search and sets
from dmesh.ops.kernels import convolve, fft_shifts  # noqa: F401  # signals: convolve, shifts, hfft
