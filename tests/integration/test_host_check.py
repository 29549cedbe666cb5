"""The public API's `Host` check against the real daemon: loopback names pass (the base URLs the
client tests use among them), a rebound name gets 403 `host_not_allowed` in each API's envelope
before any key is asked for, CORS preflights included; `/health` stays open; `allowed_hosts`
adds names. Which values pass in every case (listen address, wildcard binds): tests/http/
test_hosts.py."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
ORIGIN = "http://localhost:3210"
REBOUND = "rebound.example"  # a page's domain, resolved to 127.0.0.1 by its owner's DNS


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    env = {
        "KIROD_ENABLE_OLLAMA_API": "true",
        "KIROD_ENABLE_CHAT_COMPLETIONS": "true",
        "KIROD_CORS_ORIGINS": ORIGIN,
    }
    proc = start_daemon(module_tmp / "default", fake, env)
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def docker(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    env = {"KIROD_ALLOWED_HOSTS": "host.docker.internal"}
    proc = start_daemon(module_tmp / "docker", fake, env)
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


def port_of(proc: DaemonProcess) -> int:
    return int(proc.address.rsplit(":", 1)[1])


def send(
    proc: DaemonProcess,
    method: str,
    path: str,
    host: str | bytes,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
) -> tuple[int, Mapping[str, str], Any]:
    """One request to the daemon's loopback address that names `host` in `Host`."""
    connection = http.client.HTTPConnection("127.0.0.1", port_of(proc), timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        connection.putheader("Host", host)
        data = None if body is None else json.dumps(body).encode()
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        if data is not None:
            connection.putheader("Content-Type", "application/json")
            connection.putheader("Content-Length", str(len(data)))
        connection.endheaders(data)
        answer = connection.getresponse()
        raw = answer.read()
    finally:
        connection.close()
    shown = {name.lower(): value for name, value in answer.getheaders()}
    return answer.status, shown, json.loads(raw) if raw else None


def keyed(proc: DaemonProcess) -> dict[str, str]:
    return {"Authorization": f"Bearer {proc.api_key}"}


def test_loopback_names_pass_with_or_without_a_port(daemon: DaemonProcess) -> None:
    port = port_of(daemon)
    for name in ("127.0.0.1", "localhost", "[::1]", "LOCALHOST"):
        for host in (f"{name}:{port}", name, f"{name}:{port + 1}"):
            status, _, body = send(daemon, "GET", "/v1/models", host, keyed(daemon))
            assert status == 200, (host, body)


@pytest.mark.parametrize("host", [REBOUND, "rebound.example:{port}", "localhost.rebound.example"])
def test_a_rebound_name_is_refused_in_each_apis_envelope_before_the_key(
    daemon: DaemonProcess, service: FakeKiro, host: str
) -> None:
    host = host.format(port=port_of(daemon))
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "x"}]}
    answers = {
        "anthropic": send(daemon, "POST", "/v1/messages", host, {}, {**chat, "max_tokens": 9}),
        "openai": send(daemon, "POST", "/v1/responses", host, {}, {"model": MODEL, "input": "x"}),
        "chat": send(daemon, "POST", "/v1/chat/completions", host, keyed(daemon), chat),
        "ollama": send(daemon, "GET", "/api/tags", host),
        "models": send(daemon, "GET", "/v1/models", host, keyed(daemon)),
    }
    for api, (status, headers, body) in answers.items():
        assert status == 403, (api, body)
        assert headers["x-should-retry"] == "false"
        if api == "anthropic":
            assert body["error"]["type"] == "permission_error"
            message = body["error"]["message"]
        elif api == "ollama":
            assert list(body) == ["error"]
            message = body["error"]
        else:
            assert (body["error"]["type"], body["error"]["code"]) == (
                "permission_error",
                "host_not_allowed",
            )
            message = body["error"]["message"]
        assert "allowed_hosts" in message
        assert f"Host '{host}'" in message
    assert service.requests("chat") == []
    logged = [line for line in daemon.log().splitlines() if " request " in line]
    assert all(" status=403 " in line for line in logged[-len(answers) :])


def test_a_preflight_from_a_rebound_name_is_refused_too(daemon: DaemonProcess) -> None:
    asks = {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-api-key",
    }
    status, headers, _ = send(
        daemon, "OPTIONS", "/v1/messages", f"127.0.0.1:{port_of(daemon)}", asks
    )
    assert (status, headers["access-control-allow-origin"]) == (204, ORIGIN)
    status, headers, body = send(daemon, "OPTIONS", "/v1/messages", REBOUND, asks)
    assert status == 403
    assert "access-control-allow-origin" not in headers
    assert "allowed_hosts" in body["error"]["message"]


def test_health_stays_open_to_any_host(daemon: DaemonProcess) -> None:
    for path in ("/health", "/health/"):
        status, _, body = send(daemon, "GET", path, REBOUND)
        assert status == 200, body


def test_a_host_is_shown_escaped_in_the_refusal(daemon: DaemonProcess) -> None:
    status, _, body = send(
        daemon, "GET", "/v1/models", "r\u00e9bound.example".encode(), keyed(daemon)
    )
    assert status == 403
    assert "'r\\xe9bound.example'" in body["error"]["message"]
    assert body["error"]["message"].isascii()


def test_allowed_hosts_adds_a_name_on_any_port(docker: DaemonProcess, service: FakeKiro) -> None:
    port = port_of(docker)
    for host in (f"host.docker.internal:{port}", "host.docker.internal:8080", f"localhost:{port}"):
        status, _, body = send(docker, "GET", "/v1/models", host, keyed(docker))
        assert status == 200, (host, body)
    status, _, body = send(docker, "GET", "/v1/models", f"{REBOUND}:{port}", keyed(docker))
    assert status == 403
    service.enqueue(Reply(text="ok"))
    status, _, body = send(
        docker,
        "POST",
        "/v1/messages",
        f"host.docker.internal:{port}",
        keyed(docker),
        {"model": MODEL, "max_tokens": 9, "messages": [{"role": "user", "content": "x"}]},
    )
    assert (status, body["content"][0]["text"]) == (200, "ok")


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_the_sdks_base_urls_still_work(daemon: DaemonProcess, service: FakeKiro, name: str) -> None:
    """The base URLs tests/clients gives the real clients: http://127.0.0.1:port and
    http://localhost:port."""
    base = f"http://{name}:{port_of(daemon)}"
    service.enqueue(Reply(text="one"), Reply(text="two"))
    with anthropic.Anthropic(base_url=base, api_key=daemon.api_key, max_retries=0) as claude:
        message = claude.messages.create(
            model=MODEL, max_tokens=9, messages=[{"role": "user", "content": "x"}]
        )
    assert message.content[0].text == "one"  # type: ignore[union-attr]
    with openai.OpenAI(base_url=f"{base}/v1", api_key=daemon.api_key, max_retries=0) as gpt:
        assert gpt.responses.create(model=MODEL, input="x").output_text == "two"
