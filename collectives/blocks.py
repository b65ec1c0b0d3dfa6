"""Block arithmetic and axis handling: pure functions, no communication."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, AxisArgumentError


@lru_cache(maxsize=4096)
def balanced_sizes(length: int, parts: int) -> tuple[int, ...]:
    """Piece sizes of ``numpy.array_split``: the first ``length % parts`` get one more."""
    base, extra = divmod(length, parts)
    return tuple(base + 1 if i < extra else base for i in range(parts))


def offsets_of(sizes: Sequence[int]) -> list[int]:
    """Exclusive prefix sums of ``sizes``."""
    out = [0] * len(sizes)
    total = 0
    for i, s in enumerate(sizes):
        out[i] = total
        total += s
    return out


def normalize_axis(axis: Any, ndim: int, argument: str = "axis") -> int:
    """Return ``axis`` in ``[0, ndim)``, accepting negative values like NumPy."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise ArgumentTypeError(f"{argument}: expected an int, got {type(axis).__name__}: {axis!r}")
    if not -ndim <= axis < ndim:
        raise AxisArgumentError(
            f"{argument}={axis} is out of range for an array of {ndim} dimension(s); "
            f"allowed: {-ndim} to {ndim - 1}"
        )
    return axis + ndim if axis < 0 else axis


def check_sizes(
    sizes: Any, parts: int, total: int | None, argument: str = "sizes"
) -> tuple[int, ...]:
    """Validate explicit piece sizes: ``parts`` non-negative ints summing to ``total``."""
    try:
        # map(operator.index) runs in C (this is on the small-message path) and,
        # unlike int(), rejects floats such as 2.5.
        values = tuple(map(operator.index, sizes))
    except TypeError as exc:
        raise ArgumentTypeError(
            f"{argument}: expected a sequence of {parts} ints, got {sizes!r}"
        ) from exc
    if len(values) != parts or (values and min(values) < 0):
        raise ArgumentError(
            f"{argument}: expected {parts} non-negative sizes (one per rank), got {list(values)}"
        )
    if total is not None and sum(values) != total:
        raise ArgumentError(
            f"{argument}: the sizes {list(values)} sum to {sum(values)}, "
            f"but the axis being split has length {total}"
        )
    return values


def resolve_shape(shape: Any, size: int) -> tuple[int, ...]:
    """A reshape target with its one ``-1`` filled in, checked against ``size`` elements."""
    items = (shape,) if isinstance(shape, int) or hasattr(shape, "__index__") else shape
    try:
        dims = [operator.index(n) for n in items]
    except TypeError as exc:
        raise ArgumentTypeError(f"shape: expected ints, got {shape!r}") from exc
    unknown = [i for i, n in enumerate(dims) if n == -1]
    known = math.prod(n for n in dims if n != -1)
    bad = len(unknown) > 1 or any(n < -1 for n in dims)
    if not bad and unknown and known and size % known == 0:
        dims[unknown[0]] = size // known
    if bad or -1 in dims or math.prod(dims) != size:
        raise ArgumentError(f"cannot reshape an array of size {size} into shape {tuple(dims)}")
    return tuple(dims)
