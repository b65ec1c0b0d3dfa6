"""scripts/bench_chart.py and bench_scaling.py: JSON rows become time ratios and scaling charts.

Pure functions on hand-written numbers; no timing (that belongs in the
benchmarks) and no MPI: the charts are drawn into pytest's ``tmp_path``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import bench_chart
import bench_scaling

DOCS = {
    "dispatch": {"rows": [{"case": "a + b", "ratio": 5.0}, {"case": "sum", "ratio": 1.5}]},
    "tsqr": {"rows": [{"case": "qr", "speedup": 4.0}]},
    "fft": {"rows": [{"case": "fftn", "speedup_vs_numpy": 2.0}]},
    "collectives": {"rows": [{"op": "all_reduce", "size": "8 el", "ratio": 1.25}]},
}

# Per-rank-count runs as bench_scaling.py's mpiexec jobs write them (numbers chosen
# so that the expected ratios are exact in binary floating point).
RUNS = [
    {"ranks": 2, "rows": [{"case": "matmul", "dmesh_s": 0.5}, {"case": "sum", "dmesh_s": 0.25}]},
    {"ranks": 1, "rows": [{"case": "matmul", "dmesh_s": 1.0, "numpy_s": 1.0},
                          {"case": "sum", "dmesh_s": 2.0, "numpy_s": 1.0}]},
    {"ranks": 4, "rows": [{"case": "matmul", "dmesh_s": 0.5}, {"case": "sum", "dmesh_s": 0.125}]},
]  # fmt: skip

NEEDS_MATPLOTLIB = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None, reason="matplotlib (the bench extra)"
)
PNG = b"\x89PNG\r\n\x1a\n"


def is_png(path: Path) -> bool:
    return path.exists() and path.read_bytes()[:8] == PNG


def test_time_ratios() -> None:
    got = {name: bench_chart.time_ratios(doc) for name, doc in DOCS.items()}
    want = {
        "dispatch": [("a + b", 5.0), ("sum", 1.5)],
        "tsqr": [("qr", 0.25)],
        "fft": [("fftn", 0.5)],
        "collectives": [("all_reduce 8 el", 1.25)],
    }
    assert got == want, repr(got)


def test_merge_speedup_and_efficiency() -> None:
    doc = bench_scaling.merge(RUNS)
    got = [(r["case"], r["ranks"], r["time_s"], r["speedup"], r["efficiency"]) for r in doc["rows"]]
    # speed-up = the 1-rank run's NumPy time / time at p; efficiency = speed-up / p.
    want = [
        ("matmul", 1, 1.0, 1.0, 1.0),
        ("matmul", 2, 0.5, 2.0, 1.0),
        ("matmul", 4, 0.5, 2.0, 0.5),
        ("sum", 1, 2.0, 0.5, 0.5),
        ("sum", 2, 0.25, 4.0, 2.0),
        ("sum", 4, 0.125, 8.0, 2.0),
    ]
    ok = got == want and doc["ranks"] == [1, 2, 4]
    ok = ok and all(r["numpy_s"] == 1.0 for r in doc["rows"])
    assert ok, repr(got)


WEAK_RUNS = [
    {"ranks": 1, "rows": [], "weak_rows": [{"case": "heat", "dmesh_s": 1.0, "numpy_s": 0.5}]},
    {"ranks": 2, "rows": [], "weak_rows": [{"case": "heat", "dmesh_s": 1.25}]},
    {"ranks": 4, "rows": [], "weak_rows": [{"case": "heat", "dmesh_s": 2.0}]},
]


def test_merge_weak_efficiency_is_the_one_rank_time_over_the_time() -> None:
    doc = bench_scaling.merge(WEAK_RUNS)
    got = [(r["case"], r["ranks"], r["time_1_s"], r["efficiency"]) for r in doc["weak_rows"]]
    want = [("heat", 1, 1.0, 1.0), ("heat", 2, 1.0, 0.8), ("heat", 4, 1.0, 0.5)]
    ok = got == want and all(r["numpy_s"] == 0.5 for r in doc["weak_rows"])
    ok = ok and bench_chart.weak_series(doc) == {"heat": ([1, 2, 4], [1.0, 0.8, 0.5])}
    lines = bench_scaling.table(doc).splitlines()
    ok = ok and any(line.startswith("heat") and line.split()[-1] == "0.50" for line in lines)
    assert ok, repr(got) + "\n" + "\n".join(lines)


def test_merge_needs_the_one_rank_baseline() -> None:
    with pytest.raises(ValueError, match="include 1 in --ranks"):
        bench_scaling.merge(RUNS[:1])


def test_table_lists_every_row() -> None:
    lines = bench_scaling.table(bench_scaling.merge(RUNS)).splitlines()
    header = lines[0].split()
    sum4 = next(line for line in lines if line.startswith("sum") and line.split()[1] == "4")
    ok = header == ["case", "ranks", "time", "numpy", "1p", "speed-up", "efficiency"]
    ok = ok and sum4.split()[-2:] == ["8.00", "2.00"] and "125.00 ms" in sum4
    assert ok, "\n".join(lines)


def test_default_ranks() -> None:
    got = [bench_scaling.default_ranks(c) for c in (1, 2, 6, 16)]
    want = [[1], [1, 2], [1, 2, 4, 6], [1, 2, 4, 8, 16]]
    assert got == want, repr(got)


def test_scaling_series() -> None:
    got = bench_chart.scaling_series(bench_scaling.merge(RUNS))
    want = {
        "matmul": ([1, 2, 4], [1.0, 0.5, 0.5], 1.0),
        "sum": ([1, 2, 4], [2.0, 0.25, 0.125], 1.0),
    }
    assert got == want, repr(got)


@NEEDS_MATPLOTLIB
def test_draw_writes_a_png(tmp_path: Path) -> None:
    """Ratios only (an older run, no scaling.json): bench.png and no scaling.png."""
    folder = tmp_path
    for name, doc in DOCS.items():
        (folder / f"{name}.json").write_text(json.dumps(doc))
    drawn = bench_chart.draw(folder, folder / "chart.png")
    ok = drawn and is_png(folder / "chart.png") and not (folder / "scaling.png").exists()
    assert ok, "no PNG drawn, or a scaling chart without scaling results"


@NEEDS_MATPLOTLIB
def test_draw_scaling_beside_the_ratios(tmp_path: Path) -> None:
    folder = tmp_path
    for name, doc in DOCS.items():
        (folder / f"{name}.json").write_text(json.dumps(doc))
    (folder / "scaling.json").write_text(json.dumps(bench_scaling.merge(RUNS)))
    drawn = bench_chart.draw(folder, folder / "bench.png")
    ok = drawn and is_png(folder / "bench.png") and is_png(folder / "scaling.png")
    # scaling.json's rows (they carry a speedup) are not drawn again as ratio bars.
    ok = ok and sorted(bench_chart.ratio_results(folder)) == sorted(DOCS)
    assert ok, "bench.png or scaling.png missing, or scaling drawn as ratios"


@NEEDS_MATPLOTLIB
def test_draw_scaling_alone(tmp_path: Path) -> None:
    folder = tmp_path
    (folder / "scaling.json").write_text(json.dumps(bench_scaling.merge(RUNS)))
    drawn = bench_chart.draw(folder, folder / "bench.png")
    ok = drawn and is_png(folder / "scaling.png") and not (folder / "bench.png").exists()
    assert ok, "scaling.png not drawn from scaling.json alone"
