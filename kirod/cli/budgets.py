"""What `kiroctl keys` and `kiroctl accounts` share about budgets: the `N|none` values of their
options, and the cells and sentences that say what a budget allows, what is used and what is
left."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from kirod.report_types import Account, Budget

MAX_CREDITS = 1e9  # as the control API takes them (kirod.localapi.keys)
MAX_TOKENS_PER_MINUTE = 1_000_000_000


@dataclass(frozen=True)
class Limit:
    """An option's value: a limit, or `None` to lift the limit (`none` on the command line).
    An option not given is no `Limit` at all: that limit stays as it is."""

    value: float | None


class LimitType(click.ParamType[Limit, Any]):
    """A positive number (whole for tokens), or `none`."""

    def __init__(self, *, whole: bool) -> None:
        self.whole = whole
        self.name = "tokens" if whole else "credits"

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "N|none"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Limit:
        if isinstance(value, Limit):
            return value
        text = str(value).strip()
        if text.lower() == "none":
            return Limit(None)
        top = MAX_TOKENS_PER_MINUTE if self.whole else MAX_CREDITS
        try:
            number = int(text) if self.whole else float(text)
        except ValueError:
            number = None
        if number is None or not 0 < number <= top:
            kind = "a whole number of tokens" if self.whole else "a number of credits"
            self.fail(f"{text!r} is not {kind} above 0 (at most {top:,.0f}), nor 'none'")
        return Limit(float(number))


CREDITS = LimitType(whole=False)
TOKENS = LimitType(whole=True)


def chosen(given: Limit | None, current: float | None) -> float | None:
    """The limit to send: the option's, else the one in force."""
    return current if given is None else given.value


def whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def credits(value: float) -> str:
    """Credits to the last of the six decimals kirod keeps, without trailing zeros."""
    text = f"{value:,.6f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def today(budget: Budget) -> str:
    """The TODAY cell: `2.5 used, 7.5 left of 10`, or `2.5 used` without a limit."""
    return _period(budget.credits_per_day, budget.spent_today, budget.left_today, budget.held)


def month(budget: Budget) -> str:
    """The MONTH cell, as `today`'s."""
    return _period(budget.credits_per_month, budget.spent_month, budget.left_month, budget.held)


def _period(limit: float | None, spent: float, left: float | None, held: float) -> str:
    """What is left is what requests in flight do not hold: they are named, so that used and
    left add up to the limit."""
    text = f"{credits(spent)} used"
    if held:
        text += f", {credits(held)} held"
    if limit is not None:
        text += f", {credits(left or 0.0)} left of {credits(limit)}"
    return text


def described(budget: Budget) -> str:
    """What the budget allows, as a sentence's end: `at most 10 credits a day and 20,000 tokens a
    minute`, or `no budget`."""
    parts = []
    if budget.credits_per_day is not None:
        parts.append(f"{credits(budget.credits_per_day)} credits a day")
    if budget.credits_per_month is not None:
        parts.append(f"{credits(budget.credits_per_month)} credits a month")
    if budget.tokens_per_minute is not None:
        parts.append(f"{budget.tokens_per_minute:,} tokens a minute")
    if not parts:
        return "no budget"
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return "at most " + listed


def overage_sentence(account: Account) -> str:
    """What kirod does once the account's plan credits are used up."""
    if account.bills_overage:
        return "past its plan's credits kirod goes on, and Kiro bills the overage."
    if account.allow_overage:
        return "overage is allowed, but off in Kiro: it stops at its plan's end."
    if account.usage is not None and account.usage.overage == "enabled":
        return "overage is on in Kiro, but kirod stops at its plan's end (not allowed)."
    return "kirod stops at its plan's end (overage not allowed)."
