"""`python -m bench.oplog` with tiny settings, so the control-plane benchmark never rots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.bench_run import run_bench


@pytest.mark.timeout(90)
def test_oplog_benchmark_times_every_probe_under_load(short_tmp: Path) -> None:
    stdout, results = run_bench(
        "bench.oplog", short_tmp, "--rows", "3000", "--days", "2", "--streams", "4",
        "--samples", "1", "--accounts", "1",
    )  # fmt: skip
    assert results["fill"]["rows"] == 3000
    assert results["fill"]["bytes_per_100k_rows"] > 0
    probes = results["probes"]
    assert {"kiroctl stats", "kiroctl top --once", "console /traffic?window=hour"} <= set(probes)
    for name, row in probes.items():
        assert (row["samples"], row["failed"]) == (1, 0), (name, row["failures"])
    assert results["streams"]["completed"] > 0
    assert results["streams"]["errors"] == 0, results["streams"]["error_examples"]
    assert "| `kiroctl trace ID` |" in stdout
