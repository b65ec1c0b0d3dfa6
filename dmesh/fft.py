"""``dmesh.fft``: the DFT helpers of ``numpy.fft`` that make new arrays, as DArrays.

``dmesh.fft.fftfreq(n, d, mesh=...)`` is ``np.fft.fftfreq`` sharded on the mesh
(the same functions as ``dmesh.fftfreq``/``dmesh.rfftfreq``). The transforms
themselves are NumPy's: ``np.fft.fftn(a)`` of a DArray dispatches.
"""

from dmesh.fft_freq import fftfreq, rfftfreq

__all__ = ["fftfreq", "rfftfreq"]
