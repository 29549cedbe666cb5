"""CORS in a real browser (Debian's Chromium, through this directory's harness): a page served
from a loopback origin listed in `cors_origins` calls the real daemon with `fetch()`, sending the
headers the Anthropic and OpenAI JS SDKs send from a browser, and reads the model's text, streamed
and not; a page from an unlisted origin is refused by the browser after a 403 preflight, and Kiro
never hears of it. tests/integration/test_cors.py checks the headers over plain HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import Reply, Script, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

PageFactory = Callable[..., Awaitable[Page]]
MODEL = "claude-sonnet-4-6"
PAGE = b"<!doctype html><meta charset=utf-8><title>browser app</title><h1>browser app</h1>"

# What the SDKs add in a browser (Anthropic 1.17 with dangerouslyAllowBrowser, OpenAI 6.49):
# their platform headers, the retry count and timeout, and each one's own.
STAINLESS = {
    "X-Stainless-Lang": "js",
    "X-Stainless-OS": "Unknown",
    "X-Stainless-Arch": "unknown",
    "X-Stainless-Runtime": "browser:chrome",
    "X-Stainless-Runtime-Version": "140.0.0",
    "X-Stainless-Retry-Count": "0",
}

# Runs in the page: one fetch, its answer read whole (an SSE stream to its end), or why it failed.
FETCH = """async ({url, headers, body}) => {
  try {
    const answer = await fetch(url, {method: "POST", headers, body: JSON.stringify(body)});
    return {status: answer.status, requestId: answer.headers.get("request-id"),
            text: await answer.text()};
  } catch (error) {
    return {error: `${error.name}: ${error.message}`};
  }
}"""


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def origins() -> Iterator[tuple[str, str]]:
    """Two page servers on loopback: (the listed origin, an unlisted one)."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Page) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    try:
        listed, other = (f"http://127.0.0.1:{s.server_address[1]}" for s in servers)
        yield listed, other
    finally:
        for server, thread in zip(servers, threads, strict=True):
            server.shutdown()
            server.server_close()
            thread.join(5)


@pytest.fixture(scope="module")
def daemon(
    fake: ThreadedFake, module_tmp: Path, origins: tuple[str, str]
) -> Iterator[DaemonProcess]:
    extra = {"KIROD_CORS_ORIGINS": origins[0], "KIROD_ENABLE_CHAT_COMPLETIONS": "1"}
    proc = start_daemon(module_tmp, fake, extra)
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


def anthropic_headers(key: str) -> dict[str, str]:
    return {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "x-api-key": key,
        "anthropic-version": "2023-06-01",
        "anthropic-dangerous-direct-browser-access": "true",
        "X-Stainless-Package-Version": "1.17.0",
        "X-Stainless-Timeout": "600",
        **STAINLESS,
    }


def openai_headers(key: str) -> dict[str, str]:
    return {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {key}",
        "X-Stainless-Package-Version": "6.49.0",
        **STAINLESS,
    }


def sse_text(stream: str, event_type: str, field: str) -> str:
    """The text a stream carried: `field` of every `data:` payload of type `event_type`."""
    text = ""
    for line in stream.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            payload = json.loads(line[6:])
            if payload.get("type") == event_type:
                delta = payload["delta"]
                text += delta[field] if isinstance(delta, dict) else delta
    return text


async def opened_at(page: PageFactory, origin: str) -> Page:
    opened = await page()
    await opened.goto(origin + "/")
    assert await opened.title() == "browser app"
    return opened


async def call(opened: Page, url: str, headers: dict[str, str], body: Any) -> dict[str, Any]:
    answer: dict[str, Any] = await opened.evaluate(
        FETCH, {"url": url, "headers": headers, "body": body}
    )
    return answer


def access_lines(daemon: DaemonProcess, method: str, path: str) -> list[str]:
    return [
        line
        for line in daemon.log().splitlines()
        if " request " in line and f"method={method} " in line and f"path={path} " in line
    ]


async def logged(daemon: DaemonProcess, method: str, path: str, after: int = 0) -> list[str]:
    """The access lines of `method path` beyond the first `after`, waiting up to 5 s for one."""
    for _ in range(50):
        lines = access_lines(daemon, method, path)[after:]
        if lines:
            return lines
        await asyncio.sleep(0.1)
    return []


async def test_a_page_from_a_listed_origin_reads_the_models_answers(
    page: PageFactory, daemon: DaemonProcess, fake: ThreadedFake, origins: tuple[str, str]
) -> None:
    opened = await opened_at(page, origins[0])
    key = daemon.api_key
    ask = [{"role": "user", "content": "hello from the page"}]

    fake.fake.enqueue(Reply(text="Hello, browser."))
    answer = await call(
        opened,
        daemon.base_url + "/v1/messages",
        anthropic_headers(key),
        {"model": MODEL, "max_tokens": 64, "messages": ask},
    )
    assert answer.get("status") == 200, answer
    assert json.loads(answer["text"])["content"][0]["text"] == "Hello, browser."
    assert answer["requestId"].startswith("req_")  # an exposed header the page may read
    # The browser asked first: those headers are no simple request.
    assert any("status=204" in line for line in await logged(daemon, "OPTIONS", "/v1/messages"))

    fake.fake.enqueue(Script(reply=Reply(text="streamed to the page"), chunk_size=5))
    answer = await call(
        opened,
        daemon.base_url + "/v1/messages",
        anthropic_headers(key),
        {"model": MODEL, "max_tokens": 64, "messages": ask, "stream": True},
    )
    assert answer.get("status") == 200, answer
    assert sse_text(answer["text"], "content_block_delta", "text") == "streamed to the page"

    fake.fake.enqueue(Reply(text="Chat from the page."))
    answer = await call(
        opened,
        daemon.base_url + "/v1/chat/completions",
        openai_headers(key),
        {"model": MODEL, "messages": ask},
    )
    assert answer.get("status") == 200, answer
    assert json.loads(answer["text"])["choices"][0]["message"]["content"] == "Chat from the page."

    fake.fake.enqueue(Script(reply=Reply(text="a response, streamed"), chunk_size=4))
    answer = await call(
        opened,
        daemon.base_url + "/v1/responses",
        openai_headers(key),
        {"model": MODEL, "input": "hello from the page", "stream": True, "store": False},
    )
    assert answer.get("status") == 200, answer
    assert sse_text(answer["text"], "response.output_text.delta", "") == "a response, streamed"
    assert answer["requestId"].startswith("req_")

    # An error reaches the page too, with the body the SDK would show.
    answer = await call(
        opened,
        daemon.base_url + "/v1/messages",
        anthropic_headers("sk-not-a-kirod-key-0123456789"),
        {"model": MODEL, "max_tokens": 64, "messages": ask},
    )
    assert answer.get("status") == 401, answer
    assert json.loads(answer["text"])["error"]["type"] == "authentication_error"


async def test_a_page_from_another_origin_is_refused_by_the_browser(
    page: PageFactory, daemon: DaemonProcess, fake: ThreadedFake, origins: tuple[str, str]
) -> None:
    opened = await opened_at(page, origins[1])
    chats = len(fake.fake.requests("chat"))
    preflights = len(access_lines(daemon, "OPTIONS", "/v1/chat/completions"))
    posts = len(access_lines(daemon, "POST", "/v1/chat/completions"))
    for path, headers in (
        ("/v1/messages", anthropic_headers(daemon.api_key)),
        ("/v1/chat/completions", openai_headers(daemon.api_key)),
    ):
        answer = await call(
            opened,
            daemon.base_url + path,
            headers,
            {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert answer == {"error": "TypeError: Failed to fetch"}
    refused = await logged(daemon, "OPTIONS", "/v1/chat/completions", preflights)
    assert refused
    assert all("status=403" in line for line in refused), refused
    assert len(access_lines(daemon, "POST", "/v1/chat/completions")) == posts  # never sent
    assert len(fake.fake.requests("chat")) == chats  # Kiro never heard of it
