"""Draw ``make bench``'s JSON results as one PNG: each case's time over its baseline's.

Every benchmark script writes ``build/bench/<name>.json`` with a list of rows;
rows name their case and carry either a ``ratio`` (dmesh's time over the
baseline's) or a ``speedup`` (the baseline's time over dmesh's). Both are drawn
as the time ratio on a log axis with a line at 1: left of it dmesh is faster.
Needs matplotlib (the ``bench`` extra); without it, says so and draws nothing.

Usage: ``python scripts/bench_chart.py [directory] [output.png]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "build" / "bench"


def time_ratios(doc: dict[str, Any]) -> list[tuple[str, float]]:
    """(case label, dmesh time / baseline time) for each row of one benchmark's JSON."""
    pairs = []
    for row in doc.get("rows", []):
        label = " ".join(str(row[k]) for k in ("op", "size", "case") if k in row)
        if "ratio" in row:
            value = float(row["ratio"])
        elif "speedup" in row or "speedup_vs_numpy" in row:
            value = 1.0 / float(row.get("speedup", row.get("speedup_vs_numpy")))
        else:
            continue
        pairs.append((label, value))
    return pairs


def draw(directory: Path, output: Path) -> bool:
    """Draw every ``*.json`` in ``directory`` into ``output``; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display on cluster nodes and CI
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_chart: matplotlib is not installed (pip install -e '.[bench]'); no chart")
        return False
    results = {
        path.stem: time_ratios(json.loads(path.read_text()))
        for path in sorted(directory.glob("*.json"))
    }
    results = {name: pairs for name, pairs in results.items() if pairs}
    if not results:
        print(f"bench_chart: no results in {directory}")
        return False
    heights = [max(1.5, 0.32 * len(pairs) + 0.8) for pairs in results.values()]
    fig, axes = plt.subplots(len(results), 1, figsize=(9, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)  # fmt: skip
    for ax, (name, pairs) in zip(axes[:, 0], results.items()):
        labels = [label for label, _ in pairs]
        values = [value for _, value in pairs]
        colors = ["tab:green" if v <= 1 else "tab:orange" for v in values]
        # Bars grow from 1 (parity) towards each ratio, left when dmesh is faster.
        ax.barh(range(len(values)), [v - 1.0 for v in values], left=1.0, color=colors)
        ax.set_xlim(min([*values, 1.0]) / 1.25, max([*values, 1.0]) * 1.25)
        ax.set_yticks(range(len(values)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_title(f"{name}: dmesh time / baseline time (left of 1: dmesh faster)", fontsize=9)
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
    print(f"bench_chart: wrote {output}")
    return True


def main() -> int:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR
    output = Path(sys.argv[2]) if len(sys.argv) > 2 else directory / "bench.png"
    draw(directory, output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
