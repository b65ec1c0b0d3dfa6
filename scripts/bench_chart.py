"""Draw ``make bench``'s JSON results as PNGs: time ratios, and time against rank count.

Every benchmark script writes ``build/bench/<name>.json`` with a list of rows;
rows name their case and carry either a ``ratio`` (dmesh's time over the
baseline's) or a ``speedup`` (the baseline's time over dmesh's). Both are drawn
into ``bench.png`` as the time ratio on a log axis with a line at 1: left of it
dmesh is faster.

The strong-scaling results (``scaling.json``, from ``bench_scaling.py``) go
into a second file beside it, ``scaling.png``: each case's time (log) against
the rank count (log), with its ideal line, the one-process NumPy time over p,
and beside it the weak-scaling efficiency (fixed work per rank) against the
rank count, ideal 1.0.
Either file is drawn when its results exist (older runs have no
``scaling.json``). Needs matplotlib (the ``bench`` extra); without it, says
so and draws nothing.

Usage: ``python scripts/bench_chart.py [directory] [output.png]`` (the scaling
chart goes to ``scaling.png`` in the output's folder).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "build" / "bench"
SCALING = "scaling.json"  # bench_scaling.py's merged results: drawn apart, not as ratios


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


def ratio_results(directory: Path) -> dict[str, list[tuple[str, float]]]:
    """Each benchmark's time ratios, by name (the JSON's stem); scaling.json is not one."""
    results = {
        path.stem: time_ratios(json.loads(path.read_text()))
        for path in sorted(directory.glob("*.json"))
        if path.name != SCALING
    }
    return {name: pairs for name, pairs in results.items() if pairs}


def scaling_series(doc: dict[str, Any]) -> dict[str, tuple[list[int], list[float], float]]:
    """Per case of ``scaling.json``: (rank counts, times, one-process NumPy time), by ranks."""
    series: dict[str, tuple[list[int], list[float], float]] = {}
    for row in sorted(doc.get("rows", []), key=lambda r: int(r["ranks"])):
        ranks, times, _ = series.setdefault(row["case"], ([], [], float(row["numpy_s"])))
        ranks.append(int(row["ranks"]))
        times.append(float(row["time_s"]))
    return series


def weak_series(doc: dict[str, Any]) -> dict[str, tuple[list[int], list[float]]]:
    """Per weak-scaling case of ``scaling.json``: (rank counts, efficiencies), by ranks."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    for row in sorted(doc.get("weak_rows", []), key=lambda r: int(r["ranks"])):
        ranks, efficiencies = series.setdefault(row["case"], ([], []))
        ranks.append(int(row["ranks"]))
        efficiencies.append(float(row["efficiency"]))
    return series


def draw(directory: Path, output: Path) -> bool:
    """Draw ``directory``'s results: ratios into ``output``, scaling into ``scaling.png`` beside it.

    Returns whether anything was drawn (False without matplotlib or results).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display on cluster nodes and CI
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_chart: matplotlib is not installed (pip install -e '.[bench]'); no chart")
        return False
    results = ratio_results(directory)
    scaling_path = directory / SCALING
    scaling = json.loads(scaling_path.read_text()) if scaling_path.exists() else {}
    series = scaling_series(scaling)
    if not results and not series:
        print(f"bench_chart: no results in {directory}")
        return False
    output.parent.mkdir(parents=True, exist_ok=True)
    if results:
        _draw_ratios(plt, results, output)
    if series:
        _draw_scaling(plt, series, weak_series(scaling), output.with_name("scaling.png"))
    return True


def _draw_ratios(plt: Any, results: dict[str, list[tuple[str, float]]], output: Path) -> None:
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
    _save(plt, fig, output)


def _draw_scaling(
    plt: Any,
    series: dict[str, tuple[list[int], list[float], float]],
    weak: dict[str, tuple[list[int], list[float]]],
    output: Path,
) -> None:
    fig, axes = plt.subplots(1, 2 if weak else 1, figsize=(15 if weak else 9, 5), squeeze=False)
    ax = axes[0, 0]
    all_ranks = sorted({p for ranks, _, _ in series.values() for p in ranks})
    for i, (case, (ranks, times, numpy_s)) in enumerate(series.items()):
        color = f"C{i}"
        ax.plot(ranks, times, marker="o", color=color, label=case)
        # Ideal strong scaling from the one-process NumPy time: numpy_s / p.
        ideal = [1, *[p for p in all_ranks if p > 1]]
        ax.plot(ideal, [numpy_s / p for p in ideal], linestyle="--", linewidth=0.9, color=color)
        ax.plot([1], [numpy_s], marker="x", color=color, linestyle="none")
    ax.plot([], [], linestyle="--", color="gray", label="ideal: NumPy 1-process time / p")
    ax.plot([], [], marker="x", color="gray", linestyle="none", label="NumPy, one process")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(all_ranks, [str(p) for p in all_ranks])
    ax.set_xlim(all_ranks[0] / 1.3, all_ranks[-1] * 1.3)
    ax.set_xlabel("ranks")
    ax.set_ylabel("time per call (s)")
    ax.set_title("strong scaling: dmesh time against rank count (same global problem)",
                 fontsize=9)  # fmt: skip
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside, not over
    ax.grid(True, which="both", linewidth=0.3)
    if weak:
        _draw_weak(axes[0, 1], weak)
    _save(plt, fig, output)


def _draw_weak(ax: Any, weak: dict[str, tuple[list[int], list[float]]]) -> None:
    all_ranks = sorted({p for ranks, _ in weak.values() for p in ranks})
    for i, (case, (ranks, efficiencies)) in enumerate(weak.items()):
        ax.plot(ranks, efficiencies, marker="o", color=f"C{i + 4}", label=case)
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=0.9, label="ideal: constant time")
    ax.set_xscale("log", base=2)
    ax.set_xticks(all_ranks, [str(p) for p in all_ranks])
    ax.set_ylim(0, 1.2)
    ax.set_xlabel("ranks")
    ax.set_ylabel("efficiency: 1-rank time / time")
    ax.set_title("weak scaling: fixed work per rank", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(True, which="both", linewidth=0.3)


def _save(plt: Any, fig: Any, output: Path) -> None:
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)
    print(f"bench_chart: wrote {output}")


def main() -> int:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR
    output = Path(sys.argv[2]) if len(sys.argv) > 2 else directory / "bench.png"
    draw(directory, output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
