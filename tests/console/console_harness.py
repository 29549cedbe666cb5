"""What the console tests import: where Chromium is, how it is launched, screenshots, and the
recorder of everything the browser received from `/console` (see conftest.py for the fixtures).

Tests import it as `tests.console.console_harness` (`from tests.console.console_harness import
SeenBodies`).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.async_api import BrowserContext, CDPSession, Page, Response
from playwright.async_api import Error as PlaywrightError

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ARTIFACTS = HERE / "artifacts"
WHY_FILE = REPO / ".cache" / "browser" / "why"
DEFAULT_CHROMIUM = Path("/usr/bin/chromium")

CHROMIUM_ARGS = (
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # On a closed network these background fetches stall or fail and make launches flaky.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
LAUNCH_TIMEOUT_MS = 30_000
DEFAULT_TIMEOUT_MS = 10_000
"""Every Playwright action and navigation, so a broken page fails a test instead of hanging it."""
VERSION_TIMEOUT_S = 30.0
BODY_WAIT_S = 5.0
"""How long `settle()` waits for response bodies still being read."""
VIEWPORT_HEIGHT = {1280: 800, 360: 740}
"""Desktop and phone; other widths get a 4:3 height."""


@dataclass(frozen=True)
class Chromium:
    path: Path
    version: str


def _absent_reason() -> str:
    try:
        recorded = WHY_FILE.read_text().strip()
    except OSError:
        recorded = ""
    return recorded or "run `make browser`"


def locate_chromium() -> Chromium:
    """Chromium for the console tests, or a skip (absent) or failure (named but broken).

    `KIROD_TEST_CHROMIUM` names a binary that must work; otherwise Debian's /usr/bin/chromium if
    installed. `KIROD_TEST_NO_BROWSER=1` behaves as if none were installed (to check the skip).
    """
    __tracebackhide__ = True
    named = os.environ.get("KIROD_TEST_CHROMIUM")
    if os.environ.get("KIROD_TEST_NO_BROWSER") == "1":
        pytest.skip(f"console browser tests: KIROD_TEST_NO_BROWSER=1 ({_absent_reason()})")
    if named:
        path = Path(named)
    elif os.access(DEFAULT_CHROMIUM, os.X_OK):
        path = DEFAULT_CHROMIUM
    else:
        pytest.skip(f"console browser tests: no {DEFAULT_CHROMIUM}: {_absent_reason()}")
    try:
        done = subprocess.run(
            [str(path), "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"{path} does not run: {exc}")
    # Debian's launcher script may print shell noise before the version line.
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return Chromium(path, lines[-1].strip() if lines else "unknown version")


def viewport(width: int) -> dict[str, int]:
    return {"width": width, "height": VIEWPORT_HEIGHT.get(width, width * 3 // 4)}


async def screenshot(page: Page, name: str) -> Path:
    """A full-page PNG in tests/console/artifacts/ (CI keeps that directory as an artefact)."""
    ARTIFACTS.mkdir(exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "page"
    path = ARTIFACTS / f"{safe}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path


def known_secrets() -> set[str]:
    """What no page may ever show: every token, refresh token, client secret and code any fake
    Kiro of this session issued, and every daemon's API key (as tests/conftest.py's
    `no_secret_in_any_daemon_log` collects them)."""
    secrets = {secret for fake in FakeKiro.created for secret in fake.issued_secrets()}
    secrets |= {key for daemon in DaemonProcess.started if (key := daemon.known_api_key)}
    return secrets


@dataclass
class Seen:
    url: str
    what: str  # "body", "headers", "sse", "content"
    text: str


@dataclass
class SeenBodies:
    """Everything a page received from `/console` URLs: each response's headers and body (HTML,
    JSON, JS, CSS, …), each EventSource message, and on request the rendered `page.content()`.

    `await seen.attach(page)` before navigating; `await seen.assert_no_secret(known_secrets())`
    at the end. Bodies are read as responses arrive (Playwright can only read them while the
    page lives). EventSource messages come from the DevTools `Network.eventSourceMessageReceived`
    event, since a stream's body is never complete. A body that could not be read (a `fetch()`
    stream still open, a request aborted by navigation) is listed in `unread` and fails the
    check unless `allow_unread=True`: an unread body is not a clean one.
    """

    path_prefix: str = "/console"
    seen: list[Seen] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    _pending: set[asyncio.Task[None]] = field(default_factory=set)
    _sessions: list[CDPSession] = field(default_factory=list)

    def _wanted(self, url: str) -> bool:
        return urlsplit(url).path.startswith(self.path_prefix)

    async def attach(self, target: Page | BrowserContext) -> None:
        """Record `target`: a page, or every current and future page of a context (a page opened
        later is recorded from its first response, its EventSource messages from when its
        DevTools session is up)."""
        if isinstance(target, BrowserContext):
            target.on("page", lambda page: self._spawn(self._watch(page)))
            for page in target.pages:
                await self._watch(page)
        else:
            await self._watch(target)

    def _watch(self, page: Page) -> Coroutine[Any, Any, None]:
        # Listening starts now, synchronously; only the DevTools session needs awaiting.
        page.on("response", lambda response: self._spawn(self._read(response)))
        return self._open_devtools(page)

    async def _open_devtools(self, page: Page) -> None:
        try:
            session = await page.context.new_cdp_session(page)
            session.on("Network.eventSourceMessageReceived", self._on_sse)
            await session.send("Network.enable")
        except PlaywrightError as exc:
            if not page.is_closed():  # a page closed first received nothing more to record
                self.unread.append(f"EventSource messages of {page.url}: {exc.message}")
            return
        self._sessions.append(session)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    def _on_sse(self, event: dict[str, object]) -> None:
        # The event names no URL; the request id could, but every stream the console opens is
        # its own, and a message is recorded wherever it came from (stricter, never looser).
        self.seen.append(Seen(f"eventsource {event.get('eventName', '')}", "sse", str(event)))

    async def _read(self, response: Response) -> None:
        if not self._wanted(response.url):
            return
        try:
            headers = await response.all_headers()
            self.seen.append(Seen(response.url, "headers", repr(sorted(headers.items()))))
            if response.request.resource_type == "eventsource" or 300 <= response.status < 400:
                return  # the stream's messages arrive through _on_sse; redirects have no body
            body = await response.body()
        except PlaywrightError as exc:
            self.unread.append(f"{response.url}: {exc.message.splitlines()[0]}")
            return
        self.seen.append(Seen(response.url, "body", body.decode("utf-8", "replace")))

    async def capture_content(self, page: Page) -> str:
        """The page's current DOM as HTML, recorded with the rest."""
        content = await page.content()
        self.seen.append(Seen(page.url, "content", content))
        return content

    async def settle(self) -> None:
        """Wait (bounded) for the bodies still being read; what does not finish is unread."""
        pending = set(self._pending)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=BODY_WAIT_S)
        for task in late:
            task.cancel()
            self.unread.append(f"a body not read within {BODY_WAIT_S} s")
        await asyncio.gather(*late, return_exceptions=True)

    def texts(self) -> list[str]:
        return [item.text for item in self.seen]

    async def assert_no_secret(self, secrets: Iterable[str], *, allow_unread: bool = False) -> None:
        """Fail if any secret is in anything recorded, naming each by its first 8 characters
        only (and masking every secret in the URLs named)."""
        __tracebackhide__ = True
        await self.settle()
        wanted = sorted({secret for secret in secrets if secret}, key=len, reverse=True)

        def masked(text: str) -> str:
            for secret in wanted:
                text = text.replace(secret, secret[:8] + "…")
            return text

        leaks = sorted(
            {
                f"{secret[:8]}… in {item.what} of {masked(item.url)}"
                for item in self.seen
                for secret in wanted
                if secret in item.text or secret in item.url
            }
        )
        if leaks:
            pytest.fail("secrets the browser received: " + "; ".join(leaks), pytrace=False)
        if self.unread and not allow_unread:
            unread = "; ".join(masked(item) for item in self.unread)
            pytest.fail(f"bodies the recorder could not read: {unread}", pytrace=False)


def link(daemon: DaemonProcess) -> str:
    answer = daemon.client.request("POST", "/console")
    assert isinstance(answer, dict)
    url: str = answer["url"]
    return url
