"""Alerts against real webhooks on loopback: an aiohttp receiver that answers, one that is down
(a closed port), one that is slow (past the timeout) and one that fails before it answers; the
store's observer on a real SQLite file; the `[[alerts.webhook]]` settings."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import socket
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from aiohttp import web

from kirod import __version__
from kirod.accounts.health import FLAGGED_REASON
from kirod.config import Webhook, load_settings
from kirod.control.alerts import Alerts
from kirod.errors import ConfigError
from kirod.log import FIELDS_ATTR
from kirod.storage.accounts import AccountState, AccountStore, StatusChange
from kirod.storage.db import Database

SECRET = "whsec-very-secret-value"
TOKEN_IN_PATH = "T0KEN-in-the-path"


class Receiver:
    """A webhook on 127.0.0.1: records each request, answers `statuses` in turn (then 200),
    after `delay_s` (cut short when the receiver closes)."""

    def __init__(self, statuses: Sequence[int] = (), delay_s: float = 0.0) -> None:
        self.statuses = list(statuses)
        self.delay_s = delay_s
        self.received: list[tuple[dict[str, str], bytes]] = []
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _handle(self, request: web.Request) -> web.Response:
        self.received.append((dict(request.headers), await request.read()))
        if self.delay_s:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), self.delay_s)
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/hook/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/hook/{TOKEN_IN_PATH}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        assert self._runner is not None
        await self._runner.cleanup()

    def events(self) -> list[str]:
        return [json.loads(body)["event"] for _, body in self.received]

    async def wait_for(self, count: int, limit_s: float = 5.0) -> None:
        for _ in range(int(limit_s / 0.01)):
            if len(self.received) >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{len(self.received)} requests, not {count}: {self.events()}")


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook/x"


def change(
    before: str | None, after: str | None, account: str = "a1", reason: str | None = None
) -> StatusChange:
    return StatusChange(account, f"label-{account}", before, after, reason, None)


def seeded(alerts: Alerts, **statuses: str) -> None:
    """Give `alerts` the accounts `id=status` it learns from the store at start."""
    for account, status in statuses.items():
        alerts.changed(change(None, status, account))


def fields(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, Any]]:
    return [getattr(r, FIELDS_ATTR) for r in caplog.records if r.getMessage() == name]


async def test_an_alert_is_posted_signed_with_the_account_and_no_secret() -> None:
    async with Receiver() as receiver, Alerts([Webhook(receiver.url, SECRET)]) as alerts:
        seeded(alerts, a1="active")
        alerts.changed(change("active", "suspended", reason="suspended by Kiro: User d-1"))
        await receiver.wait_for(2)
    assert receiver.events() == ["account_suspended", "all_accounts_down"]
    headers, body = receiver.received[0]
    document = json.loads(body)
    assert document["account"] == {
        "id": "a1",
        "label": "label-a1",
        "status": "suspended",
        "reason": "suspended by Kiro: User d-1",
        "until": None,
    }
    assert document["kirod"] == {"version": __version__}
    assert abs(document["at"] - time.time()) < 60
    stamp = headers["X-Kirod-Timestamp"]
    expected = hmac.new(SECRET.encode(), f"{stamp}.".encode() + body, hashlib.sha256)
    assert hmac.compare_digest(headers["X-Kirod-Signature"], "sha256=" + expected.hexdigest())
    assert SECRET.encode() not in body
    assert SECRET not in json.dumps(headers)
    assert json.loads(receiver.received[1][1])["account"] is None


async def test_which_changes_alert_and_when_all_accounts_are_down() -> None:
    async with Receiver() as receiver, Alerts([Webhook(receiver.url)]) as alerts:
        seeded(alerts, a1="active", a2="active")
        alerts.changed(change("active", "cooling_down", "a1"))  # routine: no alert
        alerts.changed(change("cooling_down", "active", "a1"))
        alerts.changed(change("active", "disabled", "a1", reason="disabled by the user"))
        alerts.changed(change("active", "needs_login", "a2"))  # the last usable one
        alerts.changed(change("needs_login", "needs_login", "a2"))  # no news
        alerts.changed(change("disabled", "active", "a1"))
        alerts.changed(change("needs_login", "exhausted", "a2"))
        alerts.changed(change("exhausted", None, "a2"))  # removed
        await receiver.wait_for(6)
        await asyncio.sleep(0.1)  # nothing more comes
    assert receiver.events() == [
        "account_disabled",
        "account_needs_login",
        "all_accounts_down",
        "account_recovered",
        "accounts_recovered",
        "account_exhausted",
    ]
    bodies = [json.loads(body) for _, body in receiver.received]
    assert bodies[0]["account"]["reason"] == "disabled by the user"
    assert bodies[4]["account"]["id"] == "a1"


async def test_a_flagged_account_alerts_when_its_rest_begins() -> None:
    async with Receiver() as receiver, Alerts([Webhook(receiver.url)]) as alerts:
        seeded(alerts, a1="active", a2="active")
        alerts.changed(change("active", "cooling_down", "a1", reason=FLAGGED_REASON))
        throttled = "rate limited by Kiro (1 consecutive failure)"
        alerts.changed(change("active", "cooling_down", "a2", reason=throttled))  # routine
        # A throttle's cool-down that Kiro's next answer turns into a rest (the store tells
        # a new reason for the same status).
        alerts.changed(change("cooling_down", "cooling_down", "a2", reason=FLAGGED_REASON))
        await receiver.wait_for(2)
        await asyncio.sleep(0.1)  # a rest is usable later: no "all accounts down"
    assert receiver.events() == ["account_flagged", "account_flagged"]
    bodies = [json.loads(body) for _, body in receiver.received]
    assert [body["account"]["id"] for body in bodies] == ["a1", "a2"]
    assert bodies[0]["account"]["status"] == "cooling_down"
    assert bodies[0]["account"]["reason"].startswith("rested 6 h: Kiro flagged suspicious")


async def test_a_failing_webhook_is_retried_with_backoff_until_it_takes_the_alert(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "kirod.control.alerts")
    receiver = Receiver(statuses=(500, 429))
    async with receiver, Alerts([Webhook(receiver.url)], backoff_s=0.05) as alerts:
        seeded(alerts, a1="active", a2="active")
        alerts.changed(change("active", "needs_profile"))
        await receiver.wait_for(3)
    assert receiver.events() == ["account_needs_profile"] * 3
    assert len({body for _, body in receiver.received}) == 1  # the same alert each time
    [delivered] = fields(caplog, "alert_delivered")
    assert delivered["attempts"] == 3
    assert TOKEN_IN_PATH not in caplog.text  # a webhook is logged by its origin only


async def test_a_down_webhook_gives_up_after_its_tries_and_a_4xx_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "kirod.control.alerts")
    async with Receiver(statuses=(404,)) as refusing:
        hooks = [Webhook(closed_port_url()), Webhook(refusing.url)]
        async with Alerts(hooks, tries=3, backoff_s=0.01) as alerts:
            seeded(alerts, a1="active", a2="active")
            alerts.changed(change("active", "suspended"))
            for _ in range(500):
                if len(fields(caplog, "alert_failed")) == 2:
                    break
                await asyncio.sleep(0.01)
    failed = {entry["status"]: entry for entry in fields(caplog, "alert_failed")}
    assert failed[None]["attempts"] == 3
    assert failed[404]["attempts"] == 1
    assert len(refusing.received) == 1


async def test_shutdown_with_a_slow_webhook_is_bounded_and_says_what_was_left() -> None:
    async with Receiver(delay_s=30) as slow:
        alerts = Alerts([Webhook(slow.url)], timeout_s=10, drain_s=0.3)
        async with alerts:
            seeded(alerts, a1="active", a2="active")
            alerts.changed(change("active", "suspended"))
            await slow.wait_for(1)
            started = time.monotonic()
        assert time.monotonic() - started < 2


async def test_a_request_past_the_timeout_counts_as_not_delivered() -> None:
    async with Receiver(delay_s=30) as slow, Alerts([Webhook(slow.url)], timeout_s=0.2) as alerts:
        answer = await alerts.test()
    [result] = answer.webhooks
    assert not result.delivered
    assert result.status is None
    assert result.error == "no answer in 0.2 s"


async def test_the_queue_is_bounded_and_drops_the_oldest(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "kirod.control.alerts")
    slow = Receiver(delay_s=30)
    async with (
        slow,
        Alerts([Webhook(slow.url)], queue_size=3, timeout_s=10, drain_s=0.2) as alerts,
    ):
        seeded(alerts, a1="active", a2="active")
        for _ in range(5):  # ten alerts before the delivery task runs at all
            alerts.changed(change("active", "suspended"))
            alerts.changed(change("suspended", "active"))
        assert len(fields(caplog, "alert_dropped")) == 7
        await slow.wait_for(1)
    assert slow.events() == ["account_recovered"]  # the oldest kept: the eighth alert
    [left] = fields(caplog, "alerts_undelivered")
    assert left["count"] == 2


async def test_the_test_alert_reports_each_webhook_with_one_try() -> None:
    async with Receiver() as ok, Receiver(statuses=(500,)) as failing:
        hooks = [Webhook(ok.url, SECRET), Webhook(closed_port_url()), Webhook(failing.url)]
        async with Alerts(hooks) as alerts:
            answer = await alerts.test()
    took, down, refused = answer.webhooks
    assert (took.delivered, took.status, took.error) == (True, 200, None)
    assert took.webhook.endswith("/…")
    assert TOKEN_IN_PATH not in took.webhook
    assert (down.delivered, down.status) == (False, None)
    assert down.error == "ClientConnectorError"
    assert (refused.delivered, refused.status, refused.error) == (False, 500, "HTTP 500")
    assert len(failing.received) == 1
    assert ok.events() == ["test"]
    assert answer.desktop is None


async def test_without_webhooks_nothing_is_sent_and_the_test_says_so() -> None:
    async with Alerts([]) as alerts:
        seeded(alerts, a1="active")
        alerts.changed(change("active", "suspended"))
        assert not alerts.enabled
        assert (await alerts.test()).webhooks == ()


async def test_desktop_notifications_run_the_notifier_with_the_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = tmp_path / "shown"
    program = tmp_path / "notify-send"
    program.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {shown}\n')
    program.chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    async with Alerts([], desktop="notify-send") as alerts:
        seeded(alerts, a1="active", a2="active")
        alerts.changed(change("active", "needs_login", reason="the refresh token was rejected"))
        for _ in range(500):
            if shown.exists():
                break
            await asyncio.sleep(0.01)
        assert (await alerts.test()).desktop == "shown"
    lines = shown.read_text().splitlines()
    assert lines[:4] == [
        "--app-name=kirod",
        "--",
        "kirod",
        "label-a1 is needs login: the refresh token was rejected",
    ]
    assert lines[-1] == "test"


async def test_the_store_tells_its_observer_each_committed_status_change(tmp_path: Path) -> None:
    seen: list[tuple[str | None, str | None, str | None]] = []
    async with Database(tmp_path / "kirod.db") as db:
        store = AccountStore(db)
        store.observe(lambda c: seen.append((c.before, c.after, c.reason)))
        record = await store.insert(
            label="work",
            auth_kind="social",
            region="us-east-1",
            auth_region="us-east-1",
            credentials={"refresh_token": "r"},
        )
        await store.update_state(record.id, lambda r: AccountState("needs_login", "rejected"))
        await store.update_state(record.id, lambda r: None)  # no decision, no change
        await store.update_state(record.id, lambda r: AccountState("needs_login", "again"))
        await store.update_state(  # the same status and reason: nothing to tell
            record.id, lambda r: AccountState("needs_login", "again", failures=1)
        )
        fresh = await store.get(record.id)
        assert fresh is not None
        await store.update_credentials(record.id, {"refresh_token": "new"}, fresh.generation)
        await store.update_state(record.id, lambda r: AccountState("needs_profile", "none"))
        await store.set_profile(
            record.id, "arn:aws:codewhisperer:us-east-1:1:profile/P", "us-east-1"
        )
        await store.remove(record.id)
    assert seen == [
        (None, "active", None),
        ("active", "needs_login", "rejected"),
        ("needs_login", "needs_login", "again"),  # a new reason is told too
        ("needs_login", "active", None),
        ("active", "needs_profile", "none"),
        ("needs_profile", "active", None),
        ("active", None, None),
    ]


def test_webhooks_are_read_from_alerts_tables_and_from_json(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "[alerts]\ndesktop = true\n\n"
        '[[alerts.webhook]]\nurl = "https://hooks.example.com/kirod/TOKEN"\n'
        f'secret = "{SECRET}"\n\n'
        '[[alerts.webhook]]\nurl = "http://127.0.0.1:9000/"\n'
    )
    settings = load_settings(env={"HOME": str(tmp_path)}, config_path=config)
    assert settings.alerts_desktop is True
    assert settings.alerts_webhooks == (
        Webhook("https://hooks.example.com/kirod/TOKEN", SECRET),
        Webhook("http://127.0.0.1:9000/"),
    )
    assert settings.redacted()["alerts_webhooks"] == [
        {"url": "https://hooks.example.com/…", "secret": "<redacted>"},
        {"url": "http://127.0.0.1:9000", "secret": None},
    ]
    assert SECRET not in repr(settings)
    assert "TOKEN" not in repr(settings)
    env = {
        "HOME": str(tmp_path),
        "KIROD_ALERTS_WEBHOOKS": json.dumps([{"url": "https://h.example/x", "secret": "s"}]),
    }
    assert load_settings(env=env, config_path=config).alerts_webhooks == (
        Webhook("https://h.example/x", "s"),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[alerts.webhook]]\nurl = "ftp://h.example/"\n', "webhook 1: 'url' must be an http"),
        ("[[alerts.webhook]]\nsecret = 'x'\n", "webhook 1: 'url' must be an http"),
        (
            '[[alerts.webhook]]\nurl = "https://h.example/"\nsecrets = "x"\n',
            "webhook 1 has an unknown key 'secrets'",
        ),
        (
            '[[alerts.webhook]]\nurl = "https://h.example/"\nsecret = ""\n',
            "webhook 1: 'secret' must be a non-empty string",
        ),
        ("[alerts]\nemail = true\n", "unknown option 'alerts.email'"),
        ('alerts = "yes"\n', "'alerts' in"),
        ("alerts_desktop = true\n[alerts]\ndesktop = false\n", "sets both 'alerts.desktop'"),
    ],
)
def test_bad_webhook_tables_are_refused_naming_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as refused:
        load_settings(env={"HOME": str(tmp_path)}, config_path=config)
    assert "h.example" not in str(refused.value)  # no value is echoed: a URL may hold a token


def test_a_webhook_list_in_the_environment_must_be_json(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KIROD_ALERTS_WEBHOOKS": "https://h.example/"}
    with pytest.raises(ConfigError, match="'alerts_webhooks' from KIROD_ALERTS_WEBHOOKS: not JSON"):
        load_settings(env=env)
