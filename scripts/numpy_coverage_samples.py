"""The names and sample calls of the NumPy coverage table (scripts/numpy_coverage.py).

Four groups of names (issue 14): the NumPy functions that dask.array also
implements (``numpy_coverage_functions.FUNCTIONS``), the ``np.linalg`` and
``np.fft`` functions, and the ndarray methods and properties users call; plus
the operators, as an extra group. A sample is one line of user code (statements
separated by ``;``, the last one an expression whose value is compared),
evaluated by ``evaluate`` in a namespace of inputs built by ``make_inputs``.
Nothing here imports MPI: the same code runs on NumPy arrays for the reference.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy_coverage_functions import DASK_NAMES, FUNCTIONS

LINALG: dict[str, list[str]] = {
    "cholesky": ["np.linalg.cholesky(s)"],
    "cond": ["np.linalg.cond(g)", "np.linalg.cond(m)"],
    "cross": ["np.linalg.cross(m[:, :3], p[:, :3])"],
    "det": ["np.linalg.det(g)"],
    "diagonal": ["np.linalg.diagonal(m)"],
    "eig": ["d, q = np.linalg.eig(s); (np.sort(d), np.allclose(s @ q, q * d))"],
    "eigh": ["d, q = np.linalg.eigh(s); (d, np.abs(q))"],
    "eigvals": ["np.sort(np.linalg.eigvals(s))"],
    "eigvalsh": ["np.linalg.eigvalsh(s)"],
    "inv": ["np.linalg.inv(g)", "np.linalg.inv(s)"],
    "lstsq": ["np.linalg.lstsq(m, y, rcond=None)"],
    "matmul": ["np.linalg.matmul(m, m.T)"],
    "matrix_norm": ["np.linalg.matrix_norm(m)", "np.linalg.matrix_norm(m, ord=1)"],
    "matrix_power": ["np.linalg.matrix_power(g, 3)"],
    "matrix_rank": ["np.linalg.matrix_rank(m)"],
    "matrix_transpose": ["np.linalg.matrix_transpose(m)"],
    "multi_dot": ["np.linalg.multi_dot([m, m.T, m])"],
    "norm": [
        "np.linalg.norm(m)",
        "np.linalg.norm(v)",
        "np.linalg.norm(m, ord=1)",
        "np.linalg.norm(m, ord=np.inf)",
        'np.linalg.norm(m, "nuc")',
        "np.linalg.norm(m, axis=1)",
        "np.linalg.norm(c)",
    ],
    "outer": ["np.linalg.outer(v, r)"],
    "pinv": ["np.linalg.pinv(m)"],
    "qr": ["q, z = np.linalg.qr(m); (np.abs(q), np.abs(z), q @ z)"],
    "slogdet": ["np.linalg.slogdet(g)"],
    "solve": ["np.linalg.solve(g, r)", "np.linalg.solve(s, g)"],
    "svd": [
        "q, d, z = np.linalg.svd(m, full_matrices=False); (np.abs(q), d, np.abs(z))",
        "np.linalg.svd(m, compute_uv=False)",
    ],
    "svdvals": ["np.linalg.svdvals(m)"],
    "tensordot": ["np.linalg.tensordot(m, p, axes=([0], [0]))"],
    "tensorinv": ["np.linalg.tensorinv(e4, ind=2)"],
    "tensorsolve": ["np.linalg.tensorsolve(e4, m[:2, :3])"],
    "trace": ["np.linalg.trace(s)"],
    "vecdot": ["np.linalg.vecdot(m, p)"],
    "vector_norm": ["np.linalg.vector_norm(v)", "np.linalg.vector_norm(m, axis=0, ord=1)"],
}

FFT: dict[str, list[str]] = {
    "fft": ["np.fft.fft(v)", "np.fft.fft(m, axis=0)", "np.fft.fft(c)"],
    "ifft": ["np.fft.ifft(cv)", "np.fft.ifft(c, axis=0)"],
    "fft2": ["np.fft.fft2(m)"],
    "ifft2": ["np.fft.ifft2(c)"],
    "fftn": ["np.fft.fftn(t)"],
    "ifftn": ["np.fft.ifftn(c)"],
    "rfft": ["np.fft.rfft(v)", "np.fft.rfft(m, axis=0)"],
    "irfft": ["np.fft.irfft(cv)", "np.fft.irfft(c, axis=0)"],
    "rfft2": ["np.fft.rfft2(m)"],
    "irfft2": ["np.fft.irfft2(c)"],
    "rfftn": ["np.fft.rfftn(t)"],
    "irfftn": ["np.fft.irfftn(c)"],
    "hfft": ["np.fft.hfft(cv)"],
    "ihfft": ["np.fft.ihfft(v)"],
    "fftfreq": ["mk.fft.fftfreq(8)", "mk.fft.fftfreq(9, d=0.5)"],
    "rfftfreq": ["mk.fft.rfftfreq(8)"],
    "fftshift": ["np.fft.fftshift(v)", "np.fft.fftshift(m, axes=0)"],
    "ifftshift": ["np.fft.ifftshift(m)"],
}

METHODS: dict[str, list[str]] = {
    "T": ["m.T"],
    "all": ["b.all()", "b.all(axis=0)"],
    "any": ["b.any(axis=1)"],
    "argmax": ["m.argmax()", "m.argmax(axis=0)"],
    "argmin": ["m.argmin(axis=1)"],
    "argpartition": ["z = v.argpartition(4); (z[4], np.sort(z[:4]))"],
    "argsort": ["v.argsort()", "m.argsort(axis=0)"],
    "astype": ["m.astype(np.float32)", "i.astype(float)", "m.astype(int)"],
    "choose": ["(iv % 3).choose([v, w, sv])"],
    "clip": ["m.clip(-0.5, 0.5)", "m.clip(max=0.2)"],
    "compress": ["v.compress(bv)", "m.compress([True, False, True], axis=1)"],
    "conj": ["c.conj()"],
    "conjugate": ["c.conjugate()"],
    "copy": ["z = m.copy(); z[0, 0] = 99.0; (m, z)"],
    "cumprod": ["m.cumprod(axis=0)"],
    "cumsum": ["m.cumsum()", "m.cumsum(axis=1)"],
    "diagonal": ["m.diagonal()"],
    "dot": ["m.dot(r)", "m.dot(m.T)"],
    "dtype": ["m.dtype", "c.dtype"],
    "fill": ["z = m.copy(); z.fill(2.0); z"],
    "flat": ["m.flat[7]", "m.flat[[1, 8, 30]]"],
    "flatten": ["m.flatten()"],
    "imag": ["c.imag", "z = c.copy(); z.imag = 1.0; z"],
    "item": ["m.item(7)", "m.item((2, 3))"],
    "itemsize": ["m.itemsize"],
    "mT": ["m.mT", "t.mT"],
    "max": ["m.max()", "m.max(axis=1)"],
    "mean": ["m.mean()", "m.mean(axis=0)"],
    "min": ["m.min(axis=0)"],
    "nbytes": ["m.nbytes"],
    "ndim": ["t.ndim"],
    "nonzero": ["(m > 0).nonzero()"],
    "partition": [
        "z = v.copy(); z.partition(4); (z[4], (z[:4] <= z[4]).all(), (z[5:] >= z[4]).all())"
    ],
    "prod": ["p.prod(axis=0)"],
    "put": ["z = m.copy(); z.put([0, 7, 33], [1.0, 2.0, 3.0]); z"],
    "ravel": ["m.ravel()"],
    "real": ["c.real", "z = c.copy(); z.real = 0.0; z"],
    "repeat": ["v.repeat(2)", "m.repeat(2, axis=1)"],
    "reshape": ["m.reshape(5, 7)", "m.reshape(-1)"],
    "round": ["m.round(2)"],
    "searchsorted": ["sv.searchsorted(v)"],
    "shape": ["m.shape"],
    "size": ["m.size"],
    "sort": ["z = v.copy(); z.sort(); z", "z = m.copy(); z.sort(axis=0); z"],
    "squeeze": ["m[:, 2:3].squeeze()"],
    "std": ["m.std()", "m.std(axis=0)"],
    "sum": ["m.sum()", "m.sum(axis=0)"],
    "swapaxes": ["t.swapaxes(0, 1)"],
    "take": ["v.take([0, 3])", "m.take([1, 4], axis=0)"],
    "tolist": ["m.tolist()"],
    "trace": ["s.trace()"],
    "transpose": ["m.transpose()", "t.transpose(2, 0, 1)"],
    "var": ["m.var()", "c.var()"],
}

OPERATORS: dict[str, list[str]] = {
    "a + b": ["m + p", "m + r", "m + 1"],
    "a - b": ["m - u"],
    "a * b": ["m * u", "2 * m"],
    "a / b": ["m / p", "1 / p"],
    "a // b": ["m // 0.3", "i // 3"],
    "a % b": ["m % 0.7"],
    "a ** b": ["p**2.5", "i**2"],
    "a @ b": ["m @ m.T", "m @ r", "v @ w"],
    "-a, +a, abs(a)": ["-m", "+m", "abs(m)"],
    "~a, a & b, a | b, a ^ b": ["~b", "b & (m > 0)", "b | (m > 0)", "i ^ k"],
    "comparisons": ["m < u", "i == k", "m >= 0.0"],
    "divmod(a, b)": ["divmod(m, 0.7)"],
    "in-place ops": ["z = m.copy(); z += 1; z *= 2; z"],
    "a[basic]": ["m[1:5, ::2]", "m[-1]", "v[::-2]"],
    "a[fancy]": ["m[[0, 6, 2]]", "v[iv]"],
    "a[mask]": ["m[m > 0]", "m[bv[:7]]"],
    "a[...] = x": ["z = m.copy(); z[1:3] = 0.0; z", "z = m.copy(); z[:, 1] = r[0]; z"],
    "a[mask] = x": ["z = m.copy(); z[z > 0] = 0.0; z"],
}

GROUPS: dict[str, tuple[str, dict[str, list[str]]]] = {
    "numpy": ("np.", FUNCTIONS),
    "linalg": ("np.linalg.", LINALG),
    "fft": ("np.fft.", FFT),
    "method": ("ndarray.", METHODS),
    "operator": ("", OPERATORS),
}
# The four lists of issue 14 (332 names); the operators are an extra group.
NAMES: dict[str, list[str]] = {
    "numpy": DASK_NAMES.split(),
    "linalg": str.split(
        "cholesky cond cross det diagonal eig eigh eigvals eigvalsh inv lstsq matmul matrix_norm"
        " matrix_power matrix_rank matrix_transpose multi_dot norm outer pinv qr slogdet solve svd"
        " svdvals tensordot tensorinv tensorsolve trace vecdot vector_norm"
    ),
    "fft": str.split(
        "fft ifft fft2 ifft2 fftn ifftn rfft irfft rfft2 irfft2 rfftn irfftn hfft ihfft fftfreq"
        " rfftfreq fftshift ifftshift"
    ),
    "method": str.split(
        "T all any argmax argmin argpartition argsort astype choose clip compress conj conjugate"
        " copy cumprod cumsum diagonal dot dtype fill flat flatten imag item itemsize mT max mean"
        " min nbytes ndim nonzero partition prod put ravel real repeat reshape round searchsorted"
        " shape size sort squeeze std sum swapaxes take tolist trace transpose var"
    ),
}


def make_inputs(seed: int = 14) -> dict[str, np.ndarray]:
    """The fixed NumPy inputs of every sample (the same on every rank for a seed)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(5, 5))
    h = rng.normal(size=9)
    h[[1, 4, 6]] = [np.nan, np.inf, -np.inf]
    hn = rng.normal(size=(7, 5))
    hn[[0, 3, 3, 6], [1, 0, 4, 2]] = np.nan
    return {
        "m": rng.normal(size=(7, 5)),
        "v": rng.normal(size=9),
        "w": rng.normal(size=9),
        "p": rng.uniform(0.1, 3.0, size=(7, 5)),
        "u": rng.uniform(-0.95, 0.95, size=(7, 5)),
        "i": rng.integers(-5, 6, size=(7, 5)),
        "k": rng.integers(-5, 6, size=(7, 5)),
        "iv": rng.integers(0, 8, size=9),
        "b": rng.random((7, 5)) < 0.5,
        "bv": rng.random(9) < 0.5,
        "c": rng.normal(size=(7, 5)) + 1j * rng.normal(size=(7, 5)),
        "cv": rng.normal(size=9) + 1j * rng.normal(size=9),
        "s": a @ a.T + 5 * np.eye(5),
        "g": rng.normal(size=(5, 5)) + 3 * np.eye(5),
        "r": rng.normal(size=5),
        "y": rng.normal(size=7),
        "t": rng.normal(size=(4, 3, 5)),
        "sv": np.sort(rng.normal(size=9)),
        "h": h,
        "hn": hn,
        "e4": rng.normal(size=(2, 3, 6)) + np.eye(6).reshape(2, 3, 6) * 3,
    }


class NumpyMaker:
    """``mk`` of the reference run: NumPy's own creation functions (``mk.fft.fftfreq`` too)."""

    fft = np.fft

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


def samples(group: str | None = None) -> Iterator[tuple[str, str, str]]:
    """Every (group, name, code) of the table, in table order (one group if given)."""
    for key, (_, table) in GROUPS.items():
        if group is None or key == group:
            for name, codes in table.items():
                for code in codes:
                    yield key, name, code


def split_flags(code: str) -> tuple[str, bool]:
    """(code without its ``shape:`` prefix, whether only shape and dtype are compared)."""
    if code.startswith("shape:"):
        return code[len("shape:") :].strip(), True
    return code, False


def evaluate(code: str, inputs: dict[str, Any], maker: Any) -> Any:
    """Run one sample: its statements, then the value of its last expression.

    ``inputs`` is the namespace of arrays (a dict, or a dict subclass that
    builds them on first use); ``np`` and ``mk`` are visible too.
    """
    code, _ = split_flags(code)
    tree = ast.parse(code)
    last = tree.body.pop()
    if not isinstance(last, ast.Expr):
        raise ValueError(f"sample must end with an expression: {code!r}")
    scope: dict[str, Any] = {"np": np, "mk": maker}
    if tree.body:
        exec(compile(tree, "<sample>", "exec"), scope, inputs)
    expression = compile(ast.Expression(last.value), "<sample>", "eval")
    return eval(expression, scope, inputs)


def display_name(group: str, name: str) -> str:
    """How the table shows a name: ``np.median``, ``np.linalg.qr``, ``ndarray.sort``."""
    return GROUPS[group][0] + name
