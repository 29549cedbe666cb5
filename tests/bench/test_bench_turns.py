"""`python -m bench.turns` with tiny counts, so the multi-call turn comparison never rots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.bench_run import run_bench


@pytest.mark.timeout(90)
def test_turns_comparison_runs_every_variant(short_tmp: Path) -> None:
    stdout, results = run_bench(
        "bench.turns", short_tmp, "--rounds", "1", "--count", "4",
        "--accounts", "1",
    )  # fmt: skip
    (row,) = results["rounds"]
    variants = (
        "plain",
        "search-side-call",
        "search-in-turn",
        "write-whole",
        "truncation-recovered",
    )
    for variant in variants:
        assert row[variant]["errors"] == 0, row[variant]["error_examples"]
        assert row[variant]["completed"] == 4
    assert [row[v]["upstream_calls_per_request"] for v in row] == [1, 1, 3, 1, 2]
    assert "| search-in-turn | 3 |" in stdout
