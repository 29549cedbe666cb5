"""Account health: the circuit breaker and every automatic state transition, as pure functions.

Each function maps the state as stored (and what just happened) to the next state, or None for
"leave it". They run inside the store's write transaction (`AccountStore.update_state`), on the row
as it is then, so a decision never overrides a newer one it did not see.

    active ──failure──▶ cooling_down (60 s * 2^(k-1), cap 24 h; a throttle honours Kiro's wait)
       ▲                    │ until passed: one half-open trial request
       └─────success────────┘ trial failure: k+1, longer cool-down
    429 USER_REQUEST_RATE_EXCEEDED ─▶ cooling_down for Kiro's wait, else 120 s (a penalty window:
                                    every request to the account waits it out)
    429 DAILY_REQUEST_COUNT ─▶ cooling_down until the next 00:00 UTC
    429 "suspicious activity" ─▶ cooling_down 6 h (Kiro limits the account while it investigates)
    402 / MONTHLY_REQUEST_COUNT / OVERAGE_REQUEST_LIMIT_EXCEEDED ─▶ exhausted, until a usage
                                    probe shows credits again
    403 suspended ─▶ suspended (by hand: enable)     refresh token dead ─▶ needs_login
    5 consecutive rejections of fresh credentials ─▶ disabled
    INSUFFICIENT_MODEL_CAPACITY, SERVICE_REQUEST_RATE_EXCEEDED ─▶ unchanged (Kiro's, not the
                                    account's: only the last error is noted)
    the credit budget set for it spent ─▶ cooling_down until its day or month turns (a success
                                    before then does not end it)
    plan credits used up with overage on in Kiro, kirod not allowed to spend it ─▶ exhausted
                                    until the plan resets (the overage guard)

Transient failures (a server error, a broken stream, the network) say little about the account:
like Envoy's outlier detection, the breaker opens only after `threshold` consecutive ones
(`breaker_consecutive_failures`), so one glitch never takes a user's only account out. Failures
that are the account's (throttled, a penalty window, the daily limit, flagged for suspicious
activity, quota, suspended, rejected credentials, forbidden) act at once. A model out of capacity
or a service-wide throttle is Kiro's trouble, not the account's: it rests no account, or one such
error would take a one-account user's only account out for Kiro's whole wait (the client is told
that wait instead). A cool-down opened by transient failures is marked `transient`, which lets
the pool's panic mode try it before it ends when nothing else is left. Kiro unreachable from the
machine (no route to its host connects: DNS, refused, TLS, the proxy down) is no account's fault
either: it rests none; a connection that fails while another route to the host connects (the
account's own proxy is down) is the account's, counted like any network failure.
Failures of the request itself (bad request, context too long, including Kiro's 402
CONVERSATION_LIMIT_EXCEEDED, unknown model) do not touch health.
"""

from __future__ import annotations

import dataclasses
import enum

from kirod.storage.accounts import AccountState, Status
from kirod.upstream.errors import Failure

BASE_COOLDOWN_S = 60.0
MAX_COOLDOWN_S = 24 * 3600.0
AUTH_FAILURE_LIMIT = 5
DEFAULT_THRESHOLD = 3  # consecutive transient failures that open the breaker
# Kiro's "temporary limits" on a flagged account last hours, and peers saw a day of waiting not
# lift them (kirodotdev/Kiro#8716): a try every few hours learns when they end without adding to
# the traffic that drew them.
SUSPICIOUS_REST_S = 6 * 3600.0
# USER_REQUEST_RATE_EXCEEDED without a wait: dwgx/KiroStudio's 5,339 requests saw a retry within
# 1 s fail again 47 % of the time, after 60-120 s 6 %, after 120 s 0.9 %
# (docs/KIRO-PROTOCOL.md §4.3): 120 s is where the window has nearly always ended.
PENALTY_REST_S = 120.0
PENALTY_REASON = "rate limited by Kiro: a penalty window, which every request waits out"
DAILY_REASON = "Kiro's daily request limit is reached; it resets at 00:00 UTC"
FLAGGED_REASON = (
    f"rested {SUSPICIOUS_REST_S / 3600:g} h: Kiro flagged suspicious activity and limits how often "
    "the account may send requests"
)

_BUDGET_PREFIX = "its credit budget of "
OVERAGE_GUARD_REASON = (
    "plan credits used up; overage is on in Kiro, and kirod does not spend into overage for "
    "this account unless allowed ('kiroctl accounts set-budget ACCOUNT --allow-overage')"
)

_TRANSIENT = frozenset({Failure.SERVER, Failure.PROTOCOL, Failure.NETWORK, Failure.TIMEOUT})
# Kiro's own trouble, whichever account asks (docs/KIRO-PROTOCOL.md §4.3), and the machine's:
# no route to Kiro's host connects (`kirod.upstream.outages`).
_NOT_THE_ACCOUNTS = frozenset({Failure.CAPACITY, Failure.SERVICE_THROTTLED, Failure.UNREACHABLE})

# Automatic transitions only move "up" this order (or within a level): a throttle seen by a
# request that started earlier never turns an exhausted, suspended or disabled account back.
_SEVERITY: dict[Status, int] = {
    "active": 0,
    "cooling_down": 1,
    "exhausted": 2,
    "needs_login": 3,
    "needs_profile": 3,
    "suspended": 4,
    "disabled": 5,
}

_COOLING_REASONS: dict[Failure, str] = {
    Failure.THROTTLED: "rate limited by Kiro",
    Failure.SERVER: "Kiro answered with a server error",
    Failure.PROTOCOL: "Kiro sent a malformed response",
    Failure.NETWORK: "Kiro could not be reached",
    Failure.TIMEOUT: "Kiro did not answer in time",
    Failure.FORBIDDEN: "Kiro refused the call (profile or region mismatch?)",
    Failure.BEARER: "Kiro rejected freshly refreshed credentials",
}


class Eligibility(enum.Enum):
    READY = "ready"
    TRIAL = "trial"  # half-open: one request may test the account
    NO = "no"


def cooldown_s(failures: int) -> float:
    """The breaker's open time after `failures` consecutive failures."""
    return min(MAX_COOLDOWN_S, BASE_COOLDOWN_S * 2.0 ** max(0, failures - 1))


def eligibility(state: AccountState, now: float) -> Eligibility:
    return status_eligibility(state.status, state.until, now)


def status_eligibility(status: str, until: float | None, now: float) -> Eligibility:
    """`eligibility` from the two fields it reads; the pool asks per account per request."""
    if status == "active":
        return Eligibility.READY
    if status == "cooling_down" and (until is None or until <= now):
        return Eligibility.TRIAL
    return Eligibility.NO


def is_transient(failure: Failure) -> bool:
    """Whether a failure counts towards the breaker's threshold instead of acting at once."""
    return failure in _TRANSIENT


def is_the_accounts(failure: Failure) -> bool:
    """Whether a retryable failure says something about the account (else it is Kiro's)."""
    return failure not in _NOT_THE_ACCOUNTS


def next_utc_midnight(now: float) -> float:
    """The next 00:00 UTC after `now` (epoch seconds), when Kiro resets its daily limit."""
    return (now // 86400.0 + 1) * 86400.0


def is_flagged(reason: str | None) -> bool:
    """Whether a cool-down's reason is a rest after Kiro flagged the account."""
    return reason == FLAGGED_REASON


def current_status(status: Status, until: float | None, now: float) -> Status:
    """The status as of `now`: a cool-down whose time is up is active again (its next request
    is the breaker's trial), without waiting for a request to write that down."""
    if status == "cooling_down" and until is not None and until <= now:
        return "active"
    return status


def after_failure(
    state: AccountState,
    failure: Failure,
    *,
    detail: str,
    retry_after_s: float | None,
    now: float,
    threshold: int = DEFAULT_THRESHOLD,
) -> AccountState | None:
    """The state after an attempt on the account failed with `failure`, before any output or
    as its answer broke off after it (a broken stream)."""
    if not failure.retryable:
        return None
    noted = dataclasses.replace(
        state,
        last_error=f"{failure.value}: {detail}" if detail else failure.value,
        last_error_at=now,
    )
    if failure is Failure.SUSPENDED:
        return _escalate(noted, "suspended", f"suspended by Kiro: {detail or 'no reason given'}")
    if failure is Failure.QUOTA:
        return _escalate(noted, "exhausted", f"usage limit reached ({detail or 'quota'})")
    if failure is Failure.PROFILE_REQUIRED:
        if state.status == "needs_profile":
            return noted  # discovery just named the profiles to choose from: keep its reason
        return _escalate(
            noted,
            "needs_profile",
            "Kiro wants a profile this account lacks; kirod looks for it at the next maintenance "
            "pass, or choose one with 'kiroctl accounts set-profile'",
        )
    if _SEVERITY[state.status] > _SEVERITY["cooling_down"] or not is_the_accounts(failure):
        return noted
    failures = state.failures + 1
    if failure in (Failure.PENALTY, Failure.DAILY_LIMIT):
        # A penalty window lasts Kiro's wait, else PENALTY_REST_S; the daily count resets at
        # 00:00 UTC, or later if Kiro's wait says so (docs/KIRO-PROTOCOL.md §4.3).
        hinted = None
        if retry_after_s is not None:
            hinted = now + min(MAX_COOLDOWN_S, max(0.0, retry_after_s))
        if failure is Failure.PENALTY:
            until = now + PENALTY_REST_S if hinted is None else hinted
        else:
            until = max(next_utc_midnight(now), hinted or 0.0)
        return dataclasses.replace(
            noted,
            status="cooling_down",
            reason=PENALTY_REASON if failure is Failure.PENALTY else DAILY_REASON,
            until=max(until, state.until or 0.0) if state.status == "cooling_down" else until,
            failures=failures,
            transient=False,
        )
    if failure is Failure.SUSPICIOUS:
        # Not Kiro's Retry-After (seconds, if any): the limits outlast it, and a try sooner
        # only adds to them.
        return dataclasses.replace(
            noted,
            status="cooling_down",
            reason=FLAGGED_REASON,
            until=now + SUSPICIOUS_REST_S,
            failures=failures,
            transient=False,
        )
    auth_failures = state.auth_failures + 1 if failure is Failure.BEARER else state.auth_failures
    if auth_failures >= AUTH_FAILURE_LIMIT:
        return dataclasses.replace(
            noted,
            status="disabled",
            reason=f"{auth_failures} consecutive authentication failures; log in again with "
            "'kiroctl accounts login', then enable the account",
            until=None,
            failures=failures,
            auth_failures=auth_failures,
        )
    transient = is_transient(failure)
    if transient and state.status == "active" and failures < threshold:
        return dataclasses.replace(noted, failures=failures, auth_failures=auth_failures)
    # k: how many times the breaker has opened in a row, counted from the threshold's failure.
    wait = cooldown_s(failures - threshold + 1 if transient else failures)
    if retry_after_s is not None and failure is Failure.THROTTLED:
        wait = min(MAX_COOLDOWN_S, max(0.0, retry_after_s))
    return dataclasses.replace(
        noted,
        status="cooling_down",
        reason=f"{_COOLING_REASONS.get(failure, 'upstream failure')} "
        f"({failures} consecutive failure{'s' if failures > 1 else ''})",
        until=now + wait,
        failures=failures,
        auth_failures=auth_failures,
        transient=transient,
    )


def is_budget_rest(reason: str | None) -> bool:
    """Whether a cool-down is the rest of an account whose credit budget is spent."""
    return reason is not None and reason.startswith(_BUDGET_PREFIX)


def budget_rested(state: AccountState, period: str, limit: float, until: float) -> AccountState:
    """The account's budget for `period` ("day" or "month") is spent: it rests until `until`,
    unless something graver already holds it."""
    if _SEVERITY[state.status] > _SEVERITY["cooling_down"]:
        return state
    renew = "00:00 UTC" if period == "day" else "the first of the month (UTC)"
    reason = (
        f"{_BUDGET_PREFIX}{limit:g} credits a {period} is spent; back at {renew} "
        "(kiroctl accounts set-budget)"
    )
    return dataclasses.replace(
        state, status="cooling_down", reason=reason, until=until, transient=False
    )


def overage_guarded(state: AccountState, resets_at: float | None) -> AccountState:
    """Its plan credits are used up and only overage is left, which kirod may not spend."""
    return _escalate(state, "exhausted", OVERAGE_GUARD_REASON, until=resets_at)


def budget_lifted(state: AccountState) -> AccountState | None:
    """A budget rest or the overage guard no longer applies (the limit was raised, overage
    allowed): back in service."""
    lifted = (state.status == "cooling_down" and is_budget_rest(state.reason)) or (
        state.status == "exhausted" and state.reason == OVERAGE_GUARD_REASON
    )
    return enabled(state) if lifted else None


def after_success(state: AccountState, now: float | None = None) -> AccountState | None:
    """A request was accepted: a half-open trial closes the breaker, counters reset. A budget
    rest lasts its period whatever succeeds before it ends (a request in flight as it began)."""
    if state.status not in ("active", "cooling_down"):
        return None
    if is_budget_rest(state.reason) and (now is None or (state.until or 0.0) > now):
        return None
    if state.status == "active" and not (state.failures or state.auth_failures):
        return None
    return dataclasses.replace(
        state,
        status="active",
        reason=None,
        until=None,
        failures=0,
        auth_failures=0,
        transient=False,
    )


def after_refresh_failure(
    state: AccountState, *, permanent: bool, detail: str, now: float
) -> AccountState:
    noted = dataclasses.replace(state, last_error=f"refresh: {detail}", last_error_at=now)
    if not permanent:
        return noted
    return _escalate(
        noted, "needs_login", f"the login expired ({detail}); run 'kiroctl accounts login'"
    )


def after_usage(
    state: AccountState,
    *,
    remaining: float,
    resets_at: float | None,
    overage: bool = False,
    guarded: bool = False,
) -> AccountState | None:
    """A usage probe's verdict: no credits left means exhausted until the window resets, unless
    kirod may spend `overage` (on in Kiro, and allowed for the account). Where overage is on but
    not allowed (`guarded`), the reason says so: the overage guard, not an empty plan, holds it."""
    if remaining <= 0 and not overage:
        if _SEVERITY[state.status] > _SEVERITY["exhausted"]:
            return None
        reason = OVERAGE_GUARD_REASON if guarded else "monthly credits used up"
        return dataclasses.replace(state, status="exhausted", reason=reason, until=resets_at)
    if state.status != "exhausted" or (remaining <= 0 and state.reason != OVERAGE_GUARD_REASON):
        return None
    return dataclasses.replace(state, status="active", reason=None, until=None, failures=0)


def enabled(state: AccountState) -> AccountState:
    """Back in service by hand, whatever the state: counters start over."""
    return dataclasses.replace(
        state,
        status="active",
        reason=None,
        until=None,
        failures=0,
        auth_failures=0,
        transient=False,
    )


def disabled(state: AccountState, reason: str | None) -> AccountState:
    return dataclasses.replace(
        state, status="disabled", reason=reason or "disabled by the user", until=None
    )


def _escalate(
    state: AccountState, status: Status, reason: str, *, until: float | None = None
) -> AccountState:
    if _SEVERITY[state.status] > _SEVERITY[status]:
        return state
    return dataclasses.replace(state, status=status, reason=reason, until=until, transient=False)
