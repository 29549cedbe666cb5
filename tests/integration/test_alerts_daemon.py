"""Alerts through the real daemon: its one account is suspended by the fake Kiro, the webhook (a
real HTTP server on loopback) hears of it and of all accounts being down, re-enabling the account
sends the recovery, and `kiroctl alerts test` reports each webhook's answer. An account Kiro
flags for suspicious activity rests for hours: the client, the webhook and `kiroctl accounts
list` are told why, and another account serves."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest
from click.testing import CliRunner, Result

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import Fault, Script, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon
from tests.support.webhook import Webhook

MODEL = "claude-sonnet-4-6"
SECRET = "whsec-integration-secret"


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    with Webhook() as hook:
        yield hook


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, webhook: Webhook) -> Iterator[DaemonProcess]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    hooks = json.dumps([{"url": webhook.url, "secret": SECRET}])
    proc = start_daemon(root, fake, {"KIROD_ALERTS_WEBHOOKS": hooks})
    try:
        yield proc
    finally:
        assert proc.stop() == 0
        shutil.rmtree(root, ignore_errors=True)


def kiroctl(daemon: DaemonProcess, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), *args])


def test_a_suspension_alerts_and_enabling_the_account_sends_the_recovery(
    daemon: DaemonProcess, fake: ThreadedFake, webhook: Webhook
) -> None:
    account = import_account(daemon, fake.fake.issue_social_account())
    fake.fake.enqueue(Script(fault=Fault.SUSPENDED_403))
    with (
        anthropic.Anthropic(
            base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
        ) as claude,
        pytest.raises(anthropic.APIStatusError),
    ):
        claude.messages.create(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        )
    bodies = webhook.wait_for("account_suspended", "all_accounts_down")
    suspended = next(body for body in bodies if body["event"] == "account_suspended")
    assert suspended["account"]["id"] == account["id"]
    assert suspended["account"]["status"] == "suspended"
    assert suspended["account"]["reason"].startswith("suspended by Kiro")
    headers, raw = next(item for item in webhook.received if b"account_suspended" in item[1])
    signed = headers["X-Kirod-Timestamp"].encode() + b"." + raw
    digest = hmac.new(SECRET.encode(), signed, hashlib.sha256).hexdigest()
    assert headers["X-Kirod-Signature"] == f"sha256={digest}"

    daemon.client.enable_account(account["id"])
    bodies = webhook.wait_for("account_recovered", "accounts_recovered")
    assert webhook.events() == [
        "account_suspended",
        "all_accounts_down",
        "account_recovered",
        "accounts_recovered",
    ]
    assert bodies[2]["account"]["status"] == "active"
    assert SECRET not in daemon.log()


def test_kiroctl_alerts_test_sends_one_and_shows_the_answer(
    daemon: DaemonProcess, webhook: Webhook
) -> None:
    before = len(webhook.received)
    shown = kiroctl(daemon, "alerts", "test")
    assert shown.exit_code == 0, shown.output
    assert "http://127.0.0.1" in shown.output
    assert "204" in shown.output
    assert webhook.events()[before:] == ["test"]
    as_json = kiroctl(daemon, "alerts", "test", "--json")
    assert as_json.exit_code == 0, as_json.output
    [answer] = json.loads(as_json.output)["webhooks"]
    assert answer == {
        "webhook": webhook.url.removesuffix("/kirod") + "/…",
        "delivered": True,
        "status": 204,
        "error": None,
    }


def test_kiroctl_alerts_test_without_webhooks_says_so(fake: ThreadedFake, module_tmp: Path) -> None:
    proc = start_daemon(module_tmp / "bare", fake)
    try:
        shown = kiroctl(proc, "alerts", "test")
        assert shown.exit_code == 0, shown.output
        assert "No webhook is configured" in shown.output
        assert "add [[alerts.webhook]] tables (url, secret)" in shown.output  # not rich markup
    finally:
        assert proc.stop() == 0


def test_kiroctl_alerts_test_fails_when_a_webhook_is_down(
    fake: ThreadedFake, module_tmp: Path
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    hooks = json.dumps([{"url": f"http://127.0.0.1:{port}/gone"}])
    proc = start_daemon(module_tmp / "down", fake, {"KIROD_ALERTS_WEBHOOKS": hooks})
    try:
        shown = kiroctl(proc, "alerts", "test")
        assert shown.exit_code == 1, shown.output
        assert "ClientConnectorError" in shown.output
        assert "a webhook did not take the test alert" in shown.stderr
    finally:
        assert proc.stop() == 0


def test_a_flagged_account_rests_alerts_and_says_why_then_another_serves(
    fake: ThreadedFake, module_tmp: Path
) -> None:
    with Webhook() as hook:
        hooks = json.dumps([{"url": hook.url}])
        proc = start_daemon(module_tmp / "flagged", fake, {"KIROD_ALERTS_WEBHOOKS": hooks})
        try:
            flagged = import_account(proc, fake.fake.issue_social_account())
            fake.fake.enqueue(Script(fault=Fault.SUSPICIOUS_429, retry_after_s=2))
            with (
                anthropic.Anthropic(
                    base_url=proc.base_url, api_key=proc.api_key, max_retries=0
                ) as claude,
                pytest.raises(anthropic.RateLimitError) as refused,
            ):
                claude.messages.create(
                    model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
                )
            error = refused.value
            assert isinstance(error.body, dict)
            assert error.body["error"]["type"] == "rate_limit_error"
            message = error.body["error"]["message"]
            assert "Kiro flagged suspicious activity" in message
            assert re.search(
                r"kirod rests the account until \d{4}-\d\d-\d\d \d\d:\d\d UTC$", message
            )
            assert "investigate" not in message  # Kiro's own words (with the user id) stay out
            assert int(error.response.headers["retry-after"]) in (6 * 3600 - 1, 6 * 3600)

            [body] = hook.wait_for("account_flagged")  # a rest ends alone: nothing is "down"
            assert body["account"]["id"] == flagged["id"]
            assert body["account"]["status"] == "cooling_down"
            assert body["account"]["until"] - time.time() == pytest.approx(6 * 3600, abs=60)

            listed = kiroctl(proc, "accounts", "list")
            assert listed.exit_code == 0, listed.output
            assert "rested 6 h: Kiro flagged suspicious activity" in listed.output

            # A second account serves what the first may not, and the first is left to rest.
            other = fake.fake.issue_social_account()
            import_account(proc, other)
            fake.fake.clear_requests()
            with anthropic.Anthropic(
                base_url=proc.base_url, api_key=proc.api_key, max_retries=0
            ) as claude:
                answer = claude.messages.create(
                    model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
                )
            assert answer.content
            assert [r.account_id for r in fake.fake.requests("chat")] == [other.account_id]
        finally:
            assert proc.stop() == 0
