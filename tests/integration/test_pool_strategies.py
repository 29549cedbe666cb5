"""How each selection strategy spreads requests over three accounts: the official SDK → the real
daemon → the fake Kiro service."""

from __future__ import annotations

import collections
import time
from pathlib import Path

import anthropic
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"


def wait_for_usage(proc: DaemonProcess, count: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        accounts = proc.client.request("GET", "/accounts")["accounts"]
        if sum(account["usage"] is not None for account in accounts) >= count:
            return
        time.sleep(0.1)
    raise AssertionError("the maintenance loop did not probe usage in time")


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [("sticky", [6, 0, 0]), ("round-robin", [2, 2, 2]), ("lowest-usage", [0, 6, 0])],
)
def test_distribution(
    fake: ThreadedFake, short_tmp: Path, strategy: str, expected: list[int]
) -> None:
    proc = start_daemon(
        short_tmp,
        fake,
        {
            "KIROD_ACCOUNT_SELECTION_STRATEGY": strategy,
            "KIROD_MAINTENANCE_INTERVAL_S": "1",
        },
    )
    try:
        accounts = [fake.fake.issue_social_account() for _ in range(3)]
        for tokens, used in zip(accounts, (900.0, 100.0, 500.0), strict=True):
            fake.fake.set_usage(tokens.account_id, current=used)
            import_account(proc, tokens)
        if strategy == "lowest-usage":
            wait_for_usage(proc, 3)
        fake.fake.clear_requests()
        with anthropic.Anthropic(
            base_url=proc.base_url, api_key=proc.api_key, max_retries=0
        ) as claude:
            for n in range(6):
                claude.messages.create(
                    model=MODEL, max_tokens=50, messages=[{"role": "user", "content": f"n{n}"}]
                )
        served = collections.Counter(r.account_id for r in fake.fake.requests("chat"))
        assert [served[tokens.account_id] for tokens in accounts] == expected
    finally:
        assert proc.stop() == 0
