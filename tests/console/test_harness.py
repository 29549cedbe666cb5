"""The harness itself, against a tiny console-like app on 127.0.0.1: pages load, scripts served
as files run under a strict CSP while inline ones are blocked, screenshots are written at both
widths, and the recorder finds a planted secret in JSON and in an EventSource message, naming
only its first 8 characters."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, ConsoleMessage, async_playwright, expect

from tests.console.console_harness import CHROMIUM_ARGS, SeenBodies, screenshot

PLANTED = "sk-planted-0123456789abcdefghij"
CSP = "default-src 'self'"

INDEX = """<!doctype html>
<html><head><meta charset="utf-8"><title>harness</title>
<link rel="stylesheet" href="/console/app.css">
<script src="/console/app.js"></script>
</head><body>
<h1>Harness</h1>
<button id="go">Load</button>
<output id="out">idle</output>
<output id="events"></output>
<script>document.title = "inline ran";</script>
</body></html>
"""

# Loaded before the inline script (a blocking <script src> in <head>), so it sees the violation.
APP_JS = """
document.addEventListener("securitypolicyviolation", (event) => {
  document.body.dataset.violation = event.effectiveDirective;
});
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("go").addEventListener("click", async () => {
    const answer = await (await fetch("/console/api/state")).json();
    document.getElementById("out").textContent = "accounts: " + answer.accounts;
  });
  if (location.hash === "#events") {
    const source = new EventSource("/console/api/events");
    source.onmessage = (event) => {
      document.getElementById("events").textContent = "got event";
      source.close();
    };
  }
});
"""


async def index(_: web.Request) -> web.Response:
    return web.Response(
        text=INDEX, content_type="text/html", headers={"Content-Security-Policy": CSP}
    )


async def app_js(_: web.Request) -> web.Response:
    return web.Response(text=APP_JS, content_type="text/javascript")


async def app_css(_: web.Request) -> web.Response:
    return web.Response(text="body { font-family: sans-serif; }", content_type="text/css")


async def state(_: web.Request) -> web.Response:
    # The bug the recorder exists to catch: a secret in an API answer the page never displays.
    return web.json_response({"accounts": 2, "debug": {"token": PLANTED}})


async def events(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(f'data: {{"key": "{PLANTED}"}}\n\n'.encode())
    return response


@pytest.fixture
async def console() -> AsyncIterator[TestServer]:
    app = web.Application()
    app.router.add_get("/console/", index)
    app.router.add_get("/console/app.js", app_js)
    app.router.add_get("/console/app.css", app_css)
    app.router.add_get("/console/api/state", state)
    app.router.add_get("/console/api/events", events)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


async def test_page_loads_runs_its_script_and_csp_blocks_inline(console: TestServer, page) -> None:
    tab = await page(1280)
    messages: list[ConsoleMessage] = []
    tab.on("console", lambda message: messages.append(message))
    await tab.goto(str(console.make_url("/console/")))
    await expect(tab.get_by_role("heading", name="Harness")).to_be_visible()

    # The inline script did not run, and the page saw why: CSP is enforced and observable.
    await expect(tab.locator("body")).to_have_attribute("data-violation", "script-src-elem")
    assert await tab.title() == "harness"
    assert any("Content Security Policy" in message.text for message in messages), messages

    await tab.get_by_role("button", name="Load").click()
    await expect(tab.locator("#out")).to_have_text("accounts: 2")


@pytest.mark.parametrize("width", [1280, 360])
async def test_screenshot_at_each_width(console: TestServer, page, width: int) -> None:
    tab = await page(width)
    await tab.goto(str(console.make_url("/console/")))
    assert await tab.evaluate("window.innerWidth") == width
    path = await screenshot(tab, f"harness-{width}")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 1000


async def test_recorder_finds_a_planted_secret_by_prefix_only(console: TestServer, page) -> None:
    seen = SeenBodies()
    tab = await page(1280, record=seen)
    await tab.goto(str(console.make_url("/console/")))
    await tab.get_by_role("button", name="Load").click()
    await expect(tab.locator("#out")).to_have_text("accounts: 2")
    await seen.capture_content(tab)

    await seen.assert_no_secret(["not-a-secret-anywhere-123"])  # clean for what is absent
    with pytest.raises(pytest.fail.Exception) as failed:
        await seen.assert_no_secret([PLANTED])
    message = str(failed.value)
    assert "sk-plant…" in message
    assert "/console/api/state" in message
    assert PLANTED not in message
    assert PLANTED[:9] not in message  # eight characters, not one more
    # Every kind of /console response was read: HTML, JS, CSS and the JSON.
    read = {item.url.rsplit("/", 1)[-1] for item in seen.seen if item.what == "body"}
    assert read >= {"", "app.js", "app.css", "state"}


async def test_recorder_sees_eventsource_messages(console: TestServer, page) -> None:
    seen = SeenBodies()
    tab = await page(360, record=seen)
    await tab.goto(str(console.make_url("/console/#events")))
    await expect(tab.locator("#events")).to_have_text("got event")
    with pytest.raises(pytest.fail.Exception) as failed:
        await seen.assert_no_secret([PLANTED])
    assert "sk-plant… in sse" in str(failed.value)
    assert PLANTED not in str(failed.value)


async def test_browser_launches_promptly(chromium, browser: Browser) -> None:
    # A second launch inside the test, timed: function-scoped browsers stay cheap only if this is.
    started = time.monotonic()
    async with async_playwright() as driver:
        other = await driver.chromium.launch(
            executable_path=str(chromium.path), headless=True, args=list(CHROMIUM_ARGS)
        )
        elapsed = time.monotonic() - started
        await other.close()
    print(f"driver + Chromium launch: {elapsed:.2f} s")
    assert browser.is_connected()
    assert elapsed < 10, f"launch took {elapsed:.1f} s"
