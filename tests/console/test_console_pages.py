"""The web console in a real browser (Debian's Chromium), against the real daemon and the fake
Kiro: signing in with a one-time link, what the overview shows when the fake throttles an
account, actions that reach the control API, a device login, forged requests from another
loopback origin, and what the pages weigh, show at 360 px and in dark mode, and never contain."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, expect

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import DeviceFlow, Fault, Script, ThreadedFake
from tests.console.console_harness import SeenBodies, known_secrets, link, screenshot
from tests.support.kiro_env import import_account, kiro_ide_token_file, start_daemon

PageFactory = Callable[..., Awaitable[Page]]
PAGES = {
    "overview": "/console/",
    "accounts": "/console/accounts",
    "traffic": "/console/traffic",
    "models": "/console/models",
    "keys": "/console/keys",
    "add": "/console/add",
}
FIRST_LOAD_BUDGET = 100 * 1024
IN_MINUTES = re.compile(r"^in [45]m \d+s$")
HTTP_LINK = re.compile(r"^http://127\.0\.0\.1:\d+/")


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake)
    for _ in range(2):
        import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


async def signed_in(
    page: PageFactory, daemon: DaemonProcess, *, width: int = 1280, seen: SeenBodies | None = None
) -> Page:
    opened = await page(width=width, record=seen)
    await opened.goto(link(daemon))
    await expect(opened.get_by_role("heading", name="Overview")).to_be_visible()
    return opened


def key_names(daemon: DaemonProcess) -> set[str]:
    listed = daemon.client.keys()
    return {key.name for key in listed}


def ask(daemon: DaemonProcess) -> None:
    with anthropic.Anthropic(
        base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0
    ) as client:
        client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=50,
            messages=[{"role": "user", "content": "hello"}],
        )


async def test_a_link_signs_in_once_and_leaves_no_token_in_the_address(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    url = link(daemon)
    first = await page()
    await first.goto(url)
    await expect(first.get_by_role("heading", name="Overview")).to_be_visible()
    assert "#t=" not in first.url
    cookies = await first.context.cookies()
    assert [(c["httpOnly"], c["sameSite"], c["path"]) for c in cookies] == [
        (True, "Strict", "/console")
    ]
    again = await page()  # another browser profile, the same link
    await again.goto(url)
    await expect(again.locator("#signin")).to_contain_text("used or has expired")
    assert not await again.context.cookies()


async def test_the_overview_shows_a_throttled_account_cooling_down_with_a_countdown(
    page: PageFactory, daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    fake.fake.enqueue(Script(fault=Fault.THROTTLE_429, retry_after_s=300))
    ask(daemon)  # the first account is throttled; the request fails over to the second
    cooling = [a for a in daemon.client.accounts() if a.status == "cooling_down"]
    assert len(cooling) == 1
    opened = await signed_in(page, daemon)
    card = opened.locator(f"#account-{cooling[0].id}")
    await expect(card.locator(".badge")).to_have_text("cooling down")
    countdown = card.locator(f'[data-k="a.{cooling[0].id}.until"]')
    await expect(countdown).to_have_text(IN_MINUTES)
    first = await countdown.text_content()
    # It counts down live: the text moves on within a few of its one-second ticks (waited for,
    # not slept: a renderer starved by a loaded machine may run a tick late).
    await expect(countdown).not_to_have_text(first or "", timeout=5_000)
    await expect(opened.locator('[data-k="t.usable"]')).to_have_text("1")
    await screenshot(opened, "overview-throttled-1280")
    daemon.client.enable_account(cooling[0].id)


async def test_disabling_in_the_page_disables_the_account(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    target = daemon.client.accounts()[0]
    opened = await signed_in(page, daemon)
    card = opened.locator(f"#account-{target.id}")
    await card.get_by_role("button", name=f"Disable {target.label}").click()
    await expect(card.locator(".badge")).to_have_text("disabled")
    assert daemon.client.account(target.id).status == "disabled"
    await card.get_by_role("button", name=f"Enable {target.label}").click()
    await expect(card.locator(".badge")).to_have_text("active")
    assert daemon.client.account(target.id).status == "active"


async def test_a_change_made_elsewhere_reaches_an_open_page_live(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    target = daemon.client.accounts()[1]
    opened = await signed_in(page, daemon)
    badge = opened.locator(f"#account-{target.id} .badge")
    await expect(badge).to_have_text("active")
    daemon.client.disable_account(target.id)
    try:
        await expect(badge).to_have_text("disabled")  # no reload: the event stream carried it
        await expect(opened.locator(f"#account-{target.id}")).to_have_attribute(
            "data-status", "disabled"
        )
    finally:
        daemon.client.enable_account(target.id)


async def test_removing_asks_first_and_a_dismissed_question_removes_nothing(
    page: PageFactory, daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    extra = import_account(daemon, fake.fake.issue_social_account())
    opened = await signed_in(page, daemon)
    questions: list[str] = []

    async def dismiss(dialog: Any) -> None:
        questions.append(dialog.message)
        await dialog.dismiss()

    opened.on("dialog", dismiss)
    remove = opened.locator(f"#account-{extra['id']}").get_by_role("button", name="Remove")
    await remove.click()
    await expect(remove).to_be_enabled()
    assert questions
    assert "Remove this account" in questions[0]
    assert extra["id"] in {a.id for a in daemon.client.accounts()}
    opened.remove_listener("dialog", dismiss)
    opened.on("dialog", lambda dialog: dialog.accept())
    await remove.click()
    await expect(opened.locator(f"#account-{extra['id']}")).to_have_count(0)
    assert extra["id"] not in {a.id for a in daemon.client.accounts()}


async def test_a_device_login_completes_from_the_page(
    page: PageFactory, daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    fake.fake.set_device_flow(DeviceFlow(pending_polls=1, interval_s=1))
    before = {a.id for a in daemon.client.accounts()}
    opened = await signed_in(page, daemon)
    await opened.get_by_role("link", name="Add account").click()
    await opened.get_by_role("button", name="Start login").click()
    await expect(opened.locator("#device-code")).not_to_be_empty()
    await expect(opened.locator("#device-link")).to_have_attribute("href", HTTP_LINK)
    await expect(opened.locator("#device-state")).to_contain_text("Approved", timeout=20_000)
    added = {a.id for a in daemon.client.accounts()} - before
    assert len(added) == 1
    await screenshot(opened, "add-login-approved-1280")
    daemon.client.remove_account(added.pop())


async def test_a_key_made_in_the_page_is_shown_once(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    opened = await signed_in(page, daemon)
    await opened.get_by_role("link", name="Keys").click()
    await opened.get_by_label("Name").fill("from-the-console")
    await opened.get_by_role("button", name="Create key").click()
    secret = opened.locator("#secret-value")
    await expect(secret).to_have_text(re.compile(r"^sk-kirod-"))
    shown = await secret.text_content()
    assert shown
    made = key_names(daemon)
    assert "from-the-console" in made
    await opened.reload()
    assert shown not in await opened.content()
    # In the keys table and in the budgets table.
    named = opened.get_by_role("cell", name="from-the-console", exact=True)
    await expect(named).to_have_count(2)
    opened.on("dialog", lambda dialog: dialog.accept())
    await opened.get_by_role("button", name="Revoke from-the-console").click()
    await expect(named).to_have_count(0)
    assert "from-the-console" not in key_names(daemon)


FORGERY = """<!doctype html><html><body>
<form id="f" method="post" action="{target}/console/api/keys" enctype="text/plain">
<input name='{{"name": "forged-by-form", "x": "' value='"}}'></form>
<script src="/forge.js"></script></body></html>"""
FORGE_JS = """
fetch("{target}/console/api/keys", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"Content-Type": "text/plain"}}, body: JSON.stringify({{name: "forged-by-fetch"}})}})
  .finally(() => document.getElementById("f").submit());
"""


async def test_a_page_on_another_loopback_port_cannot_act_with_the_session(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    """Another port of 127.0.0.1 is the same site, so the browser sends the Strict cookie: the
    Origin and CSRF checks are what refuse it."""
    opened = await signed_in(page, daemon)
    target = daemon.base_url

    async def forgery(_: web.Request) -> web.Response:
        return web.Response(text=FORGERY.format(target=target), content_type="text/html")

    async def forge_js(_: web.Request) -> web.Response:
        return web.Response(text=FORGE_JS.format(target=target), content_type="text/javascript")

    evil = web.Application()
    evil.router.add_get("/", forgery)
    evil.router.add_get("/forge.js", forge_js)
    async with TestServer(evil, host="127.0.0.1") as server:
        statuses: list[int] = []
        opened.on(
            "response",
            lambda response: (
                statuses.append(response.status) if "/console/api/keys" in response.url else None
            ),
        )
        await opened.goto(str(server.make_url("/")))
        await opened.wait_for_url(f"{target}/console/api/keys")
    assert 403 in statuses
    assert not {"forged-by-form", "forged-by-fetch"} & key_names(daemon)


@pytest.mark.parametrize("width", [1280, 360])
async def test_every_page_fits_weighs_little_and_carries_no_secret(
    page: PageFactory, daemon: DaemonProcess, width: int
) -> None:
    ask(daemon)  # something on the traffic page
    seen = SeenBodies()
    opened = await signed_in(page, daemon, width=width, seen=seen)
    for name, path in PAGES.items():
        weights: list[int] = []

        async def weigh(response: Any, into: list[int] = weights) -> None:
            if "/console/" in response.url and response.request.resource_type != "eventsource":
                into.append(len(await response.body()))

        opened.on("response", weigh)
        await opened.goto(daemon.base_url + path)
        await opened.wait_for_load_state("load")
        await seen.capture_content(opened)
        opened.remove_listener("response", weigh)
        await seen.settle()
        assert sum(weights) <= FIRST_LOAD_BUDGET, (name, weights)
        overflow = await opened.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{name} scrolls sideways at {width} px"
        await screenshot(opened, f"{name}-{width}")
    await seen.assert_no_secret(known_secrets(), allow_unread=True)


CONTRAST = """() => {
  const rgb = (text) => (text.match(/[\\d.]+/g) || []).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => {
      c /= 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05); };
  const back = (el) => {
    for (let node = el; node; node = node.parentElement) {
      const c = getComputedStyle(node).backgroundColor;
      if (!c.startsWith("rgba(0, 0, 0, 0)") && c !== "transparent") return rgb(c);
    }
    return rgb(getComputedStyle(document.documentElement).backgroundColor);
  };
  const worst = [];
  const texts = "h1, h2, h3, dt, dd, a, button, caption, th, td, p, label, .badge";
  for (const el of document.querySelectorAll(texts)) {
    if (!el.textContent.trim() || !el.getClientRects().length) continue;
    const r = ratio(rgb(getComputedStyle(el).color), back(el));
    const what = el.tagName + " " + el.textContent.trim().slice(0, 30);
    if (r < 4.5) worst.push(what + " " + r.toFixed(2));
  }
  return [getComputedStyle(document.body).backgroundColor, worst];
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_text_keeps_its_contrast_in_light_and_dark_mode(
    page: PageFactory, daemon: DaemonProcess, scheme: str
) -> None:
    opened = await signed_in(page, daemon)
    await opened.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    for name, path in PAGES.items():
        await opened.goto(daemon.base_url + path)
        background, low = await opened.evaluate(CONTRAST)
        assert not low, (name, scheme, low)
        dark = sum(int(part) for part in background[4:-1].split(",")[:3]) < 150
        assert dark == (scheme == "dark"), background
    await opened.goto(daemon.base_url + "/console/")
    await screenshot(opened, f"overview-{scheme}-1280")


async def test_the_actions_are_reachable_with_the_keyboard(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    opened = await signed_in(page, daemon)
    reached: list[str] = []
    for _ in range(40):
        await opened.keyboard.press("Tab")
        reached.append(
            await opened.evaluate(
                "() => (document.activeElement.getAttribute('aria-label') || "
                "document.activeElement.textContent || '').trim()"
            )
        )
    assert "Traffic" in reached
    assert any(label.startswith("Disable ") for label in reached), reached
    first = daemon.client.accounts()[0]
    target = opened.locator(f"#account-{first.id}").get_by_role("button", name="Disable")
    await target.focus()
    await opened.keyboard.press("Enter")
    await expect(opened.locator(f"#account-{first.id} .badge")).to_have_text("disabled")
    daemon.client.enable_account(first.id)


async def test_pages_hold_no_inline_script_and_the_policy_blocks_one(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    opened = await signed_in(page, daemon)
    violations: list[str] = []
    opened.on("console", lambda message: violations.append(message.text))
    for path in PAGES.values():
        await opened.goto(daemon.base_url + path)
        inline = await opened.evaluate(
            "() => [...document.scripts].filter((s) => !s.src).length"
            " + document.querySelectorAll('[style], [onclick], [onload]').length"
        )
        assert inline == 0, path
    await opened.evaluate(
        "() => { const s = document.createElement('script'); s.textContent = "
        "'window.injected = 1'; document.body.append(s); }"
    )
    assert await opened.evaluate("() => window.injected === undefined")
    assert any("Content Security Policy" in text for text in violations), violations


async def test_a_token_file_uploaded_in_the_page_adds_an_account(
    page: PageFactory, daemon: DaemonProcess, fake: ThreadedFake, tmp_path: Path
) -> None:
    token_file = tmp_path / "kiro-auth-token.json"
    token_file.write_bytes(kiro_ide_token_file(fake.fake.issue_social_account()))
    before = {a.id for a in daemon.client.accounts()}
    opened = await signed_in(page, daemon)
    await opened.get_by_role("link", name="Add account").click()
    await opened.get_by_label("File").set_input_files(str(token_file))
    await opened.get_by_label("Label (optional)").fill("uploaded in the console")
    await opened.get_by_role("button", name="Import").click()
    await expect(opened.locator("#notice")).to_have_text("Imported: uploaded in the console.")
    added = [a for a in daemon.client.accounts() if a.id not in before]
    assert [a.label for a in added] == ["uploaded in the console"]
    daemon.client.remove_account(added[0].id)


async def test_the_pages_read_without_javascript(browser: Browser, daemon: DaemonProcess) -> None:
    signing = await browser.new_context()
    try:
        tab = await signing.new_page()
        await tab.goto(link(daemon))
        await expect(tab.get_by_role("heading", name="Overview")).to_be_visible()
        cookies = await signing.cookies()
    finally:
        await signing.close()
    static = await browser.new_context(java_script_enabled=False)
    try:
        await static.add_cookies(cookies)  # type: ignore[arg-type]
        tab = await static.new_page()
        await tab.goto(daemon.base_url + "/console/")
        first = daemon.client.accounts()[0]
        card = tab.locator(f"#account-{first.id}")
        await expect(card.locator(".badge")).to_have_text(first.status.replace("_", " "))
        await expect(card).to_contain_text("Slots in use")
        await tab.goto(daemon.base_url + "/console/traffic")
        await expect(tab.locator("figure svg")).to_have_count(4)
    finally:
        await static.close()


@pytest.mark.parametrize(
    ("button", "said"), [("Refresh token", "token refreshed"), ("Probe usage", "usage probed")]
)
async def test_refresh_and_probe_run_from_the_page(
    page: PageFactory, daemon: DaemonProcess, fake: ThreadedFake, button: str, said: str
) -> None:
    target = daemon.client.accounts()[0]
    asked = len(fake.fake.requests())
    opened = await signed_in(page, daemon)
    await opened.locator(f"#account-{target.id}").get_by_role("button", name=button).click()
    await expect(opened.locator("#notice")).to_have_text(f"Account {said}.")
    assert len(fake.fake.requests()) > asked  # it reached Kiro (the fake), not a cache
