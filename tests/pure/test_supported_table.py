"""README.md's table of supported functions is the registry's (issue 14, item 12)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_table_is_current() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "supported_table.py"), "--check"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
