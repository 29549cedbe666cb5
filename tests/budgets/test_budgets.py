"""Budget admission and settlement as pure code: holds reserve together, settle to what was
metered, roll over at the UTC day and month, and tell each threshold once per period."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from kirod.budgets.budgets import BUDGET_CODE, TOKENS_CODE, Budgets, Crossing
from kirod.budgets.limits import NONE, Limits
from kirod.budgets.minute import MinuteWindow
from kirod.budgets.periods import first_day_of_month, next_day, next_month
from kirod.budgets.rates import DEFAULT_OUTPUT_TOKENS, CreditRates, Estimate, basis_tokens
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.request import (
    CanonicalRequest,
    ClientProtocol,
    Message,
    Role,
    TextBlock,
)
from kirod.errors import ApiError
from kirod.storage.accounts import AccountRecord
from kirod.storage.spend import SpendDay

NOON = datetime(2026, 12, 7, 12, 0, tzinfo=UTC).timestamp()
MODEL = ModelInfo("claude-sonnet-4-6", "claude-sonnet-4.6", "Sonnet", rate_multiplier=1.3)


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at
        self.tick = 1000.0

    def __call__(self) -> float:
        return self.at

    def monotonic(self) -> float:
        return self.tick


def budgets_at(clock: Clock, crossings: list[Crossing] | None = None) -> Budgets:
    return Budgets(
        clock=clock,
        monotonic=clock.monotonic,
        on_crossed=None if crossings is None else crossings.append,
    )


def account(
    account_id: str = "acct", *, day: float | None = None, month: float | None = None
) -> AccountRecord:
    return dataclasses.replace(
        AccountRecord(
            account_id, "", "social", "us-east-1", "us-east-1", None, {}, "active", None, None,
            None, None, None, 1, 0.0, 0.0,
        ),
        budget_day=day,
        budget_month=month,
    )  # fmt: skip


def request(text: str = "hello", max_tokens: int | None = 1000) -> CanonicalRequest:
    return CanonicalRequest(
        request_id="req_1",
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model="claude-sonnet-4-6",
        messages=(Message(Role.USER, (TextBlock(text),)),),
        max_output_tokens=max_tokens,
    )


def test_holds_in_flight_count_together_and_the_last_credit_goes_to_one() -> None:
    clock = Clock(NOON)
    budgets = budgets_at(clock)
    limits = Limits(credits_per_day=1.0)
    estimate = Estimate(tokens=100, credits=0.25)
    holds = [budgets.admit("k", limits, estimate) for _ in range(4)]
    with pytest.raises(ApiError) as refused:
        budgets.admit("k", limits, estimate)
    # Only what the requests in flight hold stands in the way: worth a retry in a moment.
    assert refused.value.status == 429
    assert refused.value.code == BUDGET_CODE
    assert not refused.value.final
    assert refused.value.headers["Retry-After"] == "2"
    assert "1 credit a day has 1 left, 1 of it held by requests in flight" in refused.value.message
    # One settles below its hold: its room comes back, and only its share of it.
    budgets.settle(holds[0], key_id="k", key_limits=limits, account=None, credits=0.1, tokens=50)
    budgets.admit("k", limits, Estimate(100, 0.15))
    with pytest.raises(ApiError):
        budgets.admit("k", limits, Estimate(100, 0.01))
    # Spent to the last credit: nothing helps before the day turns.
    for hold in holds[1:]:
        budgets.settle(hold, key_id="k", key_limits=limits, account=None, credits=0.3, tokens=9)
    with pytest.raises(ApiError) as spent:
        budgets.admit("k", limits, Estimate(100, 0.01))
    assert spent.value.final
    assert spent.value.headers["Retry-After"] == str(12 * 3600)
    assert "1 credit a day is spent (1 used)" in spent.value.message


def test_settling_twice_or_releasing_counts_once() -> None:
    budgets = budgets_at(Clock(NOON))
    limits = Limits(credits_per_day=1.0)
    hold = budgets.admit("k", limits, Estimate(10, 0.5))
    for _ in range(2):
        budgets.settle(hold, key_id="k", key_limits=limits, account=None, credits=0.4, tokens=9)
    report = budgets.report("key", "k", limits)
    assert (report.spent_today, report.held, report.left_today) == (0.8, 0.0, 0.2)


def test_days_and_months_turn_at_utc_midnight() -> None:
    clock = Clock(datetime(2026, 12, 31, 23, 59, tzinfo=UTC).timestamp())
    budgets = budgets_at(clock)
    limits = Limits(credits_per_day=1.0, credits_per_month=5.0)
    budgets.settle(None, key_id="k", key_limits=limits, account=None, credits=1.0, tokens=1)
    with pytest.raises(ApiError) as refused:
        budgets.admit("k", limits, Estimate(1, 0.1))
    assert refused.value.headers["Retry-After"] == "60"
    clock.at += 120  # 2027-01-01: a new day and a new month
    budgets.admit("k", limits, Estimate(1, 0.1))
    report = budgets.report("key", "k", limits)
    assert (report.spent_today, report.spent_month) == (0.0, 0.0)


def test_a_month_budget_counts_the_days_before_today() -> None:
    clock = Clock(NOON)
    budgets = budgets_at(clock)
    today = int(NOON) // 86400
    first = first_day_of_month(NOON)
    days = [
        SpendDay("key", "k", first - 1, 1, 0, 0, 100.0),  # last month: not counted
        SpendDay("key", "k", first, 3, 10, 10, 2.5),
        SpendDay("key", "k", today, 2, 10, 10, 1.5),
    ]
    limits = Limits(credits_per_day=2.0, credits_per_month=4.5)
    budgets.load(days, {"k": limits}, [])
    report = budgets.report("key", "k", limits)
    assert (report.spent_today, report.spent_month) == (1.5, 4.0)
    with pytest.raises(ApiError) as refused:
        budgets.admit("k", limits, Estimate(1, 0.6))
    assert "a month" in refused.value.message or "a day" in refused.value.message


def test_tokens_a_minute_are_held_and_settled_to_the_count() -> None:
    clock = Clock(NOON)
    budgets = budgets_at(clock)
    limits = Limits(tokens_per_minute=1000)
    first = budgets.admit("k", limits, Estimate(600, 0.0))
    with pytest.raises(ApiError) as refused:
        budgets.admit("k", limits, Estimate(600, 0.0))
    assert refused.value.code == TOKENS_CODE
    assert not refused.value.final
    assert refused.value.headers["Retry-After"] == "60"
    budgets.settle(first, key_id="k", key_limits=limits, account=None, credits=0.0, tokens=200)
    budgets.admit("k", limits, Estimate(600, 0.0))
    clock.tick += 61
    assert budgets.remaining("k", limits).tokens_this_minute == 1000


def test_a_request_larger_than_the_minute_is_told_so_and_not_to_retry() -> None:
    budgets = budgets_at(Clock(NOON))
    with pytest.raises(ApiError) as refused:
        budgets.admit("k", Limits(tokens_per_minute=100), Estimate(101, 0.0))
    assert refused.value.final
    assert "max_tokens" in refused.value.message


def test_minute_window_waits_until_enough_leaves() -> None:
    window = MinuteWindow()
    window.add(300, 0.0)
    window.add(300, 10.0)
    assert window.wait_s(500, 1000, 20.0) == 40.0  # the first use leaves at 60
    assert window.wait_s(400, 1000, 20.0) == 0.0
    assert window.used(70.0) == 0


def test_account_ceilings_hold_the_estimate_and_rest_when_spent() -> None:
    clock = Clock(NOON)
    budgets = budgets_at(clock)
    record = account(day=1.0)
    estimate = Estimate(10, 0.4)
    hold = budgets.admit("k", NONE, estimate)
    assert budgets.hold_account(hold, record)
    other = budgets.admit("k", NONE, estimate)
    assert budgets.hold_account(other, record)
    third = budgets.admit("k", NONE, estimate)
    assert not budgets.fits(record, estimate)
    assert not budgets.hold_account(third, record)
    budgets.release_account(other)
    assert budgets.fits(record, estimate)
    rest = budgets.settle(hold, key_id="k", key_limits=NONE, account=record, credits=1.0, tokens=10)
    assert rest is not None
    assert (rest.period, rest.limit, rest.until) == (
        "day",
        1.0,
        next_day(NOON),
    )
    assert budgets.rest(account(month=5.0)) is None


def test_thresholds_are_told_once_per_period_and_not_again_after_a_restart() -> None:
    clock = Clock(NOON)
    told: list[Crossing] = []
    budgets = budgets_at(clock, told)
    limits = Limits(credits_per_month=10.0)
    for credits in (5.0, 3.5, 0.5, 1.5, 1.0):
        budgets.settle(None, key_id="k", key_limits=limits, account=None, credits=credits, tokens=1)
    assert [(c.period, c.threshold, c.spent) for c in told] == [
        ("month", 0.8, 8.5),
        ("month", 1.0, 10.5),
    ]
    assert told[0].renews_at == next_month(NOON)
    again: list[Crossing] = []
    restarted = budgets_at(clock, again)
    today = int(NOON) // 86400
    restarted.load([SpendDay("key", "k", today, 5, 0, 0, 11.5)], {"k": limits}, [])
    restarted.settle(None, key_id="k", key_limits=limits, account=None, credits=1.0, tokens=1)
    assert again == []


def test_the_rate_is_learned_per_model_and_exact_for_a_request_like_the_last() -> None:
    rates = CreditRates()
    prior = rates.estimate("claude-sonnet-4.6", 1.3, 10_000)
    assert prior.credits == pytest.approx(10_000 * 2e-5 * 1.3)
    rates.learn("claude-sonnet-4.6", 1.3, 5000, 0.05)
    assert rates.estimate("claude-sonnet-4.6", 1.3, 5000).credits == pytest.approx(0.05)
    # An unseen model: the others' rate per unit of multiplier, times its own.
    assert rates.estimate("claude-opus-4.6", 2.6, 5000).credits == pytest.approx(0.1)
    assert basis_tokens(100, None) == 100 + DEFAULT_OUTPUT_TOKENS


def test_the_estimate_is_the_request_s_tokens_and_its_output_cap() -> None:
    budgets = budgets_at(Clock(NOON))
    small = budgets.estimate(request("hi", 1000), MODEL)
    large = budgets.estimate(request("hi " * 3000, 1000), MODEL)
    assert 1000 < small.tokens < large.tokens
    uncapped = budgets.estimate(request("hi", None), MODEL)
    assert uncapped.tokens - small.tokens == DEFAULT_OUTPUT_TOKENS - 1000
