"""`python -m bench.console` with tiny counts, so the consoles-open comparison never rots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.bench_run import run_bench


@pytest.mark.timeout(90)
def test_console_comparison_runs_both_variants(short_tmp: Path) -> None:
    stdout, results = run_bench(
        "bench.console", short_tmp, "--rounds", "1", "--count", "6", "--concurrency", "2",
        "--viewers", "2", "--accounts", "1",
    )  # fmt: skip
    (row,) = results["rounds"]
    for variant in ("api", "api+console"):
        assert row[variant]["errors"] == 0, row[variant]["error_examples"]
        assert row[variant]["completed"] == 6
    assert results["console_pages"] >= 2  # each viewer loaded the overview at least once
    assert results["console_failures"] == 0
    assert "| api+console |" in stdout
