"""Ops with their own communication algorithm, one file per algorithm."""

# Imported for their registrations: order, search and sets; signals (convolve, shifts, hfft).
from dmesh.ops.kernels import convolve, fft_shifts, partition, search, sets  # noqa: F401
