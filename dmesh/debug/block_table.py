"""``visualize``: a table of which block of a DArray lives on which mesh coordinates.

Like ``jax.debug.visualize_array_sharding``. Everything is read from the
spec (mesh shape, placements, block boundaries), so it is local: no rank
communicates, and every rank computes the same text.

A 1-D or 2-D array is drawn as a grid: one row per distinct row-block range,
one column per distinct column-block range (a 1-D array has one row). Each
cell lists the mesh coordinates holding that block, one per line, then the
block's index ranges and shape::

    f64[5,6] (S(0), S(1)) on mesh dim0=2,dim1=2
    +----------------+----------------+
    | (0, 0)         | (0, 1)         |
    | [0:3, 0:3] 3x3 | [0:3, 3:6] 3x3 |
    +----------------+----------------+
    | (1, 0)         | (1, 1)         |
    | [3:5, 0:3] 2x3 | [3:5, 3:6] 2x3 |
    +----------------+----------------+

Arrays of other ndim give a per-dim summary (length, the mesh dims sharding it, block
boundaries). A ``Partial`` mesh dim adds a footer line ("partial sum over mesh
dim 1 (y)"): the coordinates along it hold addends of the block, not copies.
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any, Literal

from dmesh.collectives.errors import ArgumentTypeError
from dmesh.core.layout import sharding_mesh_dims
from dmesh.core.placement import Partial

if TYPE_CHECKING:
    from dmesh.darray import DArray

__all__ = ["visualize"]

Cell = list[str]


def visualize(
    a: DArray, *, file: IO[str] | Literal[False] | None = None, use_rich: bool | None = None
) -> str:
    """Show which block of ``a`` each mesh coordinate holds; return the text on every rank.

    Local (no communication). The text is printed only on rank 0 of ``a``'s
    mesh, to ``file`` (default ``sys.stdout``); ``file=False`` prints nothing.

    ``use_rich``: False renders plain, deterministic ASCII text; True renders a
    ``rich`` table (``rich`` must be installed); None (default) uses ``rich``
    when it is importable and the output file is a terminal. The returned
    string is the rendered text without colour codes.
    """
    from dmesh.darray import DArray

    if not isinstance(a, DArray):
        raise ArgumentTypeError(
            f"visualize: expected a DArray, got {type(a).__name__}; "
            "build one with dmesh.distribute or a dmesh factory"
        )
    out = sys.stdout if file is None else file
    if use_rich is None:
        use_rich = out is not False and _isatty(out) and _rich_available()
    title = repr(a.spec)
    grid = _grid(a) if a.ndim in (1, 2) else None
    footer = _footer(a)
    if use_rich:
        return _emit_rich(title, grid, _summary_rows(a), footer, out, a.mesh.rank == 0)
    body = _render_grid(grid) if grid is not None else _render_summary(_summary_rows(a))
    text = "\n".join([title, *body, *footer]) + "\n"
    if out is not False and a.mesh.rank == 0:
        out.write(text)
        out.flush()
    return text


# -- the model: cells of a grid, rows of a summary ---------------------------------


def _coords(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    coords: list[tuple[int, ...]] = [()]
    for n in shape:
        coords = [c + (i,) for c in coords for i in range(n)]
    return coords


def _fmt_coord(coord: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(c) for c in coord) + ")"


def _grid(a: DArray) -> list[list[Cell]]:
    """Cells by (row block, column block); each cell: coordinates, then ranges and shape."""
    layout = a.spec.layout
    holders: dict[tuple[tuple[int, int], ...], list[tuple[int, ...]]] = {}
    for coord in _coords(layout.mesh_shape):
        holders.setdefault(layout.block(coord), []).append(coord)
    rows = sorted({block[0] for block in holders}) if a.ndim == 2 else [(0, 0)]
    cols = sorted({block[-1] for block in holders})
    grid: list[list[Cell]] = []
    for r in rows:
        line: list[Cell] = []
        for c in cols:
            block = (r, c) if a.ndim == 2 else (c,)
            coords = holders.get(block)
            if coords is None:
                line.append(["-"])
                continue
            ranges = ", ".join(f"{lo}:{hi}" for lo, hi in block)
            shape = "x".join(str(hi - lo) for lo, hi in block)
            line.append([_fmt_coord(k) for k in coords] + [f"[{ranges}] {shape}"])
        grid.append(line)
    return grid


def _summary_rows(a: DArray) -> list[list[str]]:
    layout = a.spec.layout
    names = a.mesh.names
    rows = [["dim", "length", "sharded by", "block boundaries"]]
    for d, n in enumerate(layout.shape):
        mesh_dims = sharding_mesh_dims(layout.placements, d)
        by = ", ".join(f"{m} ({names[m]})" for m in mesh_dims) or "-"
        cut = layout.bounds[d] or (0, n)
        rows.append([str(d), str(n), by, ", ".join(str(b) for b in cut)])
    return rows


def _footer(a: DArray) -> list[str]:
    names = a.mesh.names
    return [
        f"partial {p.op} over mesh dim {m} ({names[m]})"
        for m, p in enumerate(a.placements)
        if isinstance(p, Partial)
    ]


# -- plain text ---------------------------------------------------------------------


def _render_grid(grid: list[list[Cell]]) -> list[str]:
    ncols = len(grid[0])
    widths = [max(len(s) for row in grid for s in row[j]) for j in range(ncols)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    lines = [rule]
    for row in grid:
        height = max(len(cell) for cell in row)
        for i in range(height):
            parts = [(cell[i] if i < len(cell) else "").ljust(w) for cell, w in zip(row, widths)]
            lines.append("| " + " | ".join(parts) + " |")
        lines.append(rule)
    return lines


def _render_summary(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[j]) for row in rows) for j in range(len(rows[0]))]
    return ["  ".join(s.ljust(w) for s, w in zip(row, widths)).rstrip() for row in rows]


# -- rich (optional) ----------------------------------------------------------------


def _isatty(out: Any) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


def _rich_available() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def _emit_rich(
    title: str,
    grid: list[list[Cell]] | None,
    summary: list[list[str]],
    footer: list[str],
    out: IO[str] | Literal[False],
    printer: bool,
) -> str:
    try:
        import io

        from rich.console import Console
        from rich.table import Table
    except ImportError as exc:
        raise ImportError(
            "visualize(use_rich=True) needs the rich package; install it, "
            "or pass use_rich=False for plain text"
        ) from exc
    if grid is not None:
        table = Table(title=title, show_header=False, show_lines=True, caption="\n".join(footer))
        for cells in grid:
            table.add_row(*["\n".join(cell) for cell in cells])
    else:
        table = Table(*summary[0], title=title, caption="\n".join(footer))
        for fields in summary[1:]:
            table.add_row(*fields)
    buffer = io.StringIO()
    Console(file=buffer, width=200, color_system=None).print(table)
    if out is not False and printer:
        Console(file=out).print(table)
    return buffer.getvalue()
