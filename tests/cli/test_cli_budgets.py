"""Budgets through kiroctl against a live daemon and the fake Kiro: `keys create` and `keys set`
with their credit and token limits, `keys list` and `accounts list` with what is used and left,
`accounts set-budget` and the overage column, `stats --by` and `spend` — each checked against
what the fake metered for requests sent with the official SDK."""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import anthropic
import pytest
from click.testing import Result

from kirod.cli import budgets, exits
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import Reply, Script, ThreadedFake
from tests.support.kiroctl import add_account as add
from tests.support.kiroctl import kiroctl, overage_shown

CREDITS = 1.25  # what the fake meters for each request these tests send


@pytest.fixture(scope="module")
def account(daemon: DaemonProcess, fake: ThreadedFake) -> dict[str, Any]:
    return add(daemon, fake, "KIRO PRO", "budgeted")


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)


def key_named(daemon: DaemonProcess, name: str) -> dict[str, Any]:
    [key] = [
        k for k in as_json(kiroctl(daemon, "keys", "list", "--json"))["keys"] if k["name"] == name
    ]
    return key


def ask(
    daemon: DaemonProcess,
    fake: ThreadedFake,
    secret: str,
    times: int = 1,
    credits: float = CREDITS,
    *,
    queued: bool = True,
) -> None:
    """`times` requests through the SDK, each metered `credits` by the fake (unless the caller
    queued the fake's answers: `queued=False`)."""
    if queued:
        fake.fake.enqueue(*(Reply(text="ok", credits=credits) for _ in range(times)))
    with anthropic.Anthropic(base_url=daemon.base_url, api_key=secret, max_retries=0) as client:
        for _ in range(times):
            client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=50,
                messages=[{"role": "user", "content": "hi"}],
            )


def settled(daemon: DaemonProcess, name: str, spent: float) -> dict[str, Any]:
    """The key's budget once its requests settled to `spent` (settling ends after the answer)."""
    deadline = time.monotonic() + 10
    while True:
        budget: dict[str, Any] = key_named(daemon, name)["budget"]
        if round(budget["spent_today"], 6) == spent or time.monotonic() > deadline:
            assert round(budget["spent_today"], 6) == spent, budget
            return budget
        time.sleep(0.05)


def row_of(text: str, first: str) -> dict[str, str]:
    """The cells of the table row whose first cell is `first`, by their column's header."""
    header, *rows = text.splitlines()
    columns = [(m.group(), m.start()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    [line] = [line for line in rows if line.split("  ")[0] == first]
    ends = [start for _, start in columns[1:]] + [None]
    return {name: line[start:end].strip() for (name, start), end in zip(columns, ends, strict=True)}


def test_a_key_created_with_budgets_shows_used_and_left(
    daemon: DaemonProcess, fake: ThreadedFake, account: dict[str, Any]
) -> None:
    created = as_json(
        kiroctl(
            daemon,
            "keys",
            "create",
            "capped",
            "--credits-per-day",
            "10",
            "--credits-per-month",
            "300.5",
            "--tokens-per-minute",
            "20000",
            "--json",
        )
    )
    budget = created["key"]["budget"]
    assert (budget["credits_per_day"], budget["credits_per_month"]) == (10, 300.5)
    assert budget["tokens_per_minute"] == 20000
    assert (budget["spent_today"], budget["left_today"], budget["left_month"]) == (0, 10, 300.5)

    ask(daemon, fake, created["secret"], times=2)
    budget = settled(daemon, "capped", 2 * CREDITS)
    assert (budget["left_today"], budget["left_month"], budget["held"]) == (7.5, 298, 0)

    listed = ok(kiroctl(daemon, "keys", "list")).stdout
    header = listed.splitlines()[0]
    assert re.search(r"TOKENS/MIN +TODAY \(CREDITS\) +MONTH \(CREDITS\)", header), header
    row = row_of(listed, created["key"]["id"][:8])
    assert row["TOKENS/MIN"] == "20,000"
    assert row["TODAY (CREDITS)"] == "2.5 used, 7.5 left of 10"
    assert row["MONTH (CREDITS)"] == "2.5 used, 298 left of 300.5"
    default = row_of(listed, key_named(daemon, "default")["id"][:8])
    assert (default["TOKENS/MIN"], default["TODAY (CREDITS)"]) == ("unlimited", "0 used")


def test_a_request_in_flight_shows_what_it_holds(
    daemon: DaemonProcess, fake: ThreadedFake, account: dict[str, Any]
) -> None:
    secret = ok(kiroctl(daemon, "keys", "create", "holding", "--credits-per-day", "50")).stdout
    ask(daemon, fake, secret.strip())  # the first teaches kirod this model's credits a token
    settled(daemon, "holding", CREDITS)
    fake.fake.enqueue(Script(reply=Reply(text="slow", credits=CREDITS), delay_first_s=1.5))
    slow = threading.Thread(
        target=ask, args=(daemon, fake, secret.strip()), kwargs={"queued": False}
    )
    slow.start()
    try:
        deadline = time.monotonic() + 10
        while not key_named(daemon, "holding")["budget"]["held"] and time.monotonic() < deadline:
            time.sleep(0.05)
        budget = key_named(daemon, "holding")["budget"]
        assert budget["held"] > 0
        row = row_of(
            ok(kiroctl(daemon, "keys", "list")).stdout, key_named(daemon, "holding")["id"][:8]
        )
        held, left = budgets.credits(budget["held"]), budgets.credits(budget["left_today"])
        assert row["TODAY (CREDITS)"] == f"1.25 used, {held} held, {left} left of 50"
        assert budget["left_today"] == round(50 - CREDITS - budget["held"], 6)
    finally:
        slow.join(20)
    assert settled(daemon, "holding", 2 * CREDITS)["held"] == 0
    row = row_of(ok(kiroctl(daemon, "keys", "list")).stdout, key_named(daemon, "holding")["id"][:8])
    assert row["TODAY (CREDITS)"] == "2.5 used, 47.5 left of 50"


def test_credits_show_to_the_sixth_decimal(
    daemon: DaemonProcess, fake: ThreadedFake, account: dict[str, Any]
) -> None:
    secret = ok(kiroctl(daemon, "keys", "create", "thirds", "--credits-per-month", "7")).stdout
    ask(daemon, fake, secret.strip(), times=3, credits=0.333333)
    settled(daemon, "thirds", 0.999999)
    row = row_of(ok(kiroctl(daemon, "keys", "list")).stdout, key_named(daemon, "thirds")["id"][:8])
    assert row["MONTH (CREDITS)"] == "0.999999 used, 6.000001 left of 7"
    stats = ok(kiroctl(daemon, "stats", "--by", "key")).stdout
    assert re.search(r"^thirds +3 +0 +0\.999999$", stats, re.MULTILINE), stats
    spend = ok(kiroctl(daemon, "spend", "thirds", "--days", "1")).stdout
    assert re.search(r"^total +3 +[\d,]+ +[\d,]+ +0\.999999$", spend, re.MULTILINE), spend


def test_keys_set_changes_what_is_given_and_none_lifts_a_limit(daemon: DaemonProcess) -> None:
    key = as_json(kiroctl(daemon, "keys", "create", "tuned", "--json"))["key"]
    assert not any(key["budget"][name] for name in ("credits_per_day", "tokens_per_minute"))
    short = key["id"][:8]

    both = ok(
        kiroctl(
            daemon, "keys", "set", "tuned", "--credits-per-day", "5", "--tokens-per-minute", "900"
        )
    )
    assert both.stdout == f"tuned ({short}): at most 5 credits a day and 900 tokens a minute.\n"
    month = ok(kiroctl(daemon, "keys", "set", short, "--credits-per-month", "40"))
    assert month.stdout == (
        f"tuned ({short}): at most 5 credits a day, 40 credits a month and 900 tokens a minute.\n"
    )
    lifted = as_json(
        kiroctl(
            daemon,
            "keys",
            "set",
            "tuned",
            "--credits-per-day",
            "NONE",
            "--tokens-per-minute",
            "none",
            "--json",
        )
    )
    assert lifted["budget"]["credits_per_day"] is None
    assert lifted["budget"]["tokens_per_minute"] is None
    assert lifted["budget"]["credits_per_month"] == 40
    assert key_named(daemon, "tuned")["budget"] == lifted["budget"]
    everything = ok(kiroctl(daemon, "keys", "set", "tuned", "--credits-per-month", "none"))
    assert everything.stdout == f"tuned ({short}): no budget.\n"


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        ((), exits.USAGE, "give at least one of --credits-per-day"),
        (("--credits-per-day", "0"), exits.USAGE, "'0' is not a number of credits above 0"),
        (("--credits-per-month", "lots"), exits.USAGE, "'lots' is not a number of credits"),
        (("--tokens-per-minute", "1.5"), exits.USAGE, "'1.5' is not a whole number of tokens"),
        (("--credits-per-day", "2e9"), exits.USAGE, "at most 1,000,000,000"),
    ],
)
def test_keys_set_refuses_what_is_not_a_limit(
    daemon: DaemonProcess, args: tuple[str, ...], code: int, said: str
) -> None:
    listed = as_json(kiroctl(daemon, "keys", "list", "--json"))["keys"]
    if "strict" not in {key["name"] for key in listed}:  # made by the first case
        ok(kiroctl(daemon, "keys", "create", "strict", "--credits-per-day", "3"))
    before = key_named(daemon, "strict")["budget"]
    result = kiroctl(daemon, "keys", "set", "strict", *args)
    assert result.exit_code == code, result.output
    assert said in result.stderr
    assert result.stdout == ""
    assert key_named(daemon, "strict")["budget"] == before


def test_a_key_set_below_its_spend_is_refused_until_lifted(
    daemon: DaemonProcess, fake: ThreadedFake, account: dict[str, Any]
) -> None:
    secret = ok(kiroctl(daemon, "keys", "create", "lowered")).stdout.strip()
    ask(daemon, fake, secret, times=2)
    settled(daemon, "lowered", 2 * CREDITS)
    ok(kiroctl(daemon, "keys", "set", "lowered", "--credits-per-day", "2"))
    row = row_of(ok(kiroctl(daemon, "keys", "list")).stdout, key_named(daemon, "lowered")["id"][:8])
    assert row["TODAY (CREDITS)"] == "2.5 used, 0 left of 2"
    sent = len(fake.fake.requests("chat"))
    with pytest.raises(anthropic.RateLimitError) as refused:
        ask(daemon, fake, secret)
    assert "day" in refused.value.message
    assert "credit" in refused.value.message
    assert len(fake.fake.requests("chat")) == sent  # refused before Kiro
    fake.fake.clear_scripts()
    ok(kiroctl(daemon, "keys", "set", "lowered", "--credits-per-day", "none"))
    ask(daemon, fake, secret)
    settled(daemon, "lowered", 3 * CREDITS)


def test_stats_by_key_account_model_and_day(
    daemon: DaemonProcess, fake: ThreadedFake, account: dict[str, Any]
) -> None:
    secret = ok(kiroctl(daemon, "keys", "create", "counted")).stdout.strip()
    ask(daemon, fake, secret, times=3)
    spent = settled(daemon, "counted", 3 * CREDITS)["spent_today"]
    by_key = as_json(kiroctl(daemon, "stats", "--by", "key", "--json"))
    assert by_key["by"] == "key"
    [group] = [group for group in by_key["groups"] if group["name"] == "counted"]
    assert (group["requests"], group["errors"], group["credits"]) == (3, 0, spent)
    assert group["key"] == key_named(daemon, "counted")["id"]

    text = ok(kiroctl(daemon, "stats", "--by", "key")).stdout
    assert re.search(r"^KEY +REQUESTS +ERRORS +CREDITS$", text, re.MULTILINE), text
    assert re.search(r"^counted +3 +0 +3\.75$", text, re.MULTILINE), text
    for absent in ("ACCOUNT", "MODEL", "DAY (UTC)", "first byte"):
        assert absent not in text

    accounts = ok(kiroctl(daemon, "stats", "--by", "account")).stdout
    assert re.search(r"^budgeted +\d+ +\d+ +[\d.]+$", accounts, re.MULTILINE), accounts
    models = ok(kiroctl(daemon, "stats", "--by", "model")).stdout
    assert re.search(r"^claude-sonnet-4-6 +\d+", models, re.MULTILINE), models
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    days = as_json(kiroctl(daemon, "stats", "--by", "day", "--json"))["groups"]
    whole = as_json(kiroctl(daemon, "stats", "--json"))
    assert days[-1]["key"] == today
    assert round(sum(day["credits"] for day in days), 6) == whole["credits"]

    wrong = kiroctl(daemon, "stats", "--by", "week")
    assert wrong.exit_code == exits.USAGE
    assert "'week' is not one of" in wrong.stderr


def test_spend_shows_a_key_and_an_account_per_day(
    daemon: DaemonProcess, fake: ThreadedFake, account: dict[str, Any]
) -> None:
    secret = ok(kiroctl(daemon, "keys", "create", "daily", "--credits-per-day", "20")).stdout
    ask(daemon, fake, secret.strip(), times=2)
    settled(daemon, "daily", 2 * CREDITS)
    key_id = key_named(daemon, "daily")["id"]

    document = as_json(kiroctl(daemon, "spend", "daily", "--days", "3", "--json"))
    assert document == daemon.client.spend("key", key_id, days=3).to_json()
    now = datetime.now(UTC)
    assert [day["day"] for day in document["days"]] == [
        (now - timedelta(days=back)).strftime("%Y-%m-%d") for back in (2, 1, 0)
    ]
    assert (document["days"][-1]["requests"], document["days"][-1]["credits"]) == (2, 2.5)
    assert document["days"][-1]["input_tokens"] > 0

    text = ok(kiroctl(daemon, "spend", key_id[:6], "--days", "3")).stdout
    lines = text.splitlines()
    assert lines[0] == f"Key daily ({key_id[:8]}), the last 3 UTC days:"
    assert re.match(r"DAY \(UTC\) +REQUESTS +INPUT TOKENS +OUTPUT TOKENS +CREDITS$", lines[1])
    assert re.match(rf"{now:%Y-%m-%d} +2 +[\d,]+ +[\d,]+ +2\.5$", lines[4]), text
    assert re.match(r"total +2 +[\d,]+ +[\d,]+ +2\.5$", lines[5]), text
    assert lines[6:] == [
        "Budget: at most 20 credits a day.",
        "Today 2.5 used, 17.5 left of 20; this month 2.5 used.",
    ]

    by_account = as_json(kiroctl(daemon, "spend", "budgeted", "--json"))
    assert by_account["scope"] == "account"
    assert by_account["id"] == account["id"]
    assert len(by_account["days"]) == 7
    assert by_account["days"][-1]["credits"] >= 2.5
    shown = ok(kiroctl(daemon, "spend", "budgeted")).stdout
    assert shown.startswith(f"Account budgeted ({account['id'][:8]}), the last 7 UTC days:")
    assert "Budget: no budget." in shown


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (("nobody",), exits.NOT_FOUND, "no key or account matches 'nobody'"),
        (("budgeted", "--days", "0"), exits.USAGE, "0 is not in the range 1<=x<=400"),
        ((), exits.USAGE, "Missing argument 'KEY-or-ACCOUNT'"),
    ],
)
def test_spend_refuses_what_it_cannot_show(
    daemon: DaemonProcess, account: dict[str, Any], args: tuple[str, ...], code: int, said: str
) -> None:
    result = kiroctl(daemon, "spend", *args)
    assert result.exit_code == code, result.output
    assert said in result.stderr
    if code == exits.NOT_FOUND:
        assert "hint: see `kiroctl keys list` or `kiroctl accounts list`" in result.stderr


def test_a_name_both_a_key_and_an_account_has_is_asked_by_id(
    daemon: DaemonProcess, account: dict[str, Any]
) -> None:
    ok(kiroctl(daemon, "keys", "create", "budgeted"))
    try:
        both = kiroctl(daemon, "spend", "budgeted")
        assert both.exit_code == exits.USAGE
        assert "'budgeted' matches several keys and accounts: key " in both.stderr
        assert f"account {account['id'][:8]} (budgeted)" in both.stderr
        assert ok(kiroctl(daemon, "spend", account["id"])).stdout.startswith("Account budgeted")
    finally:
        ok(kiroctl(daemon, "keys", "revoke", key_named(daemon, "budgeted")["id"], "--yes"))


def test_accounts_set_budget_rests_the_account_and_lifts_it(
    daemon: DaemonProcess, fake: ThreadedFake, account: dict[str, Any]
) -> None:
    secret = ok(kiroctl(daemon, "keys", "create", "for-accounts")).stdout.strip()
    ask(daemon, fake, secret)
    settled(daemon, "for-accounts", CREDITS)
    spent = daemon.client.account(account["id"]).budget.spent_today
    assert spent >= CREDITS
    short = account["id"][:8]

    ceiling = spent + 100
    raised = ok(
        kiroctl(daemon, "accounts", "set-budget", "budgeted", "--credits-per-day", str(ceiling))
    )
    assert raised.stdout.startswith(
        f"budgeted ({short}): at most {budgets.credits(ceiling)} credits a day; "
    )
    assert raised.stdout.endswith(" Now active.\n")
    listed = ok(kiroctl(daemon, "accounts", "list")).stdout
    row = row_of(listed, short)
    assert (
        row["TODAY (CREDITS)"]
        == f"{budgets.credits(spent)} used, 100 left of {budgets.credits(ceiling)}"
    )
    assert row["MONTH (CREDITS)"] == f"{budgets.credits(spent)} used"

    rested = ok(kiroctl(daemon, "accounts", "set-budget", short, "--credits-per-day", "1"))
    assert rested.stdout.endswith(" Now cooling down.\n"), rested.stdout
    shown = as_json(kiroctl(daemon, "accounts", "list", "--json"))["accounts"]
    [mine] = [a for a in shown if a["id"] == account["id"]]
    assert mine["status"] == "cooling_down"
    assert "budget" in mine["status_reason"]
    assert mine["budget"]["credits_per_day"] == 1
    assert mine["budget"]["left_today"] == 0
    assert "credit budget" in row_of(ok(kiroctl(daemon, "accounts", "list")).stdout, short)["WHY"]

    lifted = ok(kiroctl(daemon, "accounts", "set-budget", "budgeted", "--credits-per-day", "none"))
    assert lifted.stdout.startswith(f"budgeted ({short}): no budget; ")
    assert lifted.stdout.endswith(" Now active.\n"), lifted.stdout
    assert daemon.client.account(account["id"]).budget.credits_per_day is None


def test_accounts_list_says_which_accounts_would_bill_overage(
    daemon: DaemonProcess, fake: ThreadedFake, account: dict[str, Any]
) -> None:
    fake.fake.set_usage(account["fake_id"], overage_status="ENABLED")  # as Kiro IDE's settings do
    ok(kiroctl(daemon, "accounts", "probe", "budgeted"))
    assert daemon.client.account(account["id"]).allow_overage is False  # imported: not allowed
    assert overage_shown(daemon, "budgeted") == "on: guarded"

    allowed = ok(kiroctl(daemon, "accounts", "set-budget", "budgeted", "--allow-overage"))
    assert "past its plan's credits kirod goes on, and Kiro bills the overage." in allowed.stdout
    assert overage_shown(daemon, "budgeted") == "on: billed"
    document = as_json(kiroctl(daemon, "accounts", "list", "--json"))["accounts"]
    assert [a["allow_overage"] for a in document if a["id"] == account["id"]] == [True]

    # Kiro's switch turned off: nothing is billed, whatever kirod allows.
    fake.fake.set_usage(account["fake_id"], overage_status="DISABLED")
    ok(kiroctl(daemon, "accounts", "probe", "budgeted"))
    assert overage_shown(daemon, "budgeted") == "off"

    fake.fake.set_usage(account["fake_id"], overage_status="ENABLED")
    ok(kiroctl(daemon, "accounts", "probe", "budgeted"))
    guarded = ok(kiroctl(daemon, "accounts", "set-budget", "budgeted", "--no-allow-overage"))
    assert "overage is on in Kiro, but kirod stops at its plan's end" in guarded.stdout
    assert overage_shown(daemon, "budgeted") == "on: guarded"
    # A ceiling changed alone keeps the overage permission, and the reverse.
    ok(kiroctl(daemon, "accounts", "set-budget", "budgeted", "--allow-overage"))
    ok(kiroctl(daemon, "accounts", "set-budget", "budgeted", "--credits-per-month", "500"))
    after = daemon.client.account(account["id"])
    assert after.allow_overage is True
    assert after.budget.credits_per_month == 500
    ok(kiroctl(daemon, "accounts", "set-budget", "budgeted", "--no-allow-overage"))
    assert daemon.client.account(account["id"]).budget.credits_per_month == 500
    ok(kiroctl(daemon, "accounts", "set-budget", "budgeted", "--credits-per-month", "none"))
    fake.fake.set_usage(account["fake_id"], overage_status="DISABLED")
    ok(kiroctl(daemon, "accounts", "probe", "budgeted"))


def test_accounts_set_budget_needs_something_to_set(
    daemon: DaemonProcess, account: dict[str, Any]
) -> None:
    nothing = kiroctl(daemon, "accounts", "set-budget", "budgeted")
    assert nothing.exit_code == exits.USAGE
    assert "give at least one of --credits-per-day" in nothing.stderr
    wrong = kiroctl(daemon, "accounts", "set-budget", "budgeted", "--credits-per-day", "-3")
    assert wrong.exit_code == exits.USAGE
    assert "'-3' is not a number of credits above 0" in wrong.stderr
    missing = kiroctl(daemon, "accounts", "set-budget", "nobody", "--credits-per-day", "3")
    assert missing.exit_code == exits.NOT_FOUND
