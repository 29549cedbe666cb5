"""Budgets as the console shows them: a key's or an account's limits, what it spent today and
this month, what is left, whether an account would bill overage, and its spend per day as a chart
(the last `SPEND_DAYS` days of `GET /spend`, with the day's budget drawn across the bars)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kirod.http.console import charts
from kirod.http.console.overview import credits_text
from kirod.report_types import Account, Budget, Spend, SpendDay

SPEND_DAYS = 30
# Charts on one page at most (the largest spenders first): a page stays light however many keys
# there are; `kiroctl spend` shows any other.
MAX_SPEND_CHARTS = 8


def limits_text(budget: Budget) -> str:
    parts = []
    if budget.credits_per_day is not None:
        parts.append(f"{credits_text(budget.credits_per_day)} credits a day")
    if budget.credits_per_month is not None:
        parts.append(f"{credits_text(budget.credits_per_month)} a month")
    if budget.tokens_per_minute is not None:
        parts.append(f"{budget.tokens_per_minute:,} tokens a minute")
    return " · ".join(parts) or "none"


def spent_text(value: float, held: float) -> str:
    """Credits settled, and those requests in flight hold (counted against the budget too)."""
    text = credits_text(value)
    return f"{text} (+{credits_text(held)} held)" if held > 0 else text


def left_text(budget: Budget) -> str:
    parts = []
    if budget.left_today is not None:
        parts.append(f"{credits_text(budget.left_today)} today")
    if budget.left_month is not None:
        parts.append(f"{credits_text(budget.left_month)} this month")
    return " · ".join(parts) or "no limit"


def overage_text(account: Account) -> str:
    """Whether kirod's requests would bill overage once the plan is used up: Kiro's switch as
    the last usage probe found it (Kiro IDE may change it), and the account's `allow_overage`."""
    usage = account.usage
    if usage is not None and usage.overage_capable is False:
        return "not available on this plan"
    if usage is None or usage.overage not in ("enabled", "disabled"):
        return "not probed yet"
    if usage.overage == "disabled":
        return "off"
    if account.bills_overage:
        return "on, allowed: kirod bills overage past the plan"
    return "on, guarded: kirod spends no overage"


def spend_charts(
    series: Mapping[str, Spend], names: Mapping[str, str], budgets: Mapping[str, Budget]
) -> tuple[list[str], int]:
    """A chart of credits per day for each id in `series` that spent, the largest first, at most
    `MAX_SPEND_CHARTS`; and how many more spent but are not drawn. `names`: id → name shown."""
    totals = {
        id_: sum(day.credits for day in spend.days)
        for id_, spend in series.items()
        if id_ in names and any(day.credits for day in spend.days)
    }
    ranked = sorted(totals, key=lambda id_: (-totals[id_], names[id_]))
    drawn = []
    for id_ in ranked[:MAX_SPEND_CHARTS]:
        day_budget = budgets[id_].credits_per_day if id_ in budgets else None
        drawn.append(
            charts.bar_chart(
                f"{names[id_]}: credits per day",
                _bars(series[id_].days),
                unit="credits",
                empty=f"no spend in the last {SPEND_DAYS} days",
                mark=("day budget", day_budget) if day_budget is not None else None,
            )
        )
    return drawn, max(0, len(ranked) - MAX_SPEND_CHARTS)


def _bars(days: Sequence[SpendDay]) -> list[tuple[str, float]]:
    """A bar per UTC day, labelled MM-DD."""
    return [(day.day[5:], day.credits) for day in days]
