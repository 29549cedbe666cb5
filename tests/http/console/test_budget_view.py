"""How the console words budgets and picks the spend charts a page draws: pure functions from the
control API's reports to text and SVG."""

from __future__ import annotations

from kirod.http.console.budgets import (
    MAX_SPEND_CHARTS,
    left_text,
    limits_text,
    overage_text,
    spend_charts,
    spent_text,
)
from kirod.report_types import Account, Budget, Spend, SpendDay


def spend(id_: str, credits: list[float]) -> Spend:
    days = tuple(
        SpendDay(f"2026-12-{n + 1:02d}", 1 if value else 0, 0, 0, value)
        for n, value in enumerate(credits)
    )
    return Spend("key", id_, days)


def account(overage: str | None, *, allowed: bool, capable: bool | None = True) -> Account:
    usage = None if overage is None else {"overage": overage, "overage_capable": capable}
    return Account.from_json(
        {
            "id": "acc-1",
            "label": "work",
            "auth_kind": "social",
            "status": "active",
            "usage": usage,
            "allow_overage": allowed,
        }
    )


def test_limits_spent_and_left_read_as_sentences() -> None:
    budget = Budget(
        credits_per_day=10,
        credits_per_month=200.5,
        tokens_per_minute=20_000,
        spent_today=2.5,
        spent_month=40,
        held=0.25,
        left_today=7.25,
        left_month=160.25,
    )
    assert limits_text(budget) == "10 credits a day · 200.5 a month · 20,000 tokens a minute"
    assert spent_text(budget.spent_today, budget.held) == "2.5 (+0.25 held)"
    assert left_text(budget) == "7.25 today · 160.25 this month"
    assert (limits_text(Budget()), spent_text(0.0, 0.0), left_text(Budget())) == (
        "none",
        "0",
        "no limit",
    )


def test_overage_says_whether_kirod_would_bill_it() -> None:
    assert overage_text(account("enabled", allowed=True)) == (
        "on, allowed: kirod bills overage past the plan"
    )
    assert overage_text(account("enabled", allowed=False)) == (
        "on, guarded: kirod spends no overage"
    )
    assert overage_text(account("disabled", allowed=True)) == "off"
    assert overage_text(account(None, allowed=True)) == "not probed yet"
    assert overage_text(account("disabled", allowed=False, capable=False)) == (
        "not available on this plan"
    )


def test_the_largest_spenders_are_charted_first_and_the_rest_counted() -> None:
    count = MAX_SPEND_CHARTS + 3
    series = {f"k{n}": spend(f"k{n}", [0.0, float(n + 1)]) for n in range(count)}
    series["idle"] = spend("idle", [0.0, 0.0])  # spent nothing: no chart
    series["revoked"] = spend("revoked", [0.0, 99.0])  # no longer listed: no chart
    names = {id_: f"key {id_}" for id_ in series if id_ != "revoked"}
    budgets = {"k10": Budget(credits_per_day=20.0)}
    drawn, more = spend_charts(series, names, budgets)
    assert len(drawn) == MAX_SPEND_CHARTS
    assert more == count - MAX_SPEND_CHARTS
    assert drawn[0].count('aria-label="key k10: credits per day: ') == 1
    assert "day budget 20 credits" in drawn[0]
    assert "day budget" not in drawn[1]
    assert drawn[1].count('aria-label="key k9: credits per day: ') == 1
    assert not any("key idle" in svg or "revoked" in svg for svg in drawn)
