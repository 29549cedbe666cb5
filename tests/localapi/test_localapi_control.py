"""The control API's status, accounts, models, stats, config and shutdown on a live daemon."""

from __future__ import annotations

import dataclasses
import json
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kirod.localapi.client import ControlError
from kirod.report_types import Pacing, Stats, Status
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import Fault, Script, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

CONFIG_KEY = "config-key-0123456789abcdefghijklmnopqrstuvwxyz"


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake, {"KIROD_API_KEYS": CONFIG_KEY})  # so no key file
    try:
        yield proc
    finally:
        proc.kill()
        assert CONFIG_KEY not in proc.log()


@pytest.fixture(scope="module")
def answers() -> list[Any]:
    """Every control answer a test saw, scanned for secrets at the end of the module."""
    return []


@pytest.fixture
def call(daemon: DaemonProcess, answers: list[Any]) -> Any:
    def request(method: str, path: str, body: Any = None) -> Any:
        answer = daemon.client.request(method, path, body, timeout=30)
        answers.append(answer)
        return answer

    return request


def test_status_is_degraded_without_an_account_and_healthy_with_one(
    call: Any, daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    empty = Status.from_json(call("GET", "/status"))
    assert empty.state == "serving"
    assert empty.health == "degraded"
    assert "no usable account" in empty.problems
    assert (empty.accounts.total, empty.accounts.usable) == (0, 0)
    assert {listener.kind for listener in empty.listeners} == {"tcp", "unix"}
    assert empty.maintenance.interval_s > 0
    assert empty.pacing == Pacing()  # off: no spacing, nothing held

    import_account(daemon, fake.fake.issue_social_account())
    ready = Status.from_json(call("GET", "/status"))
    assert (ready.health, ready.problems) == ("healthy", ())
    assert ready.accounts.by_status == {"active": 1}
    assert not ready.pacing.on
    assert ready.pacing.accounts == ()


def test_account_operations(call: Any, fake: ThreadedFake) -> None:
    [account] = call("GET", "/accounts")["accounts"]
    path = f"/accounts/{account['id']}"
    assert call("POST", path + "/disable")["status"] == "disabled"
    status = call("GET", "/status")
    assert status["health"] == "degraded"
    assert status["accounts"]["by_status"] == {"disabled": 1}
    assert call("POST", path + "/enable")["status"] == "active"

    refreshed = call("POST", path + "/refresh")
    assert refreshed["generation"] == account["generation"] + 1
    probed = call("POST", path + "/probe")
    assert probed["usage"]["remaining"] == probed["usage"]["limit"] > 0
    assert probed["usage"]["resets_at"] is not None
    assert call("GET", path)["usage"] == probed["usage"]


def test_an_api_key_account_has_nothing_to_refresh(call: Any, fake: ThreadedFake) -> None:
    key = fake.fake.issue_api_key_account().access_token
    [account] = call("POST", "/accounts/import", {"api_key": key})["accounts"]
    with pytest.raises(ControlError) as caught:
        call("POST", f"/accounts/{account['id']}/refresh")
    assert (caught.value.status, caught.value.code) == (502, "refresh_failed")
    assert call("DELETE", f"/accounts/{account['id']}") == {"removed": True}


@pytest.mark.parametrize("operation", ["enable", "disable", "refresh", "probe"])
def test_operations_on_an_unknown_account(call: Any, operation: str) -> None:
    with pytest.raises(ControlError) as caught:
        call("POST", f"/accounts/nope/{operation}")
    assert (caught.value.status, caught.value.code) == (404, "not_found")


def test_models_come_from_the_accounts(call: Any) -> None:
    [account] = call("GET", "/accounts")["accounts"]
    models = call("GET", "/models")
    assert models["source"] == "accounts"
    by_id = {row["id"]: row for row in models["models"]}
    sonnet = by_id["claude-sonnet-4-6"]
    assert sonnet["kiro_id"] == "claude-sonnet-4.6"
    assert sonnet["context_window"] > 0
    assert sonnet["accounts"] == [account["id"]]


def test_stats_summarize_the_requests(call: Any, daemon: DaemonProcess) -> None:
    before = time.time() - 1
    with anthropic.Anthropic(base_url=daemon.base_url, api_key=CONFIG_KEY, max_retries=0) as client:
        client.messages.create(
            model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        )
    report = Stats.from_json(call("GET", f"/stats?since={before}"))
    assert report.since == pytest.approx(before)
    assert report.requests == report.succeeded == 1
    assert report.success_rate == 1.0
    assert report.ttfb_ms is not None
    assert [group.key for group in report.models] == ["claude-sonnet-4-6"]
    assert len(report.accounts) == 1
    everything = call("GET", "/stats")
    assert everything["since"] is None
    assert everything["requests"] >= 1


@pytest.mark.parametrize(
    "since",
    ["abc", "-1", "nan", str(time.time() + 3600)],
    ids=["word", "negative", "nan", "an-hour-ahead"],  # stable ids: one collection per worker
)
def test_stats_refuse_a_bad_since(call: Any, since: str) -> None:
    with pytest.raises(ControlError) as caught:
        call("GET", f"/stats?since={since}")
    assert caught.value.status == 400


def test_config_shows_effective_settings_with_secrets_redacted(
    call: Any, daemon: DaemonProcess
) -> None:
    config = call("GET", "/config")
    settings = config["settings"]
    assert settings["socket_path"] == str(daemon.socket_path)
    assert settings["api_keys"] == ["<redacted>"]
    assert settings["port"] == 0
    assert CONFIG_KEY not in json.dumps(config)


def test_browser_requests_are_refused(daemon: DaemonProcess) -> None:
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(5)
        conn.connect(str(daemon.socket_path))
        conn.sendall(
            b"GET /localapi/v1/keys HTTP/1.1\r\nHost: localhost\r\n"
            b"Origin: http://evil.example\r\nConnection: close\r\n\r\n"
        )
        answer = conn.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.1 403")
    assert b'"forbidden"' in answer


def test_no_answer_carried_a_secret(answers: list[Any], fake: ThreadedFake) -> None:
    shown = json.dumps(answers)
    for secret in (*fake.fake.issued_secrets(), CONFIG_KEY):
        assert secret not in shown


def test_status_shows_pacing_and_a_shared_back_off(fake: ThreadedFake, short_tmp: Path) -> None:
    """One start per account every 120 s; a second entry of the same login (another refresh
    token, the same profile ARN) is throttled by Kiro, which holds the first one too."""
    env = {
        "KIROD_API_KEYS": CONFIG_KEY,
        "KIROD_ACCOUNT_MIN_INTERVAL_S": "120",
        "KIROD_QUEUE_TIMEOUT_S": "0.5",
    }
    proc = start_daemon(short_tmp, fake, env)
    try:
        tokens = fake.fake.issue_social_account()
        first = import_account(proc, tokens)["id"]
        with anthropic.Anthropic(base_url=proc.base_url, api_key=CONFIG_KEY, max_retries=0) as c:
            ask = {
                "model": "claude-sonnet-4-6",
                "max_tokens": 50,
                "messages": [{"role": "user", "content": "hi"}],
            }
            started = time.time()
            c.messages.create(**ask)
            paced = Status.from_json(proc.client.request("GET", "/status")).pacing
            assert (paced.on, paced.spacing_s, paced.account_min_interval_s) == (True, 120.0, 120.0)
            [only] = paced.accounts
            assert only.account_id == first
            assert started + 119 < only.next_start_at < time.time() + 120
            assert only.held_until is None  # its own spacing, no back-off

            copy = dataclasses.replace(tokens, refresh_token=f"{tokens.refresh_token}-copy")
            second = import_account(proc, copy)["id"]
            assert second != first
            fake.fake.enqueue(Script(fault=Fault.THROTTLE_429, retry_after_s=30))
            throttled = time.time()
            with pytest.raises(anthropic.RateLimitError):
                c.messages.create(**ask)  # the second entry, then nothing free in time
        status = Status.from_json(proc.client.request("GET", "/status"))
        held = status.pacing.of(first)
        assert held is not None
        assert held.held_until is not None
        assert throttled + 29 < held.held_until < time.time() + 30
        assert held.next_start_at == pytest.approx(only.next_start_at)  # the later of the two
        assert status.health == "healthy"  # a held account is not a problem
    finally:
        proc.kill()
        fake.fake.clear_scripts()


def test_shutdown_drains_and_exits_zero(fake: ThreadedFake, short_tmp: Path) -> None:
    proc = start_daemon(short_tmp, fake)
    try:
        assert proc.client.request("POST", "/shutdown") == {"stopping": True}
        assert proc.wait(15) == 0
        assert "shutdown reason=kiroctl" in proc.log()
    finally:
        proc.kill()


def test_rows_written_behind_survive_a_prompt_shutdown(fake: ThreadedFake, short_tmp: Path) -> None:
    """The oplog and the affinity bindings are written behind the requests: a SIGTERM right after
    them must still land every row before the store closes."""
    proc = start_daemon(short_tmp / "d", fake, {"KIROD_API_KEYS": CONFIG_KEY})
    try:
        import_account(proc, fake.fake.issue_social_account())
        with anthropic.Anthropic(base_url=proc.base_url, api_key=CONFIG_KEY, max_retries=0) as c:
            for n in range(3):
                c.messages.create(
                    model="claude-sonnet-4-6",
                    max_tokens=50,
                    messages=[{"role": "user", "content": f"turn {n}"}],
                    extra_headers={"x-claude-code-session-id": f"session-{n}"},
                )
        assert proc.stop() == 0
    finally:
        proc.kill()
    with sqlite3.connect(proc.state_dir / "kirod.db") as db:
        assert db.execute("SELECT count(*) FROM oplog").fetchone()[0] == 3
        assert db.execute("SELECT count(*) FROM affinity").fetchone()[0] == 3
