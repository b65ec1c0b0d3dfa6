"""scripts/bench_chart.py: the benchmark JSON rows become time ratios, drawn as a PNG."""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import pytest
from mpi4py import MPI

from helpers import assert_all

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import bench_chart

DOCS = {
    "dispatch": {"rows": [{"case": "a + b", "ratio": 5.0}, {"case": "sum", "ratio": 1.5}]},
    "tsqr": {"rows": [{"case": "qr", "speedup": 4.0}]},
    "fft": {"rows": [{"case": "fftn", "speedup_vs_numpy": 2.0}]},
    "collectives": {"rows": [{"op": "all_reduce", "size": "8 el", "ratio": 1.25}]},
}


def test_time_ratios(comm: MPI.Intracomm) -> None:
    got = {name: bench_chart.time_ratios(doc) for name, doc in DOCS.items()}
    want = {
        "dispatch": [("a + b", 5.0), ("sum", 1.5)],
        "tsqr": [("qr", 0.25)],
        "fft": [("fftn", 0.5)],
        "collectives": [("all_reduce 8 el", 1.25)],
    }
    assert_all(comm, got == want, repr(got))


@pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None, reason="matplotlib (the bench extra)"
)
def test_draw_writes_a_png(comm: MPI.Intracomm) -> None:
    with tempfile.TemporaryDirectory() as directory:
        for name, doc in DOCS.items():
            (Path(directory) / f"{name}.json").write_text(json.dumps(doc))
        output = Path(directory) / "chart.png"
        drawn = bench_chart.draw(Path(directory), output)
        ok = drawn and output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert_all(comm, ok, "no PNG drawn")
