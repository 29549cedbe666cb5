"""`python -m bench.websocket` with tiny counts, so the WebSocket comparison never rots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(90)
def test_websocket_comparison_runs_every_variant(short_tmp: Path) -> None:
    out = short_tmp / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.websocket", "--rounds", "1", "--count", "6",
         "--concurrency", "2", "--accounts", "1", "--json", str(out)],
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
    for variant in ("http", "ws", "ws-plain"):
        phase = row[variant]
        assert phase["errors"] == 0, phase["error_examples"]
        assert phase["completed"] == 6
        assert phase["events"] > phase["completed"]  # one frame per event
        assert 0 < phase["first_content_s"]["p50"] <= phase["total_s"]["p50"]
    assert set(results["median_cpu_ms_per_turn"]) == {"http", "ws", "ws-plain"}
    assert "| ws-plain |" in done.stdout
