"""The control API's `/traffic` route and its typed client method, on a daemon."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kirod.localapi.client import ControlError, traffic_path
from kirod.report_types import TRAFFIC_WINDOWS, Traffic
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon


@pytest.fixture(scope="module")
def served(module_tmp: Path) -> Iterator[tuple[DaemonProcess, dict[str, Any]]]:
    """A daemon that answered one request and refused one for a model nobody serves."""
    with ThreadedFake() as fake:
        proc = start_daemon(module_tmp, fake)
        account = import_account(proc, fake.fake.issue_social_account())
        try:
            with anthropic.Anthropic(
                base_url=proc.base_url, api_key=proc.api_key, max_retries=0
            ) as claude:
                hello = [{"role": "user", "content": "hi"}]
                claude.messages.create(model="claude-sonnet-4-6", max_tokens=20, messages=hello)
                with pytest.raises(anthropic.NotFoundError):
                    claude.messages.create(model="no-such-model", max_tokens=20, messages=hello)
            yield proc, account
        finally:
            proc.kill()


def test_path() -> None:
    assert traffic_path("day") == "/traffic?window=day"
    assert traffic_path("a&b") == "/traffic?window=a%26b"


def test_the_hour_holds_the_requests(served: tuple[DaemonProcess, dict[str, Any]]) -> None:
    daemon, account = served
    traffic = daemon.client.traffic()
    assert isinstance(traffic, Traffic)
    assert (traffic.window, traffic.bucket_s, len(traffic.buckets)) == ("hour", 60, 60)
    assert traffic.since <= time.time() < traffic.since + 3600
    assert sum(b.requests for b in traffic.buckets) == 2
    assert sum(b.errors for b in traffic.buckets) == 1
    assert traffic.errors == {"model_not_found": 1}
    timed = [b for b in traffic.buckets if b.ttfb_p50_ms is not None]
    assert timed
    assert all(b.ttfb_p95_ms is not None for b in timed)
    assert account["id"] in {row.account_id for row in traffic.credits_by_day}


@pytest.mark.parametrize("window", list(TRAFFIC_WINDOWS))
def test_each_window_round_trips(served: tuple[DaemonProcess, dict[str, Any]], window: str) -> None:
    daemon, _ = served
    raw = daemon.client.request("GET", traffic_path(window))
    typed = Traffic.from_json(raw)
    assert typed.to_json() == raw
    count, bucket_s = TRAFFIC_WINDOWS[window]
    assert (typed.window, typed.bucket_s, len(typed.buckets)) == (window, bucket_s, count)
    assert sum(b.requests for b in typed.buckets) == 2


@pytest.mark.parametrize(
    "path", ["/traffic?window=week", "/traffic?window=", "/traffic?window=Hour"]
)
def test_another_window_is_refused(served: tuple[DaemonProcess, dict[str, Any]], path: str) -> None:
    with pytest.raises(ControlError) as refused:
        served[0].client.request("GET", path)
    assert (refused.value.status, refused.value.code) == (400, "invalid_request")
    assert "hour, day, month" in refused.value.message
