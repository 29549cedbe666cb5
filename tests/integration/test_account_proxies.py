"""Per-account proxies behind the real daemon: each account's traffic goes through its own proxy
(kirod.testing.proxies, on loopback), `direct` bypasses the global proxy_url, `none` goes back to
it, and a proxy's password never shows in the log, the control API or `kiroctl accounts list`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from click.testing import CliRunner, Result

from kirod.cli.main import cli
from kirod.errors import ControlError
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import DeviceFlow, FakeKiro, ThreadedFake, TokenSet
from kirod.testing.proxies import HttpProxy, Socks5Proxy, ThreadedProxy
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
PASSWORD = "hunter2-very-secret"


@pytest.fixture(scope="module")
def proxies() -> Iterator[dict[str, Any]]:
    with (
        ThreadedProxy(HttpProxy()) as global_proxy,
        ThreadedProxy(HttpProxy()) as http_proxy,
        ThreadedProxy(Socks5Proxy(username="alice", password=PASSWORD)) as socks,
    ):
        yield {"global": global_proxy, "http": http_proxy, "socks": socks}


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, proxies: dict[str, Any]) -> Iterator[DaemonProcess]:
    root = Path(tempfile.mkdtemp(prefix="kd-"))
    proc = start_daemon(
        root,
        fake,
        {
            "KIROD_ACCOUNT_SELECTION_STRATEGY": "round-robin",
            "KIROD_PROXY_URL": proxies["global"].url,
            # A proxy sees the head of a connection's first request only: idle connections
            # retire after a second, so a test can make each account open a new one.
            "KIROD_UPSTREAM_KEEP_ALIVE_TIMEOUT_S": "1",
        },
    )
    try:
        yield proc
    finally:
        assert proc.stop() == 0
        shutil.rmtree(root, ignore_errors=True)


def kiroctl(daemon: DaemonProcess, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), *args])


def bearers(proxy: Any) -> set[str]:
    """The access tokens of the requests a proxy relayed."""
    found = set()
    for head in proxy.seen:
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.strip().lower() == "authorization" and value.strip().startswith("Bearer "):
                found.add(value.strip().removeprefix("Bearer "))
    return found


def settle(proxies: dict[str, Any], quiet_s: float = 0.5, limit_s: float = 10.0) -> None:
    """Wait until no proxy relayed a new connection for `quiet_s`."""
    deadline = time.monotonic() + limit_s
    counts = None
    while time.monotonic() < deadline:
        now = [len(proxy.seen) for proxy in proxies.values()]
        if now == counts:
            return
        counts = now
        time.sleep(quiet_s)


def ask(daemon: DaemonProcess) -> None:
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as client:
        client.messages.create(
            model=MODEL, max_tokens=20, messages=[{"role": "user", "content": "hi"}]
        )


def test_each_account_takes_its_own_route(
    daemon: DaemonProcess, fake: ThreadedFake, proxies: dict[str, Any]
) -> None:
    service: FakeKiro = fake.fake
    tokens: dict[str, TokenSet] = {}
    for name in ("http", "socks", "direct", "global"):
        tokens[name] = service.issue_social_account()
        account = import_account(daemon, tokens[name])
        target = {
            "http": proxies["http"].url,
            "socks": proxies["socks"].url.replace("socks5://", "socks5h://"),
            "direct": "direct",
            "global": "none",
        }[name]
        result = kiroctl(daemon, "accounts", "set-proxy", account["id"], target)
        assert result.exit_code == 0, result.output
        assert PASSWORD not in result.output
    # The imports' welcome probes read the accounts before their proxies were set: let them end,
    # and their connections retire.
    settle(proxies)
    time.sleep(1.0)
    for proxy in proxies.values():
        proxy.seen.clear()
    service.clear_requests()

    for _ in range(8):  # round-robin: each of the four serves two
        ask(daemon)
    served = {chat.account_id for chat in service.requests("chat")}
    assert served == {t.account_id for t in tokens.values()}

    seen = {name: bearers(proxy) for name, proxy in proxies.items()}
    assert tokens["http"].access_token in seen["http"]
    assert tokens["socks"].access_token in seen["socks"]
    assert tokens["global"].access_token in seen["global"]
    # ... and no account's traffic took another's route; `direct` took none.
    assert seen["http"] <= {tokens["http"].access_token}
    assert seen["socks"] <= {tokens["socks"].access_token}
    assert seen["global"] <= {tokens["global"].access_token}
    assert tokens["direct"].access_token not in set().union(*seen.values())
    assert proxies["socks"].offered
    assert set(proxies["socks"].offered) == {("alice", PASSWORD)}


def test_the_proxy_password_never_leaves_the_daemon(
    daemon: DaemonProcess, proxies: dict[str, Any]
) -> None:
    listed = kiroctl(daemon, "accounts", "list", "--json")
    assert listed.exit_code == 0, listed.output
    assert PASSWORD not in listed.output
    shown = {doc["proxy_url"] for doc in json.loads(listed.stdout)["accounts"]}
    port = proxies["socks"].port
    assert f"socks5h://alice:***@127.0.0.1:{port}" in shown
    assert "direct" in shown
    assert None in shown

    table = kiroctl(daemon, "accounts", "list")
    assert table.exit_code == 0, table.output
    assert PASSWORD not in table.output
    assert "PROXY" in table.output
    assert "alice:***@" in table.output
    assert PASSWORD not in daemon.log()
    assert "account_proxy_set" in daemon.log()


def test_a_bad_proxy_url_is_a_clear_400(daemon: DaemonProcess) -> None:
    account = daemon.client.accounts()[0]
    for bad, says in (
        ("ftp://proxy:21", "not supported"),
        ("http://proxy.example", "needs a port"),
        (f"socks5://alice:{PASSWORD}@proxy:99999", "not a valid URL"),
    ):
        result = kiroctl(daemon, "accounts", "set-proxy", account.id, bad)
        assert result.exit_code != 0
        assert says in result.output
        assert PASSWORD not in result.output
    with pytest.raises(ControlError) as caught:
        daemon.client.request("POST", f"/accounts/{account.id}/proxy", {"proxy_url": 1080})
    assert caught.value.status == 400
    with pytest.raises(ControlError) as caught:
        daemon.client.set_account_proxy(account.id, "gopher://proxy:70")
    assert (caught.value.status, caught.value.code) == (400, "invalid_proxy")


def test_a_device_login_goes_through_and_keeps_its_proxy(
    daemon: DaemonProcess, fake: ThreadedFake, proxies: dict[str, Any]
) -> None:
    fake.fake.set_device_flow(DeviceFlow(pending_polls=0, interval_s=1))
    global_before = len(proxies["global"].targets)
    with ThreadedProxy(HttpProxy(username="bob", password=PASSWORD)) as own:
        pending = daemon.client.start_login(proxy_url=own.url)
        final = daemon.client.login(pending.id, wait_s=20)
        assert final.state == "approved", final
        assert final.account is not None
        # Register, device authorization, token and usage on the login's own connection (the
        # global proxy saw none of them), then the new account's.
        assert own.targets
        assert len(proxies["global"].targets) == global_before
        account = daemon.client.account(final.account["id"])
        assert account.proxy_url == f"http://bob:***@127.0.0.1:{own.port}"
    assert PASSWORD not in daemon.log()
