"""Budget admission and settlement, the way a unified gateway admits spend: reserve, then settle.

    key admission (before routing)  →  account hold (the lease)  →  settlement (the request ends)

`admit` holds a request's estimate (`kirod.budgets.rates`) against its key: its credits against
the key's day and month, its tokens in the key's last minute. The check and the hold are one
synchronous step on the event loop, so requests in flight reserve together and no race lets two
of them both pass the last credit. An account's day and month ceilings hold the same estimate
when the account is leased (`hold_account`), as does what is left of its plan where the
overage guard watches it, and an account whose ceiling is spent rests until its period turns
(`rest`, which the pipeline writes as the account's state). When the
request ends, `settle` turns the hold into what Kiro metered (credits; input and output tokens)
for the key and the account, releases the rest, learns the model's rate, and tells `on_crossed`
of a budget passing 80 % or 100 % once per period.

Every request settles, with or without a budget, so a budget set in the middle of a day counts
what that day already spent. With no budget anywhere the only cost on the request path is that
settlement: a few dictionary updates.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from kirod import log
from kirod.budgets.ledger import Ledger, Tally
from kirod.budgets.limits import Limits
from kirod.budgets.minute import MinuteWindow, Use
from kirod.budgets.periods import day_of, month_of, next_day, next_month
from kirod.budgets.rates import CreditRates, Estimate, basis_tokens
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.token_count import estimate_request_tokens
from kirod.errors import ApiError, ErrorKind
from kirod.report_types import Budget
from kirod.storage.accounts import AccountRecord
from kirod.storage.spend import Scope, SpendDay

logger = logging.getLogger(__name__)

Period = Literal["day", "month"]
THRESHOLDS = (0.8, 1.0)  # the shares of a budget that alert, once each per period
BUDGET_CODE = "budget_exceeded"
TOKENS_CODE = "tokens_per_minute_exceeded"
HELD_RETRY_S = 2  # a refusal that only holds of requests in flight cause: they settle soon
# Credits are sums of floats (0.1 + 0.2 is not 0.3): a budget compares within this, else the
# request that fits it exactly would be refused, and one spent to the last credit not told.
EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Crossing:
    """A budget passed `threshold` of its limit in its period (for alerts)."""

    scope: Scope
    id: str
    period: Period
    threshold: float
    spent: float
    limit: float
    renews_at: float


@dataclass(frozen=True, slots=True)
class Rest:
    """An account whose ceiling for `period` is spent rests until it renews."""

    period: Period
    limit: float
    until: float


@dataclass(frozen=True, slots=True)
class Remaining:
    """What a key has left now (None: no limit on that), for extensions and reports."""

    credits_today: float | None
    credits_this_month: float | None
    tokens_this_minute: int | None


@dataclass(eq=False, slots=True)
class Hold:
    """One request's reservation: on its key (credits, tokens) and on the account leased."""

    key_id: str
    estimate: Estimate
    on_key: bool  # holds credits on the key's tally
    use: Use | None  # the key's minute window
    account_id: str | None = None
    done: bool = False


def account_limits(record: AccountRecord) -> Limits:
    return Limits(credits_per_day=record.budget_day, credits_per_month=record.budget_month)


class Budgets:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        on_crossed: Callable[[Crossing], None] | None = None,
    ) -> None:
        self._clock = clock
        self._monotonic = monotonic
        self.ledger = Ledger()
        self.rates = CreditRates()
        self._minutes: dict[str, MinuteWindow] = {}
        self._alerted: dict[tuple[Scope, str, Period, float], int] = {}
        self.on_crossed = on_crossed

    def load(
        self,
        days: Iterable[SpendDay],
        keys: dict[str, Limits],
        accounts: Iterable[AccountRecord],
        metered: Iterable[tuple[str, int, float]] = (),
    ) -> None:
        """The month's spend as stored, and the rates learned from the requests `metered`
        before (`CreditRates.seed`); budgets already past a threshold count as told, so a
        restart does not alert again within the period."""
        now = self._clock()
        self.ledger.load(days, now)
        self.rates.seed(metered)
        for key_id, limits in keys.items():
            self._crossings(
                "key", key_id, limits, self.ledger.tally("key", key_id, now), tell=False
            )
        for record in accounts:
            tally = self.ledger.tally("account", record.id, now)
            self._crossings("account", record.id, account_limits(record), tally, tell=False)

    # -- admission ---------------------------------------------------------------------------

    def estimate(self, request: CanonicalRequest, model: ModelInfo | None) -> Estimate:
        tokens = basis_tokens(estimate_request_tokens(request), request.max_output_tokens)
        if model is None:
            return self.rates.estimate(None, None, tokens)
        return self.rates.estimate(model.kiro_id, model.rate_multiplier, tokens)

    def admit(self, key_id: str, limits: Limits, estimate: Estimate) -> Hold:
        """Hold `estimate` against the key, or raise the 429 that names the budget."""
        now = self._clock()
        use: Use | None = None
        tally = self.ledger.tally("key", key_id, now)
        refusal = _over(tally, limits, estimate.credits, now, "this API key's")
        if refusal is not None:
            raise refusal
        if limits.tokens_per_minute is not None:
            window = self._minutes.setdefault(key_id, MinuteWindow())
            tick = self._monotonic()
            wait_s = window.wait_s(estimate.tokens, limits.tokens_per_minute, tick)
            if wait_s > 0 or estimate.tokens > limits.tokens_per_minute:
                raise _tokens_refusal(
                    limits.tokens_per_minute, window.used(tick), estimate.tokens, wait_s
                )
            use = window.add(estimate.tokens, tick)
        on_key = limits.credits
        if on_key:
            tally.reserved += estimate.credits
        return Hold(key_id, estimate, on_key, use)

    def fits(
        self, record: AccountRecord, estimate: Estimate, plan_left: float | None = None
    ) -> bool:
        """Whether the account's ceilings have room for `estimate` beside what is held, and,
        where the overage guard watches it, what is left of its plan (`plan_left`): requests in
        flight together must not spend into overage between two of its readings."""
        limits = account_limits(record)
        if not limits.credits and plan_left is None:
            return True
        tally = self.ledger.tally("account", record.id, self._clock())
        if plan_left is not None and tally.reserved + estimate.credits > plan_left:
            return False
        return _over(tally, limits, estimate.credits, self._clock(), "") is None

    def hold_account(
        self, hold: Hold, record: AccountRecord, plan_left: float | None = None
    ) -> bool:
        """Hold the estimate on the leased account too; False when it no longer fits (another
        request took the room while this one waited for the lease)."""
        if not account_limits(record).credits and plan_left is None:
            return True
        if not self.fits(record, hold.estimate, plan_left):
            return False
        self.ledger.tally("account", record.id, self._clock()).reserved += hold.estimate.credits
        hold.account_id = record.id
        return True

    def release_account(self, hold: Hold) -> None:
        """The leased account did not serve (the request moves on): give back its hold."""
        if hold.account_id is not None:
            tally = self.ledger.tally("account", hold.account_id, self._clock())
            tally.reserved = _less(tally.reserved, hold.estimate.credits)
            hold.account_id = None

    def rest(self, record: AccountRecord) -> Rest | None:
        """Why the account rests for its budget now, if it does."""
        limits = account_limits(record)
        if not limits.credits:
            return None
        now = self._clock()
        tally = self.ledger.tally("account", record.id, now)
        for period, limit, spent, until in _periods(tally, limits, now):
            if spent >= limit - EPSILON:
                return Rest(period, limit, until)
        return None

    def remaining(self, key_id: str, limits: Limits) -> Remaining:
        now = self._clock()
        tally = self.ledger.tally("key", key_id, now)
        used = tally.reserved

        def left(limit: float | None, spent: float) -> float | None:
            return None if limit is None else round(max(0.0, limit - spent - used), 6)

        tokens: int | None = None
        if limits.tokens_per_minute is not None:
            window = self._minutes.get(key_id)
            in_window = window.used(self._monotonic()) if window is not None else 0
            tokens = max(0, limits.tokens_per_minute - in_window)
        return Remaining(
            left(limits.credits_per_day, tally.day_credits),
            left(limits.credits_per_month, tally.month_credits),
            tokens,
        )

    def report(self, scope: Scope, id_: str, limits: Limits) -> Budget:
        """The key's or account's budgets and spend as the control API reports them."""
        now = self._clock()
        tally = self.ledger.tally(scope, id_, now)

        def left(limit: float | None, spent: float) -> float | None:
            return None if limit is None else round(max(0.0, limit - spent - tally.reserved), 6)

        return Budget(
            credits_per_day=limits.credits_per_day,
            credits_per_month=limits.credits_per_month,
            tokens_per_minute=limits.tokens_per_minute,
            spent_today=round(tally.day_credits, 6),
            spent_month=round(tally.month_credits, 6),
            held=round(tally.reserved, 6),
            left_today=left(limits.credits_per_day, tally.day_credits),
            left_month=left(limits.credits_per_month, tally.month_credits),
        )

    # -- settlement --------------------------------------------------------------------------

    def settle(
        self,
        hold: Hold | None,
        *,
        key_id: str,
        key_limits: Limits,
        account: AccountRecord | None,
        credits: float | None,
        tokens: int | None,
        model: ModelInfo | None = None,
        basis: int | None = None,
    ) -> Rest | None:
        """The request ended: what Kiro metered replaces what it held (nothing metered: the hold
        is released; `tokens` None: its input estimate stays in the minute when it was sent,
        else it is released). Returns the rest its account now takes, if its ceiling is spent."""
        now = self._clock()
        spent = credits if credits is not None and math.isfinite(credits) and credits > 0 else 0.0
        if hold is not None and not hold.done:
            hold.done = True
            if hold.on_key:
                tally = self.ledger.tally("key", hold.key_id, now)
                tally.reserved = _less(tally.reserved, hold.estimate.credits)
            self.release_account(hold)
            if hold.use is not None:
                window = self._minutes.get(hold.key_id)
                if window is not None:
                    window.settle(hold.use, tokens or 0, self._monotonic())
        key_tally = self.ledger.settle("key", key_id, spent, now)
        if key_limits.credits:
            self._crossings("key", key_id, key_limits, key_tally, tell=True)
        if model is not None and basis and credits is not None and math.isfinite(credits):
            self.rates.learn(model.kiro_id, model.rate_multiplier, basis, credits)
        if account is None:
            return None
        account_tally = self.ledger.settle("account", account.id, spent, now)
        limits = account_limits(account)
        if not limits.credits:
            return None
        self._crossings("account", account.id, limits, account_tally, tell=True)
        return self.rest(account)

    def forget(self, scope: Scope, id_: str) -> None:
        """A key revoked or an account removed: drop what is kept of it."""
        self.ledger.forget(scope, id_)
        if scope == "key":
            self._minutes.pop(id_, None)

    def _crossings(
        self, scope: Scope, id_: str, limits: Limits, tally: Tally, *, tell: bool
    ) -> None:
        now = self._clock()
        for period, limit, spent, until in _periods(tally, limits, now):
            index = day_of(now) if period == "day" else month_of(now)
            for threshold in THRESHOLDS:
                mark = (scope, id_, period, threshold)
                if spent < threshold * limit - EPSILON or self._alerted.get(mark) == index:
                    continue
                self._alerted[mark] = index
                if not tell:
                    continue
                crossing = Crossing(scope, id_, period, threshold, round(spent, 6), limit, until)
                log.event(
                    logger,
                    "budget_crossed",
                    level=logging.WARNING,
                    scope=scope,
                    id=id_,
                    period=period,
                    share=f"{threshold:.0%}",
                    spent=crossing.spent,
                    limit=limit,
                )
                if self.on_crossed is not None:
                    self.on_crossed(crossing)


def _periods(tally: Tally, limits: Limits, now: float) -> list[tuple[Period, float, float, float]]:
    """(period, limit, spent, renews at) of each credit limit set."""
    periods: list[tuple[Period, float, float, float]] = []
    if limits.credits_per_day is not None:
        periods.append(("day", limits.credits_per_day, tally.day_credits, next_day(now)))
    if limits.credits_per_month is not None:
        periods.append(("month", limits.credits_per_month, tally.month_credits, next_month(now)))
    return periods


def _less(held: float, credits: float) -> float:
    """What is held once `credits` are given back; what rounding leaves of nothing is nothing."""
    left = held - credits
    return left if left > EPSILON else 0.0


def _over(tally: Tally, limits: Limits, credits: float, now: float, whose: str) -> ApiError | None:
    """The refusal when `credits` more do not fit a credit limit beside what is held.

    Where only what requests in flight hold stands in the way, the room may come back as they
    settle (below their holds): a short wait, worth a retry. Else nothing helps before the
    period turns, hours away: the refusal says so and is final."""
    for period, limit, spent, until in _periods(tally, limits, now):
        if spent + tally.reserved + credits <= limit + EPSILON:
            continue
        renew = "00:00 UTC" if period == "day" else "the start of next month (UTC)"
        head = f"{whose} budget of {limit:g} credit{'' if limit == 1 else 's'} a {period}"
        if spent >= limit - EPSILON:
            message = f"{head} is spent ({spent:.4g} used); it renews at {renew}"
        else:
            held = (
                f", {tally.reserved:.4g} of it held by requests in flight" if tally.reserved else ""
            )
            message = (
                f"{head} has {limit - spent:.4g} left{held}, and this request may cost about "
                f"{credits:.4g}; it renews at {renew}"
            )
        if spent + credits <= limit + EPSILON:  # it fits once the requests in flight settle
            return ApiError(
                ErrorKind.RATE_LIMIT,
                message,
                code=BUDGET_CODE,
                headers={"Retry-After": str(HELD_RETRY_S)},
            )
        return ApiError(
            ErrorKind.RATE_LIMIT,
            message,
            code=BUDGET_CODE,
            headers={"Retry-After": str(max(1, math.ceil(until - now)))},
            final=True,
        )
    return None


def _tokens_refusal(limit: int, used: int, tokens: int, wait_s: float) -> ApiError:
    if tokens > limit:
        return ApiError(
            ErrorKind.RATE_LIMIT,
            f"this request may use about {tokens:,} tokens (input and its output cap), more "
            f"than this API key's {limit:,} tokens a minute: lower max_tokens or raise the limit "
            "with 'kiroctl keys set'",
            code=TOKENS_CODE,
            final=True,
        )
    return ApiError(
        ErrorKind.RATE_LIMIT,
        f"this API key is limited to {limit:,} tokens a minute; {used:,} are used or held and "
        f"this request may use about {tokens:,}",
        code=TOKENS_CODE,
        headers={"Retry-After": str(max(1, math.ceil(wait_s)))},
    )
