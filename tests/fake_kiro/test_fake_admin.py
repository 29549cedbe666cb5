"""Driving a fake from outside its event loop: ThreadedFake, the admin routes via RemoteFake,
and the standalone `python -m kirod.testing.fake_kiro`."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import IO, Any

import pytest

from kirod.testing.fake_kiro import (
    Bonus,
    DeviceFlow,
    DeviceOutcome,
    Fault,
    Latency,
    Model,
    RemoteFake,
    RemoteFakeError,
    Reply,
    Script,
    ThreadedFake,
    ToolCall,
)
from kirod.testing.fake_kiro.drift import Drift
from kirod.upstream.frames import FrameDecoder
from tests.fake_kiro.fake_bodies import body, user


def call(
    url: str, data: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    payload = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(url, data=payload, headers=headers or {})  # noqa: S310
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def chat(base_url: str, token_set: dict[str, Any], text: str = "Hi") -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token_set['accessToken']}"}
    data = body(user(text), profile_arn=token_set["profileArn"])
    status, _, raw = call(base_url + "/generateAssistantResponse", data, headers)
    return status, raw


def chat_text(raw: bytes) -> str:
    frames = FrameDecoder().feed(raw)
    return "".join(f.payload["content"] for f in frames if f.event_type == "assistantResponseEvent")


@pytest.fixture
def threaded() -> Iterator[ThreadedFake]:
    with ThreadedFake() as fake:
        yield fake


def test_threaded_fake_lifecycle() -> None:
    server = ThreadedFake()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    server.start()
    try:
        assert server.base_url.startswith("http://127.0.0.1:")
        account = server.fake.issue_social_account()
        server.fake.enqueue(Reply(text="from the test thread"))
        status, raw = chat(server.base_url, account.to_json())
        assert (status, chat_text(raw)) == (200, "from the test thread")
        with pytest.raises(RuntimeError, match="already started"):
            server.start()
    finally:
        server.stop()
    server.stop()  # idempotent
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url


def test_threaded_fake_reports_a_failed_start(threaded: ThreadedFake) -> None:
    port = int(threaded.base_url.rsplit(":", 1)[1])
    with pytest.raises(RuntimeError, match="failed to start"):
        ThreadedFake(port=port).start()


def test_remote_scripting(threaded: ThreadedFake) -> None:
    remote = RemoteFake(threaded.base_url)
    account = remote.issue_account("social", subscription="KIRO PRO+")
    assert account["authMethod"] == "social"
    assert account["accessToken"].startswith("aoa")
    reply = Reply(text="scripted", tool_calls=(ToolCall("get_weather", {"city": "Rome"}),))
    assert remote.enqueue(reply, Script(fault=Fault.QUOTA_402)) == 2
    status, raw = chat(threaded.base_url, account)
    assert (status, chat_text(raw)) == (200, "scripted")
    status, raw = chat(threaded.base_url, account)
    assert (status, json.loads(raw)["reason"]) == (402, "MONTHLY_REQUEST_COUNT")
    assert remote.enqueue(Reply(text="mine"), account_id=account["accountId"]) == 1
    remote.clear_scripts()
    remote.set_default_script(Script(reply=Reply(text="default")))
    assert chat_text(chat(threaded.base_url, account)[1]) == "default"
    remote.set_default_script(None)
    assert chat_text(chat(threaded.base_url, account)[1]) == "You said: Hi"
    remote.set_default_script(
        Script(reply=Reply(text="only mine")), account_id=account["accountId"]
    )
    other = remote.issue_account("social")
    assert chat_text(chat(threaded.base_url, account)[1]) == "only mine"
    assert chat_text(chat(threaded.base_url, other)[1]) == "You said: Hi"
    remote.set_default_script(None, account_id=account["accountId"])
    assert chat_text(chat(threaded.base_url, account)[1]) == "You said: Hi"

    requests = remote.requests("chat")
    assert [r["status"] for r in requests] == [200, 402, 200, 200, 200, 200, 200]
    assert requests[0]["json"]["profileArn"] == account["profileArn"]
    assert requests[0]["headers"]["authorization"] == f"Bearer {account['accessToken']}"
    assert remote.counters()["fault:QUOTA_402"] == 1
    remote.clear_requests()
    assert remote.requests() == []


def test_remote_accounts_and_tokens(threaded: ThreadedFake) -> None:
    remote = RemoteFake(threaded.base_url)
    account = remote.issue_account("idc", provider="Enterprise", region="eu-central-1")
    assert account["clientId"]
    assert account["clientSecret"] in remote.issued_secrets()
    usage = remote.set_usage(
        account["accountId"], current=12.5, bonuses=[{"current": 0, "limit": 5}]
    )
    assert usage["current"] == 12.5
    assert threaded.fake.account(account["accountId"]).usage.bonuses == (Bonus(0, 5),)
    [listed] = remote.accounts()
    assert (listed["account_id"], listed["kind"]) == (account["accountId"], "idc")

    assert chat(threaded.base_url, account)[0] == 200
    remote.suspend_account(account["accountId"])
    assert chat(threaded.base_url, account)[0] == 403
    remote.suspend_account(account["accountId"], suspended=False)
    remote.set_listed_windows(account["accountId"])
    assert threaded.fake.account(account["accountId"]).listed_windows
    remote.set_listed_windows(account["accountId"], listed=False)
    assert not threaded.fake.account(account["accountId"]).listed_windows
    remote.expire_access_token(account["accessToken"])
    assert chat(threaded.base_url, account)[0] == 403

    refresh = {
        "clientId": account["clientId"],
        "clientSecret": account["clientSecret"],
        "grantType": "refresh_token",
        "refreshToken": account["refreshToken"],
    }
    status, _, raw = call(threaded.base_url + "/token", refresh)
    assert status == 200
    fresh = {**account, "accessToken": json.loads(raw)["accessToken"]}
    assert chat(threaded.base_url, fresh)[0] == 200
    remote.expire_account_tokens(account["accountId"])
    assert chat(threaded.base_url, fresh)[0] == 403
    remote.revoke_refresh_token(account["refreshToken"])
    assert call(threaded.base_url + "/token", refresh)[0] == 400


def test_remote_settings(threaded: ThreadedFake) -> None:
    remote = RemoteFake(threaded.base_url)
    remote.configure(rotate_refresh_tokens=True, access_ttl_s=120, models_page_size=2)
    account = remote.issue_account()
    assert account["expiresIn"] == 120
    _, _, raw = call(threaded.base_url + "/refreshToken", {"refreshToken": account["refreshToken"]})
    assert json.loads(raw)["refreshToken"] != account["refreshToken"]
    headers = {"Authorization": f"Bearer {account['accessToken']}"}
    _, _, raw = call(threaded.base_url + "/ListAvailableModels", headers=headers)
    assert len(json.loads(raw)["models"]) == 2

    remote.set_latency(Latency(0.01, 0.0))
    assert threaded.fake.latency == Latency(0.01, 0.0)
    remote.set_model(Model("tiny", "Tiny", 10, 10, 1.0, ("TEXT",)))
    assert threaded.fake.models()[-1] == Model("tiny", "Tiny", 10, 10, 1.0, ("TEXT",))
    remote.set_device_flow(DeviceFlow(pending_polls=5, outcome=DeviceOutcome.ACCESS_DENIED))
    assert threaded.fake.tokens.device_flow.pending_polls == 5
    assert threaded.fake.tokens.device_flow.outcome is DeviceOutcome.ACCESS_DENIED
    remote.set_drifts(Drift.EVENT_TYPE, Drift.WINDOW)
    assert threaded.fake.drifts == {Drift.EVENT_TYPE, Drift.WINDOW}
    remote.set_drifts()
    assert threaded.fake.drifts == frozenset()


def test_remote_refuses_bad_input(threaded: ThreadedFake) -> None:
    remote = RemoteFake(threaded.base_url)
    with pytest.raises(RemoteFakeError, match="400"):
        remote.issue_account("martian")
    with pytest.raises(RemoteFakeError, match="400"):
        remote.configure(colour="blue")
    with pytest.raises(RemoteFakeError, match="400"):
        remote.set_usage("acct-404", current=1)
    with pytest.raises(ValueError, match="http://"):
        RemoteFake("ftp://example.com")


def read_line(stream: IO[str], timeout_s: float) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    return lines.get(timeout=timeout_s)


def test_standalone_module() -> None:
    command = [sys.executable, "-m", "kirod.testing.fake_kiro", "--subscription", "KIRO FREE"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            announced = json.loads(read_line(process.stdout, 30))
            url, account = announced["url"], announced["account"]
            assert url.startswith("http://127.0.0.1:")
            assert account["refreshToken"].startswith("aor")
            headers = {"Authorization": f"Bearer {account['accessToken']}"}
            status, _, raw = call(url + "/getUsageLimits?origin=AI_EDITOR", headers=headers)
            assert status == 200
            assert json.loads(raw)["subscriptionInfo"]["subscriptionTitle"] == "KIRO FREE"
            assert RemoteFake(url).counters()["requests:usage"] == 1
        finally:
            process.terminate()
            assert process.wait(timeout=15) == 0
