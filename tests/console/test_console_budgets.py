"""Budgets in the web console, in a real browser against the real daemon and the fake Kiro: the
keys and accounts pages show each budget, what is spent today and this month and what is left,
and a chart of the last 30 days of spend per key and per account (`GET /spend`); budgets set in
the pages reach the control API; an account resting on its ceiling, and one whose overage is on,
say so."""

from __future__ import annotations

import base64
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anthropic
import pytest
from playwright.async_api import Locator, Page, expect

from kirod.http.console.overview import credits_text
from kirod.report_types import ApiKey
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.console.console_harness import link, screenshot
from tests.support.kiro_env import kiro_ide_token_file, start_daemon

PageFactory = Callable[..., Awaitable[Page]]
SETTLED_WAIT_S = 10.0


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake)
    for label in ("alpha", "beta"):
        tokens = fake.fake.issue_social_account(subscription="KIRO PRO")
        content = base64.b64encode(kiro_ide_token_file(tokens)).decode()
        proc.client.import_accounts(content=content, label=label)
        FAKE_IDS[label] = tokens.account_id
    try:
        yield proc
    finally:
        proc.kill()


FAKE_IDS: dict[str, str] = {}  # label → the account's id in the fake


def ask(daemon: DaemonProcess, secret: str, times: int = 1) -> None:
    with anthropic.Anthropic(base_url=daemon.base_url, api_key=secret, max_retries=0) as client:
        for _ in range(times):
            client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=50,
                messages=[{"role": "user", "content": "hello"}],
            )


def requests_today(daemon: DaemonProcess) -> int:
    """The requests every account served today, from the spend kept with the operation log."""
    return sum(
        daemon.client.spend("account", account.id, days=1).days[-1].requests
        for account in daemon.client.accounts()
    )


def settle_accounts(daemon: DaemonProcess, requests: int) -> None:
    """Wait until the accounts' spend counts `requests` today and nothing is held."""
    deadline = time.monotonic() + SETTLED_WAIT_S
    while requests_today(daemon) < requests or any(
        account.budget.held for account in daemon.client.accounts()
    ):
        assert time.monotonic() < deadline, "the requests never settled"
        time.sleep(0.05)


def listed_key(daemon: DaemonProcess, name: str) -> ApiKey:
    listed = daemon.client.keys()
    [key] = [key for key in listed if key.name == name]
    return key


def settled_key(daemon: DaemonProcess, name: str) -> ApiKey:
    """The key as listed once its requests have settled (nothing held, something spent)."""
    deadline = time.monotonic() + SETTLED_WAIT_S
    while True:
        key = listed_key(daemon, name)
        if (key.budget.held == 0 and key.budget.spent_today > 0) or time.monotonic() > deadline:
            return key
        time.sleep(0.05)


async def signed_in(page: PageFactory, daemon: DaemonProcess, path: str) -> Page:
    opened = await page()
    await opened.goto(link(daemon))
    await expect(opened.get_by_role("heading", name="Overview")).to_be_visible()
    await opened.goto(daemon.base_url + path)
    return opened


def row(scope: Page | Locator, name: str) -> Locator:
    """The row of a table in `scope` whose cell is `name`."""
    cell = (scope if isinstance(scope, Page) else scope.page).get_by_role(
        "cell", name=name, exact=True
    )
    return scope.get_by_role("row").filter(has=cell)


def chart(opened: Page, name: str) -> Locator:
    return opened.locator(f'figure svg[aria-label^="{name}: credits per day: "]')


async def test_the_keys_page_shows_a_key_budget_its_spend_what_is_left_and_a_chart(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    created = daemon.client.create_key(
        "capped", credits_per_day=50, credits_per_month=500, tokens_per_minute=100_000
    )
    ask(daemon, created.secret, times=2)
    key = settled_key(daemon, "capped")
    spent = key.budget.spent_today
    assert spent > 0
    series = daemon.client.spend("key", key.id)
    assert len(series.days) == 30
    assert sum(day.credits for day in series.days) == pytest.approx(spent, abs=1e-6)
    opened = await signed_in(page, daemon, "/console/keys")
    budgets = opened.locator("#key-budgets")
    cells = row(budgets, "capped").get_by_role("cell")
    await expect(cells.nth(1)).to_have_text(
        "50 credits a day · 500 a month · 100,000 tokens a minute"
    )
    await expect(cells.nth(2)).to_have_text(credits_text(spent))
    await expect(cells.nth(3)).to_have_text(credits_text(key.budget.spent_month))
    await expect(cells.nth(4)).to_have_text(
        f"{credits_text(50 - spent)} today · {credits_text(500 - key.budget.spent_month)} "
        "this month"
    )
    drawn = chart(opened, "capped")
    await expect(drawn).to_have_count(1)
    label = await drawn.get_attribute("aria-label") or ""
    assert label.endswith("day budget 50 credits"), label
    titles = await drawn.locator("rect.bar").evaluate_all(
        "(bars) => bars.filter((b) => +b.getAttribute('height') > 0)"
        ".map((b) => b.querySelector('title').textContent)"
    )
    assert [title.split(":")[0] for title in titles] == [series.days[-1].day[5:]]  # today's
    await expect(drawn.locator("line.mark")).to_have_count(1)
    # A key that never spent shows its budget but has no chart.
    daemon.client.create_key("idle", credits_per_month=9.5)
    await opened.reload()
    await expect(row(budgets, "idle").get_by_role("cell").nth(4)).to_have_text("9.5 this month")
    await expect(chart(opened, "idle")).to_have_count(0)
    await expect(row(budgets, "idle").get_by_role("cell").nth(1)).to_have_text("9.5 a month")
    await screenshot(opened, "keys-budgets-1280")
    # A request's trace says what its key's budget held for it before routing.
    [held] = [r for r in daemon.client.trace(last=50).requests if r.key_id == key.id][-1:]
    assert held.reserved_credits is not None
    assert held.reserved_tokens is not None
    await opened.goto(f"{daemon.base_url}/console/requests/{held.request_id}")
    await expect(opened.locator("dt:text-is('Held by budgets') + dd")).to_have_text(
        f"{credits_text(held.reserved_credits)} credits · {held.reserved_tokens:,} tokens, "
        "settled to the credits above"
    )


async def test_a_key_budget_set_in_the_page_replaces_the_set_and_an_empty_field_lifts_one(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    daemon.client.create_key("settable", credits_per_day=5)
    opened = await signed_in(page, daemon, "/console/keys")
    form = opened.locator("#key-budget")
    await form.get_by_label("Key").select_option(label="settable")
    day = form.get_by_label("Credits per day (empty: no limit)")
    await expect(day).to_have_value("5")  # the key's current budget, to change from
    await day.fill("")
    await form.get_by_label("Credits per month, UTC (empty: no limit)").fill("70.5")
    await form.get_by_label("Tokens per minute, input and output (empty: no limit)").fill("2000")
    await form.get_by_role("button", name="Set budget").click()
    await expect(opened.locator("#notice")).to_have_text("Budget of settable set.")
    key = listed_key(daemon, "settable")
    budget = key.budget
    assert (budget.credits_per_day, budget.credits_per_month, budget.tokens_per_minute) == (
        None,
        70.5,
        2000,
    )
    await expect(
        row(opened.locator("#key-budgets"), "settable").get_by_role("cell").nth(1)
    ).to_have_text("70.5 a month · 2,000 tokens a minute")
    await form.get_by_label("Key").select_option(label="settable")
    # Past the control API's bound (the page's field has none): its refusal, said in the page.
    tokens = form.get_by_label("Tokens per minute, input and output (empty: no limit)")
    await tokens.fill("2000000000")
    await form.get_by_role("button", name="Set budget").click()
    await expect(opened.locator("#notice")).to_contain_text("tokens_per_minute must be")
    await expect(opened.locator("#notice")).to_have_class("bad")
    again = listed_key(daemon, "settable")
    assert again.budget.tokens_per_minute == 2000


async def test_a_key_made_in_the_page_carries_its_budget(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    opened = await signed_in(page, daemon, "/console/keys")
    form = opened.locator("#new-key")
    await form.get_by_label("Name").fill("budgeted-in-page")
    await form.get_by_label("Credits per day (empty: no limit)").fill("12")
    await form.get_by_label("Tokens per minute, input and output (empty: no limit)").fill("3000")
    await form.get_by_role("button", name="Create key").click()
    await expect(opened.locator("#secret-value")).not_to_be_empty()
    key = listed_key(daemon, "budgeted-in-page")
    budget = key.budget
    assert (budget.credits_per_day, budget.credits_per_month, budget.tokens_per_minute) == (
        12,
        None,
        3000,
    )


async def test_the_accounts_page_shows_ceilings_spend_overage_and_a_chart_per_account(
    page: PageFactory, daemon: DaemonProcess, fake: ThreadedFake
) -> None:
    alpha = next(a for a in daemon.client.accounts() if a.label == "alpha")
    opened = await signed_in(page, daemon, "/console/accounts")
    form = opened.locator("#account-budget")
    await form.locator("select[name=account]").select_option(label="alpha")
    await form.get_by_label("Credits per day (empty: no limit)").fill("100")
    await form.get_by_label("Credits per month, UTC (empty: no limit)").fill("1000")
    await form.get_by_label("Allow overage", exact=False).check()
    await form.get_by_role("button", name="Set budget").click()
    await expect(opened.locator("#notice")).to_have_text("Budget of alpha set.")
    after = daemon.client.account(alpha.id)
    assert (after.budget.credits_per_day, after.budget.credits_per_month) == (100, 1000)
    assert after.allow_overage
    # Overage on in Kiro for both (as Kiro IDE's settings do): allowed for alpha only.
    for label in ("alpha", "beta"):
        fake.fake.set_usage(FAKE_IDS[label], overage_status="ENABLED")
    for account in daemon.client.accounts():
        daemon.client.probe_account(account.id)
    before = requests_today(daemon)
    ask(daemon, daemon.api_key, times=4)
    settle_accounts(daemon, before + 4)
    accounts = {a.label: a for a in daemon.client.accounts()}
    spent = {
        label: sum(d.credits for d in daemon.client.spend("account", a.id).days)
        for label, a in accounts.items()
    }
    assert sum(spent.values()) > 0
    await opened.reload()
    cells = row(opened, "alpha").get_by_role("cell")
    await expect(cells.nth(2)).to_have_text("on, allowed: kirod bills overage past the plan")
    await expect(cells.nth(3)).to_have_text("100 credits a day · 1000 a month")
    await expect(cells.nth(4)).to_have_text(credits_text(accounts["alpha"].budget.spent_today))
    await expect(cells.nth(6)).to_have_text(
        f"{credits_text(100 - spent['alpha'])} today · "
        f"{credits_text(1000 - accounts['alpha'].budget.spent_month)} this month"
    )
    beta = row(opened, "beta").get_by_role("cell")
    await expect(beta.nth(2)).to_have_text("on, guarded: kirod spends no overage")
    await expect(beta.nth(3)).to_have_text("none")
    await expect(beta.nth(6)).to_have_text("no limit")
    for label, total in spent.items():
        await expect(chart(opened, label)).to_have_count(1 if total > 0 else 0)
    if spent["alpha"] > 0:
        alpha_label = await chart(opened, "alpha").get_attribute("aria-label") or ""
        assert alpha_label.endswith("day budget 100 credits"), alpha_label
    await screenshot(opened, "accounts-budgets-1280")
    await opened.goto(daemon.base_url + "/console/")
    await expect(opened.locator(f'[data-k="a.{alpha.id}.budget"]')).to_have_text(
        f"{credits_text(accounts['alpha'].budget.spent_today)} of 100 today · "
        f"{credits_text(accounts['alpha'].budget.spent_month)} of 1000 this month"
    )
    for label in ("alpha", "beta"):
        fake.fake.set_usage(FAKE_IDS[label], overage_status="DISABLED")
    daemon.client.set_account_budget(
        alpha.id, credits_per_day=None, credits_per_month=None, allow_overage=False
    )


async def test_an_account_resting_on_its_ceiling_says_why_on_the_accounts_page(
    page: PageFactory, daemon: DaemonProcess
) -> None:
    accounts = {a.label: a for a in daemon.client.accounts()}
    alpha, beta = accounts["alpha"], accounts["beta"]
    daemon.client.disable_account(beta.id)  # every request goes to alpha
    try:
        before = requests_today(daemon)
        ask(daemon, daemon.api_key)
        settle_accounts(daemon, before + 1)
        # A ceiling below what it spent today rests it at once, until 00:00 UTC.
        daemon.client.set_account_budget(
            alpha.id, credits_per_day=0.001, credits_per_month=None, allow_overage=False
        )
        opened = await signed_in(page, daemon, "/console/accounts")
        cells = row(opened, "alpha").get_by_role("cell")
        await expect(cells.nth(1)).to_contain_text(
            "cooling down: its credit budget of 0.001 credits a day is spent"
        )
        await expect(cells.nth(6)).to_have_text("0 today")
        await expect(row(opened, "beta").get_by_role("cell").nth(1)).to_contain_text("disabled")
        await screenshot(opened, "accounts-resting-1280")
    finally:
        daemon.client.set_account_budget(
            alpha.id, credits_per_day=None, credits_per_month=None, allow_overage=False
        )
        daemon.client.enable_account(beta.id)
    assert daemon.client.account(alpha.id).status == "active"  # the ceiling lifted, the rest too
