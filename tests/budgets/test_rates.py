"""The credit estimate and the budget's edge, as pure code (kirod.budgets): a request like the
ones before it reserves what the dearest of them cost, the rate forgets what is no longer
recent, and a budget counts its edge within a rounding error of float sums."""

from __future__ import annotations

import pytest

from kirod.budgets.budgets import BUDGET_CODE, Budgets
from kirod.budgets.limits import Limits
from kirod.budgets.rates import PRIOR_CREDITS_PER_TOKEN, RECENT, CreditRates, Estimate
from kirod.errors import ApiError

MODEL = "claude-sonnet-4.6"


def test_a_model_never_metered_is_estimated_at_the_cautious_prior() -> None:
    assert CreditRates().estimate(MODEL, 2.0, 1000).credits == 1000 * 2 * PRIOR_CREDITS_PER_TOKEN


def test_the_estimate_is_the_dearest_recent_rate_and_forgets_older_ones() -> None:
    rates = CreditRates()
    rates.learn(MODEL, 1.0, 1000, 0.2)
    assert rates.estimate(MODEL, 1.0, 1000).credits == 0.2  # one answer: exact after it
    rates.learn(MODEL, 1.0, 1000, 0.45)
    rates.learn(MODEL, 1.0, 1000, 0.3)
    assert rates.estimate(MODEL, 1.0, 2000).credits == pytest.approx(0.9)
    for _ in range(RECENT - 1):
        rates.learn(MODEL, 1.0, 1000, 0.3)
    assert rates.estimate(MODEL, 1.0, 1000).credits == pytest.approx(0.3)  # 0.45 is gone
    # Another model with twice the multiplier, not seen yet: the per-unit rate, doubled.
    assert rates.estimate("claude-opus-4.6", 2.0, 1000).credits == pytest.approx(0.6)


def test_a_budget_serves_the_request_that_fits_it_exactly_in_float_sums() -> None:
    budgets = Budgets(clock=lambda: 1_800_000_000.0)
    limits = Limits(credits_per_day=0.7)
    each = Estimate(100, 0.07)
    held = [budgets.admit("key", limits, each) for _ in range(10)]  # 0.07 ten times: 0.7000…01
    with pytest.raises(ApiError) as refused:
        budgets.admit("key", limits, each)
    assert refused.value.code == BUDGET_CODE
    for hold in held:
        budgets.settle(
            hold, key_id="key", key_limits=limits, account=None, credits=None, tokens=None
        )
    # Nothing is left held by rounding (a revoked key's tally is dropped only when it holds 0).
    assert budgets.ledger.tally("key", "key", 1_800_000_000.0).reserved == 0.0


def test_the_rates_are_learned_again_from_the_newest_rows_at_start() -> None:
    rates = CreditRates()
    newest_first = [(MODEL, 1000, 0.3)] * RECENT + [(MODEL, 1000, 0.9)]  # the 0.9 is too old
    rates.seed([*newest_first, ("claude-haiku-4.5", 0, 1.0)])  # no basis: nothing to learn
    assert rates.estimate(MODEL, 1.0, 1000).credits == pytest.approx(0.3)
    assert rates.estimate("claude-haiku-4.5", 1.0, 1000).credits == 1000 * PRIOR_CREDITS_PER_TOKEN
