"""`python -m bench.turns` with tiny counts, so the multi-call turn comparison never rots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(90)
def test_turns_comparison_runs_every_variant(short_tmp: Path) -> None:
    out = short_tmp / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.turns", "--rounds", "1", "--count", "4",
         "--accounts", "1", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=80,
        stdin=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    (row,) = results["rounds"]
    for variant in ("plain", "search-side-call", "search-in-turn", "truncation-recovered"):
        assert row[variant]["errors"] == 0, row[variant]["error_examples"]
        assert row[variant]["completed"] == 4
    assert [row[v]["upstream_calls_per_request"] for v in row] == [1, 1, 3, 2]
    assert "| search-in-turn | 3 |" in done.stdout
