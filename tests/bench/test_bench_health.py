"""`python -m bench.health` with tiny settings, so the loop-responsiveness benchmark never rots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.bench_run import run_bench


@pytest.mark.timeout(90)
def test_health_benchmark_runs_every_shape(short_tmp: Path) -> None:
    stdout, results = run_bench(
        "bench.health", short_tmp, "--seconds", "0.5", "--concurrency", "1", "--mb", "0.4",
    )  # fmt: skip
    shapes = [row["shape"] for row in results["phases"]]
    assert shapes == ["idle", "text", "history", "images", "schema", "messages"]
    for row in results["phases"]:
        assert row["health_answers"] > 0
        assert row["health_failures"] == 0
        assert all(int(status) < 500 for status in row["statuses"]), row
        assert row["shape"] == "idle" or row["large_requests"] > 0
    assert "| messages |" in stdout
