"""Routing by catalog and pacing end to end: the official SDK → the real daemon → the fake Kiro
service, with accounts on different plans (a Free plan lists no Opus) and paced request starts."""

from __future__ import annotations

import concurrent.futures
import time
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

OPUS = "claude-opus-4-6"
SONNET = "claude-sonnet-4-6"


def wait_for(condition: Any, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def offered(proc: DaemonProcess) -> dict[str, list[str]]:
    """Model id → the accounts `kiroctl models` says offer it."""
    models = proc.client.request("GET", "/models")
    return {row["id"]: row["accounts"] for row in models["models"]}


def catalogs_read(proc: DaemonProcess, count: int) -> bool:
    accounts = proc.client.request("GET", "/accounts")["accounts"]
    usage_known = sum(account["usage"] is not None for account in accounts) >= count
    return usage_known and len(offered(proc).get(SONNET, [])) >= count


def ask(proc: DaemonProcess, model: str, text: str = "hi") -> anthropic.types.Message:
    with anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key, max_retries=0) as c:
        return c.messages.create(
            model=model, max_tokens=50, messages=[{"role": "user", "content": text}]
        )


def test_opus_goes_only_to_the_account_whose_plan_lists_it(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    proc = start_daemon(short_tmp, fake)
    try:
        free_tokens = fake.fake.issue_social_account(subscription="KIRO FREE")
        pro_tokens = fake.fake.issue_social_account()
        free = import_account(proc, free_tokens)["id"]
        pro = import_account(proc, pro_tokens)["id"]
        wait_for(lambda: catalogs_read(proc, 2), "both catalogs and usages")
        listing = offered(proc)
        assert listing[OPUS] == [pro]  # what `kiroctl models` shows per model
        assert sorted(listing[SONNET]) == sorted([free, pro])
        fake.fake.clear_requests()
        for n in range(3):
            assert ask(proc, OPUS, f"opus {n}").content
        chats = fake.fake.requests("chat")
        assert [r.account_id for r in chats] == [pro_tokens.account_id] * 3
        # The fake records a stream's status once its handler returns, after the last byte left.
        wait_for(lambda: all(r.status is not None for r in chats), "the chats' statuses")
        assert all(r.rejected_by is None and r.status == 200 for r in chats)

        # Without the Pro account no account offers Opus: a 404 naming what is available.
        proc.client.request("DELETE", f"/accounts/{pro}")
        fake.fake.clear_requests()
        with pytest.raises(anthropic.NotFoundError) as missing:
            ask(proc, OPUS)
        message = str(missing.value)
        assert "model_not_found" in message or "is not available" in message
        assert SONNET in message
        assert fake.fake.requests("chat") == []
        assert ask(proc, SONNET).content  # the Free account still serves what it lists
        assert [r.account_id for r in fake.fake.requests("chat")] == [free_tokens.account_id]
    finally:
        assert proc.stop() == 0


def test_paced_requests_wait_their_turn_instead_of_failing(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    interval = 0.4
    proc = start_daemon(short_tmp, fake, {"KIROD_ACCOUNT_MIN_INTERVAL_S": str(interval)})
    try:
        tokens = fake.fake.issue_social_account()
        import_account(proc, tokens)
        wait_for(lambda: catalogs_read(proc, 1), "the catalog and usage")
        fake.fake.clear_requests()
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda n: ask(proc, SONNET, f"n{n}"), range(4)))
        elapsed = time.monotonic() - started
        assert all(answer.content for answer in answers)
        assert len(fake.fake.requests("chat")) == 4
        assert elapsed >= 3 * interval * 0.9  # four starts, three spacings
    finally:
        assert proc.stop() == 0
