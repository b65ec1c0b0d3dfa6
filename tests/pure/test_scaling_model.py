"""scripts/scaling_model.py: every strong-scaling case has a formula, and the report predicts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import scaling_model
from scaling_cases import STRONG

from dmesh.scaling import Call, Network


@pytest.mark.parametrize("case", [c.name for c in STRONG])
def test_every_strong_case_has_its_formula(case: str) -> None:
    one, share_1 = scaling_model.case_traffic(case, 1)
    many, share_16 = scaling_model.case_traffic(case, 16)
    # At one rank nothing leaves the rank (the halo still calls permute over a group of one).
    ok = len(one) == 1 and all(c.group_size == 1 for c in one[0]) and share_1 == 1.0
    ok = ok and len(many) == 16 and share_16 < 0.07
    # Only the S(0) @ R product communicates nothing at 16 ranks.
    ok = ok and (any(many) or case.startswith("matmul"))
    assert ok, (one, share_1, many[:2], share_16)


def test_report_predicts_each_case_at_each_rank_count(capsys: pytest.CaptureFixture[str]) -> None:
    net = Network(5e-6, 2e9)
    calls = [Call("all_reduce", 2, m, m) for m in (8, 8000, 8_000_000)]
    calls += [Call("permute", 2, m, m) for m in (8, 8000, 8_000_000)]
    measured = {"ranks": 2, "samples": [
        {**c.__dict__, "seconds": net.call_time(c)} for c in calls]}  # fmt: skip
    doc = {"rows": [{"case": "sum 2e7 f64", "ranks": 1, "time_s": 4e-3},
                    {"case": "sum 2e7 f64", "ranks": 2, "time_s": 2.2e-3}]}  # fmt: skip
    got = scaling_model.report(doc, measured)
    ranks = [p["ranks"] for p in got["predictions"]]
    at_4096 = got["predictions"][-1]
    # The sum's one 8-byte all_reduce: 12 rounds of alpha at 4096 ranks.
    ok = ranks == [1, 2, 16, 256, 4096]
    ok = ok and at_4096["comm_s"] == pytest.approx(12 * (5e-6 + 8 / 2e9), rel=1e-6)
    ok = ok and "sum 2e7 f64" in capsys.readouterr().out
    assert ok, got
