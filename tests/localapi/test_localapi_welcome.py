"""Account state as of now: a new account is ready at once (usage and models read right after
import, not a pass later); a cool-down that ended shows as over without waiting for a request."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from kirod.testing.fake_kiro import Fault, Script, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon


@pytest.fixture
def fake() -> Iterator[ThreadedFake]:
    with ThreadedFake() as server:
        yield server


def test_an_imported_account_has_its_usage_and_catalog_at_once(
    fake: ThreadedFake, tmp_path: Path
) -> None:
    proc = start_daemon(tmp_path, fake, {"KIROD_MAINTENANCE_INTERVAL_S": "3600"})
    try:
        time.sleep(0.2)  # the start-up pass finds no account
        fake.fake.clear_requests()
        account = import_account(proc, fake.fake.issue_social_account())
        deadline = time.monotonic() + 10
        usage = None
        while time.monotonic() < deadline:
            listed = proc.client.request("GET", f"/accounts/{account['id']}")
            assert isinstance(listed, dict)
            usage = listed.get("usage")
            if usage is not None and fake.fake.requests("models"):
                break
            time.sleep(0.05)
        assert usage is not None, "usage still unknown 10 s after the import"
        assert fake.fake.requests("usage")
        assert fake.fake.requests("models")
    finally:
        proc.kill()


def test_a_cool_down_that_ended_shows_as_active_without_a_request(
    fake: ThreadedFake, tmp_path: Path
) -> None:
    proc = start_daemon(tmp_path, fake)
    try:
        account = import_account(proc, fake.fake.issue_social_account())
        fake.fake.enqueue(Script(fault=Fault.THROTTLE_429, retry_after_s=1))
        with (
            anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key, max_retries=0) as c,
            pytest.raises(anthropic.RateLimitError),
        ):
            c.messages.create(
                model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        cooling = proc.client.request("GET", f"/accounts/{account['id']}")
        assert isinstance(cooling, dict)
        assert cooling["status"] == "cooling_down"
        assert cooling["status_until"] is not None
        time.sleep(1.2)
        after = proc.client.request("GET", f"/accounts/{account['id']}")
        assert isinstance(after, dict)
        assert (after["status"], after["status_until"]) == ("active", None)
        status = proc.client.request("GET", "/status")
        assert isinstance(status, dict)
        assert status["health"] == "healthy", status["problems"]
        assert status["accounts"]["usable"] == 1
    finally:
        proc.kill()
