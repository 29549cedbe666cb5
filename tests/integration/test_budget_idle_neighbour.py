"""An account over its credit ceiling beside one a person turned off: the refusal names the
budget (429 `accounts_over_budget`, with Retry-After), not the disabled neighbour, and reaches no
Kiro. Through the real daemon, the fake Kiro and the official SDK."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake)
    for _ in range(2):
        import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


def ask(client: anthropic.Anthropic) -> None:
    client.messages.create(
        model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )


def test_a_spent_ceiling_beside_a_disabled_account_is_refused_as_over_budget(
    daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    spending, idle = daemon.client.accounts()
    daemon.client.disable_account(idle.id)
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as client:
        ask(client)  # no ceiling yet: served by the one account in service
        rested = daemon.client.set_account_budget(
            spending.id, credits_per_day=0.001, credits_per_month=None, allow_overage=False
        )
        assert rested.status == "cooling_down"
        asked = len(fake.fake.requests())
        with pytest.raises(anthropic.RateLimitError) as refused:
            ask(client)
    error = refused.value.body
    assert isinstance(error, dict)
    assert error["error"]["type"] == "rate_limit_error"
    assert "spent the credit budget" in error["error"]["message"]
    assert "disabled" not in error["error"]["message"]
    assert int(refused.value.response.headers["Retry-After"]) >= 1
    assert len(fake.fake.requests()) == asked  # nothing reached Kiro
    daemon.client.set_account_budget(
        spending.id, credits_per_day=None, credits_per_month=None, allow_overage=False
    )
    assert daemon.client.account(spending.id).status == "active"
