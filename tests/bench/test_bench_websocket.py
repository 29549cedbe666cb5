"""`python -m bench.websocket` with tiny counts, so the WebSocket comparison never rots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.bench_run import run_bench


@pytest.mark.timeout(90)
def test_websocket_comparison_runs_every_variant(short_tmp: Path) -> None:
    stdout, results = run_bench(
        "bench.websocket", short_tmp, "--rounds", "1", "--count", "6",
        "--concurrency", "2", "--accounts", "1",
    )  # fmt: skip
    (row,) = results["rounds"]
    for variant in ("http", "ws", "ws-plain"):
        phase = row[variant]
        assert phase["errors"] == 0, phase["error_examples"]
        assert phase["completed"] == 6
        assert phase["events"] > phase["completed"]  # one frame per event
        assert 0 < phase["first_content_s"]["p50"] <= phase["total_s"]["p50"]
    assert set(results["median_cpu_ms_per_turn"]) == {"http", "ws", "ws-plain"}
    assert "| ws-plain |" in stdout
