"""The public listener's ingress against the real daemon: key gate, envelopes, ids, bodies."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest

from kirod.testing.daemon import DaemonProcess

ROUTES_DAEMON = [sys.executable, str(Path(__file__).with_name("routes_daemon.py"))]
BOOM_SECRET_PARTS = ("kaboom", "sk-secret-detail", "/home/someone")
LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def daemon(module_tmp: Path) -> Iterator[DaemonProcess]:
    root = module_tmp
    proc = DaemonProcess(
        root,
        command=ROUTES_DAEMON,
        env={"KIROD_MAX_REQUEST_BODY_BYTES": str(LIMIT)},
    )
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.kill()
        log = proc.log()
        for secret in (proc.api_key, *BOOM_SECRET_PARTS):
            assert secret not in log, f"{secret!r} leaked into the log"


async def call(
    daemon: DaemonProcess,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    data: bytes | None = None,
    auth: bool = True,
) -> tuple[int, Mapping[str, str], Any]:
    sent = {"Authorization": f"Bearer {daemon.api_key}"} if auth else {}
    sent.update(headers or {})
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, daemon.base_url + path, headers=sent, data=data) as response,
    ):
        raw = await response.read()
        body = json.loads(raw) if raw else None
        return response.status, response.headers.copy(), body


def assert_openai_envelope(body: Any, code: str | None) -> None:
    assert set(body) == {"error", "request_id"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == code
    assert body["request_id"].startswith("req_")


def assert_anthropic_envelope(body: Any, error_type: str) -> None:
    assert set(body) == {"type", "error", "request_id"}
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]


async def test_health_needs_no_key_and_head_has_no_body(daemon: DaemonProcess) -> None:
    status, _, body = await call(daemon, "GET", "/health", auth=False)
    assert (status, body) == (200, {"status": "ok"})
    status, _, body = await call(daemon, "HEAD", "/health", auth=False)
    assert status == 200
    assert body is None
    status, _, body = await call(daemon, "GET", "/health/", auth=False)
    assert (status, body) == (200, {"status": "ok"})


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer nope"},
        {"x-api-key": "nope"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
    ],
)
async def test_missing_or_wrong_key_is_401_openai(
    daemon: DaemonProcess, headers: dict[str, str]
) -> None:
    status, sent_headers, body = await call(daemon, "GET", "/ready", headers=headers, auth=False)
    assert status == 401
    assert sent_headers["WWW-Authenticate"] == "Bearer"
    assert_openai_envelope(
        body, "missing_api_key" if not headers or "Basic" in str(headers) else "invalid_api_key"
    )


async def test_missing_key_on_anthropic_route_is_anthropic_401(daemon: DaemonProcess) -> None:
    status, headers, body = await call(daemon, "POST", "/v1/messages", auth=False, data=b"{}")
    assert status == 401
    assert headers["WWW-Authenticate"] == "Bearer"
    assert_anthropic_envelope(body, "authentication_error")


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
async def test_bearer_scheme_is_case_insensitive(daemon: DaemonProcess, scheme: str) -> None:
    headers = {"Authorization": f"{scheme} {daemon.api_key}"}
    status, _, body = await call(daemon, "GET", "/ready", headers=headers, auth=False)
    assert status == 503
    assert body["reason"] == "no_active_accounts"


async def test_x_api_key_is_accepted(daemon: DaemonProcess) -> None:
    headers = {"x-api-key": daemon.api_key}
    status, _, _ = await call(daemon, "GET", "/ready", headers=headers, auth=False)
    assert status == 503


async def test_configured_keys_replace_the_generated_one(short_tmp: Path) -> None:
    proc = DaemonProcess(
        short_tmp, env={"KIROD_API_KEYS": "sk-one-0123456789abc, sk-two-0123456789abc"}
    )
    try:
        proc.wait_ready()
        assert not proc.api_key_file.exists()
        async with aiohttp.ClientSession() as session:
            for key, expected in (
                ("sk-one-0123456789abc", 503),
                ("sk-two-0123456789abc", 503),
                ("sk-three-0123456789abc", 401),
            ):
                headers = {"x-api-key": key}
                async with session.get(proc.base_url + "/ready", headers=headers) as response:
                    assert response.status == expected
    finally:
        proc.kill()
    assert "sk-one-0123456789abc" not in proc.log()


async def test_ready_reports_no_active_accounts(daemon: DaemonProcess) -> None:
    status, headers, body = await call(daemon, "GET", "/ready/")
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["reason"] == "no_active_accounts"
    assert body["request_id"] == headers["x-request-id"]


async def test_unknown_path_is_404_in_the_family_envelope(daemon: DaemonProcess) -> None:
    status, _, body = await call(daemon, "GET", "/v1/nothing")
    assert status == 404
    assert_openai_envelope(body, "not_found")
    status, _, body = await call(daemon, "POST", "/v1/messages/nothing")
    assert status == 404
    assert_anthropic_envelope(body, "not_found_error")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
async def test_wrong_method_is_405_with_allow(daemon: DaemonProcess, method: str) -> None:
    status, headers, body = await call(daemon, method, "/ready")
    assert status == 405
    assert headers["Allow"] == "GET"
    assert_openai_envelope(body, "method_not_allowed")
    status, headers, body = await call(daemon, method, "/health", auth=False)
    assert status == 405
    assert headers["Allow"] == "GET, HEAD"


async def test_wrong_method_on_anthropic_route_is_anthropic_405(daemon: DaemonProcess) -> None:
    status, headers, body = await call(daemon, "GET", "/v1/messages/test-echo")
    assert status == 405
    assert headers["Allow"] == "POST"
    assert_anthropic_envelope(body, "invalid_request_error")


async def test_request_id_is_ours_and_the_clients_is_only_logged(daemon: DaemonProcess) -> None:
    status, headers, body = await call(
        daemon, "GET", "/nothing", headers={"x-request-id": "client-chosen-id"}
    )
    assert status == 404
    ours = headers["x-request-id"]
    assert re.fullmatch(r"req_[0-9a-f]{24}", ours)
    assert body["request_id"] == ours
    await asyncio.sleep(0.1)
    line = next(line for line in daemon.log().splitlines() if ours in line and "request " in line)
    assert "client_request_id=client-chosen-id" in line


async def test_json_body_round_trip(daemon: DaemonProcess) -> None:
    status, _, body = await call(daemon, "POST", "/test/echo", data=b'{"a": [1, "\xc3\xa9"]}')
    assert (status, body) == (200, {"received": {"a": [1, "é"]}})


@pytest.mark.parametrize(
    "payload",
    [b"{", b"not json", b"", b'{"a": NaN}', b"\xff\xfe{}", b"[" * 100_000 + b"]" * 100_000],
)
async def test_malformed_json_is_400(daemon: DaemonProcess, payload: bytes) -> None:
    if len(payload) > LIMIT:
        payload = b"[" * 20_000 + b"]" * 20_000
    status, _, body = await call(daemon, "POST", "/test/echo", data=payload)
    assert status == 400
    assert_openai_envelope(body, "malformed_request_body")
    status, _, body = await call(daemon, "POST", "/v1/messages/test-echo", data=payload)
    assert status == 400
    assert_anthropic_envelope(body, "invalid_request_error")


async def test_oversized_body_is_413(daemon: DaemonProcess) -> None:
    big = b'{"x": "' + b"a" * LIMIT + b'"}'
    status, _, body = await call(daemon, "POST", "/test/echo", data=big)
    assert status == 413
    assert_openai_envelope(body, "request_too_large")
    status, _, body = await call(daemon, "POST", "/v1/messages/test-echo", data=big)
    assert status == 413
    assert_anthropic_envelope(body, "request_too_large")


async def test_oversized_chunked_body_is_413(daemon: DaemonProcess) -> None:
    async def chunks() -> Any:
        for _ in range(LIMIT // 1024 + 2):
            yield b"a" * 1024

    status, _, body = await call(daemon, "POST", "/test/echo", data=chunks())  # type: ignore[arg-type]
    assert status == 413
    assert_openai_envelope(body, "request_too_large")


async def test_unhandled_exception_is_a_fixed_500_without_internals(
    daemon: DaemonProcess,
) -> None:
    status, headers, body = await call(daemon, "GET", "/test/boom")
    assert status == 500
    assert_openai_envelope(body, "internal_error")
    text = json.dumps(body)
    for part in (*BOOM_SECRET_PARTS, "RuntimeError", "Traceback", ".py"):
        assert part not in text
    await asyncio.sleep(0.1)
    line = next(line for line in daemon.log().splitlines() if "unhandled_error" in line)
    assert "error=RuntimeError" in line
    assert headers["x-request-id"] in line
    assert re.search(r"detail_hash=[0-9a-f]{12}", line)


async def test_client_disconnect_mid_upload_is_logged_as_499(daemon: DaemonProcess) -> None:
    host, port = daemon.address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /test/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + daemon.api_key.encode() + b"\r\n"
        b'Content-Length: 1000\r\n\r\n{"partial": '
    )
    await writer.drain()
    await asyncio.sleep(0.3)
    writer.close()
    await writer.wait_closed()
    for _ in range(50):
        await asyncio.sleep(0.1)
        if "status=499" in daemon.log():
            break
    assert any("path=/test/echo status=499" in line for line in daemon.log().splitlines())
    assert await reader.read() == b""  # nothing was answered


def test_official_sdks_parse_the_envelopes(daemon: DaemonProcess) -> None:
    claude = anthropic.Anthropic(base_url=daemon.base_url, api_key="wrong", max_retries=0)
    with claude, pytest.raises(anthropic.AuthenticationError) as anthropic_error:
        claude.messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert anthropic_error.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]

    gpt = openai.OpenAI(base_url=daemon.base_url + "/v1", api_key="wrong", max_retries=0)
    with gpt, pytest.raises(openai.AuthenticationError) as openai_error:
        gpt.models.list()
    assert openai_error.value.code == "invalid_api_key"


async def test_a_hostile_path_is_logged_escaped(daemon: DaemonProcess) -> None:
    """No key needed to try: the path is logged, so it must not carry raw control characters."""
    status, _, _ = await call(daemon, "GET", "/v1/%1b%5D0;pwned%07%0Dforged", auth=False)
    assert status == 401
    await asyncio.sleep(0.2)
    lines = [line for line in daemon.log().splitlines() if "pwned" in line]
    assert lines
    for line in lines:
        assert not any(ord(c) < 0x20 and c != "\t" for c in line), repr(line)


@pytest.mark.parametrize(
    ("path", "hint"),
    [("/v1/v1/messages", "drop it"), ("/messages", "add /v1"), ("/chat/completions", "add /v1")],
)
async def test_a_misplaced_base_url_gets_a_hint(
    daemon: DaemonProcess, path: str, hint: str
) -> None:
    status, _, body = await call(daemon, "POST", path, data=b"{}")
    assert status == 404
    assert hint in json.dumps(body)
