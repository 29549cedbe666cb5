"""The web console's gate, over plain HTTP against the real daemon: one-time links, the session
cookie, Host / Origin / CSRF checks, the security headers, and what the pages never contain.
(tests/console drives the same console in a real browser.)"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner

from kirod.cli.main import cli
from kirod.errors import ControlError
from kirod.http.console.sessions import MAX_STREAMS_PER_SESSION
from kirod.report_types import ApiKey
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import kiro_ide_token_file, start_daemon

PAGES = (
    "/console/",
    "/console/accounts",
    "/console/traffic",
    "/console/models",
    "/console/keys",
    "/console/add",
)


def _link(daemon: DaemonProcess) -> tuple[str, str]:
    """(the listener's base URL, a fresh one-time token), as `kiroctl console` gets them."""
    link = daemon.client.request("POST", "/console")
    assert isinstance(link, dict)
    assert link["expires_in_s"] == 60
    base, token = link["url"].split("/console/#t=")
    return base, token


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # The default jar drops cookies of IP hosts; the tests carry the cookie themselves.
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
        yield session


def _keys(daemon: DaemonProcess) -> list[ApiKey]:
    return daemon.client.keys()


def _key_names(daemon: DaemonProcess) -> set[str]:
    return {key.name for key in _keys(daemon)}


async def _sign_in(http: aiohttp.ClientSession, daemon: DaemonProcess) -> tuple[str, str, str]:
    """Spend a link; (base URL, Cookie header value, the page's CSRF token)."""
    base, token = _link(daemon)
    async with http.post(
        f"{base}/console/session", json={"token": token}, headers={"Origin": base}
    ) as answer:
        assert answer.status == 200, await answer.text()
        cookie = answer.headers["Set-Cookie"]
    pair = cookie.split(";", 1)[0]
    async with http.get(f"{base}/console/", headers={"Cookie": pair}) as page:
        html = await page.text()
    csrf = html.split('name="kirod-csrf" content="', 1)[1].split('"', 1)[0]
    return base, pair, csrf


async def test_a_link_signs_in_once_with_a_strict_httponly_cookie(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    base, token = _link(daemon)
    async with http.post(
        f"{base}/console/session", json={"token": token}, headers={"Origin": base}
    ) as answer:
        assert answer.status == 200
        cookie = answer.headers["Set-Cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert "Path=/console" in cookie
    assert "Max-Age" not in cookie  # the cookie ends with the browser session
    assert "expires" not in cookie.lower()
    async with http.post(
        f"{base}/console/session", json={"token": token}, headers={"Origin": base}
    ) as again:
        assert again.status == 401
        assert (await again.json())["error"]["code"] == "link_used_or_expired"


async def test_without_a_session_every_page_asks_to_sign_in_and_an_api_key_does_not_help(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    for path in PAGES:
        async with http.get(
            daemon.base_url + path, headers={"Authorization": f"Bearer {daemon.api_key}"}
        ) as answer:
            assert answer.status == 401, path
            assert "kiroctl console" in await answer.text()
    async with http.post(
        f"{daemon.base_url}/console/api/keys",
        json={"name": "x"},
        headers={"Origin": daemon.base_url, "x-api-key": daemon.api_key},
    ) as action:
        assert action.status == 401
        assert (await action.json())["error"]["code"] == "signed_out"


async def test_the_console_without_its_slash_redirects_there_keeping_the_query(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    for method in ("GET", "HEAD"):
        async with http.request(
            method, f"{daemon.base_url}/console?window=day&q=a%26b", allow_redirects=False
        ) as moved:
            assert moved.status == 308, method
            assert moved.headers["Location"] == "/console/?window=day&q=a%26b"
    async with http.get(f"{daemon.base_url}/console", allow_redirects=False) as bare:
        assert (bare.status, bare.headers["Location"]) == (308, "/console/")
    async with http.get(f"{daemon.base_url}/console") as followed:
        assert followed.status == 401  # the page that asks to sign in
        assert followed.url.path == "/console/"
        assert "kiroctl console" in await followed.text()


async def test_every_answer_carries_the_security_headers_and_no_cors(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    base, cookie, _ = await _sign_in(http, daemon)
    paths = (*PAGES, "/console/static/console.js", "/console/static/console.css", "/console/nope")
    for path in paths:
        async with http.get(
            base + path, headers={"Cookie": cookie, "Origin": "http://evil.example"}
        ) as answer:
            headers = answer.headers
            csp = headers["Content-Security-Policy"]
            assert "default-src 'self'" in csp, path
            assert "script-src 'self'" in csp
            assert "unsafe-inline" not in csp
            assert "frame-ancestors 'none'" in csp
            assert headers["X-Frame-Options"] == "DENY"
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert not [name for name in headers if name.lower().startswith("access-control-")]
    async with http.get(base + "/console/nope", headers={"Cookie": cookie}) as missing:
        assert missing.status == 404


async def test_a_foreign_host_is_refused_even_with_a_session(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    """DNS rebinding: evil.example resolved to 127.0.0.1 still says `Host: evil.example`."""
    base, cookie, _ = await _sign_in(http, daemon)
    port = base.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.2:{port}"):
        async with http.get(f"{base}/console/", headers={"Cookie": cookie, "Host": host}) as answer:
            assert answer.status == 403, host
            assert "secret" not in await answer.text()
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        async with http.get(f"{base}/console/", headers={"Cookie": cookie, "Host": host}) as ok:
            assert ok.status == 200, host


async def test_changes_need_the_same_origin_and_the_csrf_token(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    base, cookie, csrf = await _sign_in(http, daemon)
    url = f"{base}/console/api/keys"
    forged: list[dict[str, str]] = [
        {"Cookie": cookie, "X-Kirod-Console-CSRF": csrf},  # no Origin
        {"Cookie": cookie, "X-Kirod-Console-CSRF": csrf, "Origin": "http://evil.example"},
        {"Cookie": cookie, "X-Kirod-Console-CSRF": csrf, "Origin": "null"},
        {"Cookie": cookie, "Origin": base},  # no CSRF token
        # The last character changed (to "x", or to "y" where it is "x")
        {
            "Cookie": cookie,
            "Origin": base,
            "X-Kirod-Console-CSRF": csrf[:-1] + "xy"[csrf[-1] == "x"],
        },
    ]
    for headers in forged:
        async with http.post(url, json={"name": "forged"}, headers=headers) as answer:
            assert answer.status == 403, headers.keys()
    assert "forged" not in _key_names(daemon)
    headers = {"Cookie": cookie, "Origin": base, "X-Kirod-Console-CSRF": csrf}
    async with http.post(url, json={"name": "made-in-console"}, headers=headers) as made:
        assert made.status == 201
        created: dict[str, Any] = await made.json()
    assert created["secret"].startswith("sk-kirod-")
    listed = {key.name: key for key in _keys(daemon)}
    assert "made-in-console" in listed
    async with http.delete(f"{url}/{listed['made-in-console'].id}", headers=headers) as revoked:
        assert revoked.status == 200
    assert "made-in-console" not in _key_names(daemon)


async def test_a_signed_out_session_is_gone(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    base, cookie, csrf = await _sign_in(http, daemon)
    headers = {"Cookie": cookie, "Origin": base, "X-Kirod-Console-CSRF": csrf}
    async with http.post(f"{base}/console/signout", headers=headers) as answer:
        assert answer.status == 200
    async with http.get(f"{base}/console/", headers={"Cookie": cookie}) as page:
        assert page.status == 401


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[]", b'{"token": 5}', b'{"token": "' + b"x" * 5000 + b'"}', b"\xff"],
)
async def test_a_malformed_sign_in_is_a_clear_400(
    http: aiohttp.ClientSession, daemon: DaemonProcess, body: bytes
) -> None:
    base = daemon.base_url
    async with http.post(f"{base}/console/session", data=body, headers={"Origin": base}) as answer:
        assert answer.status == 400
        error = (await answer.json())["error"]
    assert error["code"] == "invalid_request"
    assert "Traceback" not in json.dumps(error)


async def test_no_page_carries_a_secret(
    http: aiohttp.ClientSession, daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    base, cookie, _ = await _sign_in(http, daemon)
    secrets = {*fake.fake.issued_secrets(), daemon.api_key}
    for path in PAGES:
        async with http.get(base + path, headers={"Cookie": cookie}) as page:
            assert page.status == 200, path
            text = await page.text()
        found = [secret[:8] for secret in secrets if secret in text]
        assert not found, (path, found)


def test_a_daemon_with_the_console_off_serves_none(fake: ThreadedFake, short_tmp: Path) -> None:
    proc = start_daemon(short_tmp, fake, {"KIROD_CONSOLE": "false"})
    try:
        with pytest.raises(ControlError, match="serves no console"):
            proc.client.request("POST", "/console")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(proc.base_url + "/console/", timeout=5)  # noqa: S310
        refused.value.close()
        assert refused.value.code == 404
    finally:
        proc.kill()


def test_kiroctl_console_prints_a_link_that_works_once(daemon: DaemonProcess) -> None:
    result = CliRunner().invoke(
        cli, ["--socket", str(daemon.socket_path), "console", "--no-browser"]
    )
    assert result.exit_code == 0, result.output
    assert "within 60 s" in result.output
    url = next(word for word in result.output.split() if "/console/#t=" in word)
    base, token = url.split("/console/#t=")
    assert base == daemon.base_url
    request = urllib.request.Request(  # noqa: S310 - a loopback URL
        f"{base}/console/session",
        data=json.dumps({"token": token}).encode(),
        headers={"Origin": base, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310
        assert answer.status == 200
    as_json = CliRunner().invoke(cli, ["--socket", str(daemon.socket_path), "console", "--json"])
    assert json.loads(as_json.output)["url"].startswith(f"{base}/console/#t=")


async def _fields_until(
    lines: aiohttp.StreamReader, key: str, value: str, deadline_s: float
) -> dict[str, str]:
    """The first `fields` event on a server-sent-event stream that sets `key` to `value`
    (the first event carries every field; a later one may carry other changes)."""
    async with asyncio.timeout(deadline_s):
        event = ""
        while line := (await lines.readline()).decode():
            if line.startswith("event: "):
                event = line[7:].strip()
            elif line.startswith("data: ") and event == "fields":
                data: dict[str, str] = json.loads(line[6:])
                if data.get(key) == value:
                    return data
    raise AssertionError(f"the stream ended before {key} became {value}")


async def test_live_updates_carry_what_changed(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    base, cookie, _ = await _sign_in(http, daemon)
    account = daemon.client.accounts()[0]
    async with http.get(f"{base}/console/events", headers={"Cookie": cookie}) as stream:
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        key = f"a.{account.id}.status"
        first = await _fields_until(stream.content, key, "active", 10)
        assert {"health", "t.accounts", key} <= first.keys()  # the first message: everything
        daemon.client.disable_account(account.id)
        try:
            fields = await _fields_until(stream.content, key, "disabled", 10)
        finally:
            daemon.client.enable_account(account.id)
    assert "t.accounts" not in fields  # an update is the change (here: one state), not the page
    assert len(json.dumps(fields)) < 5000


async def test_a_session_holds_a_bounded_number_of_streams(
    http: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    base, cookie, _ = await _sign_in(http, daemon)
    async with contextlib.AsyncExitStack() as streams:
        for _ in range(MAX_STREAMS_PER_SESSION):
            opened = await streams.enter_async_context(
                http.get(f"{base}/console/events", headers={"Cookie": cookie})
            )
            assert opened.status == 200
        async with http.get(f"{base}/console/events", headers={"Cookie": cookie}) as refused:
            assert refused.status == 429


async def test_an_open_console_does_not_hold_the_drain(
    http: aiohttp.ClientSession, fake: ThreadedFake, short_tmp: Path
) -> None:
    """Live pages end when kirod stops: its drain waits for API requests, not for consoles."""
    proc = start_daemon(short_tmp, fake, {"KIROD_SHUTDOWN_DRAIN_S": "60"})
    try:
        base, cookie, _ = await _sign_in(http, proc)
        async with http.get(f"{base}/console/events", headers={"Cookie": cookie}) as stream:
            assert stream.status == 200
            loop = asyncio.get_running_loop()
            started = loop.time()
            code = await loop.run_in_executor(None, proc.stop)
            assert code == 0
            assert loop.time() - started < 20  # far below the 60 s the drain would allow
            assert await stream.content.read() is not None
    finally:
        proc.kill()


async def test_labels_are_shown_as_text_never_as_markup(
    http: aiohttp.ClientSession, daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    label = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    content = base64.b64encode(kiro_ide_token_file(fake.fake.issue_social_account())).decode()
    answer = daemon.client.request(
        "POST", "/accounts/import", {"content_b64": content, "label": label}
    )
    assert isinstance(answer, dict)
    account_id = answer["accounts"][0]["id"]
    try:
        base, cookie, _ = await _sign_in(http, daemon)
        for path in ("/console/", "/console/accounts", "/console/models"):
            async with http.get(base + path, headers={"Cookie": cookie}) as page:
                html = await page.text()
            assert "<img src=x" not in html, path
            assert "<script>alert" not in html
            assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    finally:
        daemon.client.remove_account(account_id)


async def test_a_restart_ends_every_session(
    http: aiohttp.ClientSession, fake: ThreadedFake, short_tmp: Path
) -> None:
    first = start_daemon(short_tmp, fake)
    try:
        base, cookie, _ = await _sign_in(http, first)
        async with http.get(f"{base}/console/", headers={"Cookie": cookie}) as page:
            assert page.status == 200
        assert first.stop() == 0
    finally:
        first.kill()
    port = base.rsplit(":", 1)[1]
    second = start_daemon(short_tmp, fake, {"KIROD_PORT": port})  # the same state, same address
    try:
        assert second.base_url == base
        async with http.get(f"{base}/console/", headers={"Cookie": cookie}) as page:
            assert page.status == 401
    finally:
        second.kill()
