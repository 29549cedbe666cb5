"""`python -m bench.extensions` with tiny counts, so the runner's cost figure never rots."""

from __future__ import annotations

from tests.bench.bench_run import run_module


def test_the_extension_bench_measures_every_variant() -> None:
    done = run_module("bench.extensions", "--count", "20", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    for variant in ("none", "one, on_request only", "one, every event too"):
        assert f"| {variant} |" in done.stdout
