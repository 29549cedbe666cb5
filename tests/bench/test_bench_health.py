"""`python -m bench.health` with tiny settings, so the loop-responsiveness benchmark never rots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(90)
def test_health_benchmark_runs_every_shape(short_tmp: Path) -> None:
    out = short_tmp / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.health", "--seconds", "0.5", "--concurrency", "1",
         "--mb", "0.4", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=80,
        stdin=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    shapes = [row["shape"] for row in results["phases"]]
    assert shapes == ["idle", "text", "history", "images", "schema", "messages"]
    for row in results["phases"]:
        assert row["health_answers"] > 0
        assert row["health_failures"] == 0
        assert all(int(status) < 500 for status in row["statuses"]), row
        assert row["shape"] == "idle" or row["large_requests"] > 0
    assert "| messages |" in done.stdout
