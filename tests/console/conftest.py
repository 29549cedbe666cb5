"""The browser harness for the web console's tests (and test_cors_browser.py, the public API's
CORS seen by a page): Debian's Chromium driven by Playwright.

Chromium is Debian's package (`make browser` installs it, best effort), launched through
Playwright's `executable_path`; `playwright install` is never used (its CDN is unreachable from
CI). Not installed: every test that needs it skips, naming why (`.cache/browser/why`, or "run
`make browser`"). Named by `KIROD_TEST_CHROMIUM` but broken: those tests fail.
`KIROD_TEST_NO_BROWSER=1` acts as if Chromium were absent, to check that skip.

Fixtures:
- `chromium` (session): the `Chromium(path, version)` to launch.
- `browser` (function): a launched headless Chromium, closed after the test. Function scope
  because Playwright's objects belong to the event loop that made them, and each test has its
  own loop (asyncio_default_fixture_loop_scope = "function"); a launch takes well under a second.
- `page` (function): `await page(width=1280, record=None)` opens a page in a fresh context with
  that viewport width (1280 desktop, 360 phone) and 10 s default timeouts; with a `SeenBodies`,
  records it. Every context is closed after the test.

Helpers (import them from `tests.console.console_harness`): `screenshot(page, name)` writes
`artifacts/<name>.png`; `SeenBodies` records what the browser received from `/console` URLs and
`assert_no_secret(secrets)` checks it; `known_secrets()` gathers what must never be shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from tests.console.console_harness import (
    CHROMIUM_ARGS,
    DEFAULT_TIMEOUT_MS,
    LAUNCH_TIMEOUT_MS,
    Chromium,
    SeenBodies,
    known_secrets,
    locate_chromium,
    screenshot,
    viewport,
)

__all__ = ["SeenBodies", "known_secrets", "screenshot"]

PageFactory = Callable[..., Awaitable[Page]]
DRIVER_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 15.0


@pytest.fixture(scope="session")
def chromium(drove: Callable[[str], None]) -> Chromium:
    found = locate_chromium()
    drove(f"console tests drove {found.version} ({found.path})")
    return found


@pytest.fixture
async def browser(chromium: Chromium) -> AsyncIterator[Browser]:
    # Bounded: the driver (a node process) and the browser each start within a timeout. No
    # `async with` spans the yield: setup and teardown may run in different tasks.
    driver = await asyncio.wait_for(async_playwright().start(), DRIVER_TIMEOUT_S)
    try:
        launched = await driver.chromium.launch(
            executable_path=str(chromium.path),
            headless=True,
            args=list(CHROMIUM_ARGS),
            timeout=LAUNCH_TIMEOUT_MS,
        )
        try:
            yield launched
        finally:
            await asyncio.wait_for(launched.close(), CLOSE_TIMEOUT_S)
    finally:
        await asyncio.wait_for(driver.stop(), CLOSE_TIMEOUT_S)


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[PageFactory]:
    contexts: list[BrowserContext] = []
    recorders: list[SeenBodies] = []

    async def new_page(width: int = 1280, record: SeenBodies | None = None) -> Page:
        context = await browser.new_context(viewport=viewport(width))  # type: ignore[arg-type]
        contexts.append(context)
        context.set_default_timeout(DEFAULT_TIMEOUT_MS)
        context.set_default_navigation_timeout(DEFAULT_TIMEOUT_MS)
        opened = await context.new_page()
        if record is not None:
            await record.attach(opened)
            recorders.append(record)
        return opened

    try:
        yield new_page
    finally:
        # Bodies still being read finish (or are cancelled) before their pages go away.
        for recorder in recorders:
            await recorder.settle()
        for context in contexts:
            await asyncio.wait_for(context.close(), CLOSE_TIMEOUT_S)
