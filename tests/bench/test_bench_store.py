"""`python -m bench.store` with tiny settings, so the store-growth benchmark never rots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.bench_run import run_bench


@pytest.mark.timeout(90)
def test_store_benchmark_measures_each_count_of_stored_responses(short_tmp: Path) -> None:
    stdout, results = run_bench(
        "bench.store", short_tmp, "--stored", "0,300", "--oplog-rows", "2000", "--concurrency",
        "2", "--seconds", "1", "--samples", "1", "--accounts", "1", "--lock-puts", "20",
    )  # fmt: skip
    assert [level["stored"] for level in results["levels"]] == [0, 300]
    assert results["levels"][1]["fill"]["rows"] == 300
    for level in results["levels"]:
        assert level["turns"]["completed"] > 0
        assert level["turns"]["errors"] == 0, level["turns"]["error_examples"]
        assert level["cpu_ms_per_request"] > 0
        assert level["lock"]["put"]["max_ms"] > 0
        for name, row in level["probes"].items():
            assert (row["samples"], row["failed"]) == (1, 0), (name, row["failures"])
    assert "| 300 |" in stdout
