"""`kiroctl spend KEY-or-ACCOUNT`: what one API key or account spent each UTC day (kept with the
operation log's rows), and its budget."""

from __future__ import annotations

from dataclasses import dataclass

import click

from kirod.cli import budgets, render
from kirod.cli.context import App, json_option, matching, pass_app
from kirod.report_types import Budget

MAX_DAYS = 400  # as far back as the control API answers (kirod.control.spending)


@dataclass(frozen=True)
class _Spender:
    scope: str  # "key" or "account"
    id: str
    name: str
    budget: Budget


def _spenders(app: App) -> list[_Spender]:
    keys = app.call(lambda kirod: kirod.keys())
    accounts = app.call(lambda kirod: kirod.accounts())
    return [_Spender("key", key.id, key.name, key.budget) for key in keys] + [
        _Spender("account", account.id, account.label, account.budget) for account in accounts
    ]


@click.command()
@click.argument("target", metavar="KEY-or-ACCOUNT")
@click.option(
    "--days",
    type=click.IntRange(1, MAX_DAYS),
    default=7,
    show_default=True,
    help="How many UTC days back, today included.",
)
@json_option
@pass_app
def spend(app: App, target: str, days: int, as_json: bool) -> None:
    """Show what a key or an account spent each UTC day, and its budget.

    KEY-or-ACCOUNT is a key's or an account's id, name or label, or at least 4 leading
    characters of just one of them. Credits are Kiro's metering, to the sixth decimal; a day
    without requests shows 0."""
    spender = matching(
        target,
        _spenders(app),
        names=lambda item: (item.id, item.name),
        what="key or account",
        plural="keys and accounts",
        show=lambda item: f"{item.scope} {render.short_id(item.id)} ({item.name})",
        listing="kiroctl keys list` or `kiroctl accounts list",
    )
    series = app.call(lambda kirod: kirod.spend(spender.scope, spender.id, days=days))
    if as_json:
        render.print_json(series.to_json())
        return
    out = app.out
    name = f"{render.shown(spender.name)} ({render.short_id(spender.id)})"
    out.print(f"{spender.scope.capitalize()} {name}, the last {days} UTC days:")
    grid = render.Grid("DAY (UTC)", "REQUESTS", "INPUT TOKENS", "OUTPUT TOKENS", "CREDITS")
    for day in series.days:
        grid.add_row(
            day.day,
            f"{day.requests:,}",
            f"{day.input_tokens:,}",
            f"{day.output_tokens:,}",
            budgets.credits(day.credits),
        )
    grid.add_row(
        "total",
        f"{sum(day.requests for day in series.days):,}",
        f"{sum(day.input_tokens for day in series.days):,}",
        f"{sum(day.output_tokens for day in series.days):,}",
        budgets.credits(round(sum(day.credits for day in series.days), 6)),
    )
    out.print(grid)
    budget = spender.budget
    out.print(f"Budget: {budgets.described(budget)}.")
    if budget.credits_per_day is not None or budget.credits_per_month is not None:
        out.print(f"Today {budgets.today(budget)}; this month {budgets.month(budget)}.")
