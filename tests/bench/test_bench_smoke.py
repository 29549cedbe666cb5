"""The benchmark harness with tiny counts, and the soak script's 60 s CI variant.

Both run as `make bench` / `python -m bench.soak` would, in their own interpreters: the fake Kiro
service, the real daemon and the load generator each in a process of their own, on loopback.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.bench_run import ROOT, run_module


@pytest.mark.timeout(90)
def test_smoke_plan_runs_every_phase(short_tmp: Path) -> None:
    out = short_tmp / "results.json"
    # With budgets on the key and the accounts: the admission is run, and refuses nothing.
    done = run_module("bench", "--plan", "smoke", "--budgets", "--json", str(out), timeout_s=80)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert results["plan"] == "smoke"
    assert results["budgets"] is True
    rows = results["latency"]
    assert {row["scenario"] for row in rows} == {"messages-stream-small", "responses-json-large"}
    for row in rows:
        for side in ("baseline", "kirod"):
            phase = row[side]
            assert phase["errors"] == 0, phase["error_examples"]
            assert phase["completed"] == phase["requests"] > 0
            assert 0 < phase["first_content_s"]["p50"] <= phase["total_s"]["p50"]
        assert row["kirod"]["daemon_cpu_s"] >= 0
        assert row["upstream_bytes"] > 0
    stream = next(row for row in rows if row["scenario"] == "messages-stream-small")
    assert stream["kirod"]["events"] > stream["kirod"]["completed"]  # SSE events were counted
    for row in rows:
        if row["scenario"] != "messages-stream-small":
            assert "floor" not in row
            continue
        floor = row["floor"]  # the bare aiohttp relay, same body and count as the baseline
        assert floor["errors"] == 0, floor["error_examples"]
        assert floor["completed"] == floor["requests"] == row["baseline"]["requests"]
        assert 0 < floor["first_content_s"]["p50"] <= floor["total_s"]["p50"]
        assert floor["events"] == row["baseline"]["events"]  # the frames passed through as-is
        assert floor["daemon_cpu_s"] >= 0
    assert list(stream)[-3:] == ["baseline", "floor", "kirod"]  # the order they ran in
    assert results["relay"]["kirod"]["errors"] == 0
    assert results["memory"][0]["daemon_peak_rss_kb"] > 0
    assert results["startup"]["ready_first_s"]["median"] > 0
    assert results["cli"]["kiroctl --help"]["exit_code"] == 0
    assert "Targets" in done.stdout
    assert "| messages-stream-small | 4 |" in done.stdout
    section = done.stdout.split("#### The aiohttp floor (messages-stream-small)", 1)[1]
    table = [line for line in section.split("####", 1)[0].splitlines() if line.startswith("| ")]
    assert [line.split(" | ")[0] for line in table[1:]] == ["| 1", "| 4"]  # after the header
    assert done.stdout.index("#### Request rate") < done.stdout.index("#### The aiohttp floor")
    assert "(bare aiohttp relay: " in done.stdout  # in the targets' measured column


def test_floor_relay_announces_itself_and_exits_cleanly_on_sigterm() -> None:
    relay = subprocess.Popen(
        [sys.executable, "-m", "bench.floor", "--upstream", "http://127.0.0.1:9"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert relay.stdout is not None
        assert json.loads(relay.stdout.readline())["url"].startswith("http://127.0.0.1:")
        relay.send_signal(signal.SIGTERM)
        _, stderr = relay.communicate(timeout=10)
        assert relay.returncode == 0, stderr
    finally:
        relay.kill()
        relay.wait(10)


@pytest.mark.timeout(150)
def test_soak_ci_variant_passes(short_tmp: Path) -> None:
    """60 s of mixed load with abandoned streams, then the leak checks of `bench.soak`."""
    out = short_tmp / "soak.json"
    done = run_module(
        "bench.soak", "--duration", "60", "--concurrency", "8", "--json", str(out), timeout_s=140
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["completed"] > 0
    assert report["abandoned"] > 0
    assert report["failures"] == []
