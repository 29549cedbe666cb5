"""The circuit breaker and the automatic state transitions, as pure functions."""

from __future__ import annotations

import pytest

from kirod.accounts import health
from kirod.accounts.health import Eligibility, cooldown_s, eligibility
from kirod.storage.accounts import AccountState
from kirod.upstream.errors import Failure

NOW = 1_000_000.0
ACTIVE = AccountState()


def fail(
    state: AccountState, failure: Failure, retry_after_s: float | None = None
) -> AccountState | None:
    return health.after_failure(
        state, failure, detail="HTTP 500", retry_after_s=retry_after_s, now=NOW
    )


def test_cooldown_doubles_from_a_minute_and_caps_at_a_day() -> None:
    assert [cooldown_s(n) for n in (1, 2, 3, 4)] == [60, 120, 240, 480]
    assert cooldown_s(11) == 60 * 1024
    assert cooldown_s(12) == 24 * 3600
    assert cooldown_s(40) == 24 * 3600


def test_transient_failures_open_the_breaker_at_the_threshold_then_longer_each_time() -> None:
    state = ACTIVE
    for n in (1, 2):  # one glitch is not an outage: below the threshold the account serves on
        after = fail(state, Failure.SERVER)
        assert after is not None
        assert (after.status, after.failures, after.until) == ("active", n, None)
        assert after.last_error == "server: HTTP 500"
        state = after
    for n, wait in ((3, 60), (4, 120), (5, 240)):
        after = fail(state, Failure.SERVER)
        assert after is not None
        assert (after.status, after.failures, after.until) == ("cooling_down", n, NOW + wait)
        assert after.reason == f"Kiro answered with a server error ({n} consecutive failures)"
        assert after.transient
        assert after.last_error_at == NOW
        state = after


@pytest.mark.parametrize(
    ("failure", "retry_after"),
    [
        (Failure.SERVER, None),
        (Failure.PROTOCOL, None),
        (Failure.NETWORK, None),
        (Failure.TIMEOUT, None),
    ],
)
def test_transient_classes_count_towards_the_threshold(
    failure: Failure, retry_after: float | None
) -> None:
    once = fail(ACTIVE, failure, retry_after)
    assert once is not None
    assert (once.status, once.failures) == ("active", 1)
    thrice = health.after_failure(
        AccountState(failures=2), failure, detail="", retry_after_s=retry_after, now=NOW
    )
    assert thrice is not None
    assert (thrice.status, thrice.transient, thrice.until) == ("cooling_down", True, NOW + 60)


@pytest.mark.parametrize(
    ("failure", "retry_after"),
    [
        (Failure.THROTTLED, None),
        (Failure.THROTTLED, 5.0),
        (Failure.PENALTY, None),
        (Failure.DAILY_LIMIT, None),
    ],
)
def test_account_specific_failures_act_at_once(failure: Failure, retry_after: float | None) -> None:
    after = fail(ACTIVE, failure, retry_after)
    assert after is not None
    assert (after.status, after.transient) == ("cooling_down", False)


def test_the_threshold_is_configurable_and_one_means_at_once() -> None:
    after = health.after_failure(
        ACTIVE, Failure.SERVER, detail="", retry_after_s=None, now=NOW, threshold=1
    )
    assert after is not None
    assert (after.status, after.until) == ("cooling_down", NOW + 60)


def test_half_open_after_the_cool_down_and_success_closes() -> None:
    cooling = fail(AccountState(failures=2), Failure.SERVER)
    assert cooling is not None
    assert eligibility(cooling, NOW + 59) is Eligibility.NO
    assert eligibility(cooling, NOW + 60) is Eligibility.TRIAL
    closed = health.after_success(cooling)
    assert closed is not None
    assert (closed.status, closed.failures, closed.until, closed.reason, closed.transient) == (
        "active",
        0,
        None,
        None,
        False,
    )
    assert closed.last_error == "server: HTTP 500"  # still shown
    assert health.after_success(closed) is None  # nothing to write


def test_throttling_honours_retry_after() -> None:
    for failure in (Failure.THROTTLED, Failure.PENALTY):
        after = fail(ACTIVE, failure, retry_after_s=7)
        assert after is not None
        assert (after.status, after.until) == ("cooling_down", NOW + 7)
    without = fail(ACTIVE, Failure.THROTTLED)
    assert without is not None
    assert without.until == NOW + 60


def test_a_flagged_account_rests_for_hours_whatever_kiro_s_retry_after() -> None:
    for state in (ACTIVE, AccountState(failures=2), AccountState("cooling_down", "x", NOW - 1)):
        rested = fail(state, Failure.SUSPICIOUS, retry_after_s=2)
        assert rested is not None
        assert (rested.status, rested.until, rested.transient) == (
            "cooling_down",
            NOW + 6 * 3600,
            False,  # the account's own: panic mode does not try it early
        )
        assert rested.reason == (
            "rested 6 h: Kiro flagged suspicious activity and limits how often the account may "
            "send requests"
        )
        assert health.is_flagged(rested.reason)
        assert rested.failures == state.failures + 1
        assert eligibility(rested, NOW + 6 * 3600 - 1) is Eligibility.NO
        assert eligibility(rested, NOW + 6 * 3600) is Eligibility.TRIAL
    assert not health.is_flagged("rate limited by Kiro (1 consecutive failure)")
    assert not health.is_flagged(None)
    for status in ("exhausted", "suspended", "disabled"):
        state = AccountState(status, "why")  # type: ignore[arg-type]
        after = fail(state, Failure.SUSPICIOUS)
        assert after is not None
        assert (after.status, after.reason) == (status, "why")


def test_a_success_below_the_threshold_resets_the_count() -> None:
    noted = fail(ACTIVE, Failure.NETWORK)
    assert noted is not None
    reset = health.after_success(noted)
    assert reset is not None
    assert reset.failures == 0
    assert fail(reset, Failure.NETWORK) == noted


def test_current_status_ends_a_cool_down_whose_time_is_up() -> None:
    assert health.current_status("cooling_down", NOW, NOW) == "active"
    assert health.current_status("cooling_down", NOW + 1, NOW) == "cooling_down"
    assert health.current_status("exhausted", NOW - 5, NOW) == "exhausted"


@pytest.mark.parametrize(
    "failure", [Failure.BAD_REQUEST, Failure.CONTEXT_TOO_LONG, Failure.INVALID_MODEL]
)
def test_failures_of_the_request_leave_the_account_alone(failure: Failure) -> None:
    assert fail(ACTIVE, failure) is None


def test_quota_exhausts_and_suspension_suspends_with_the_message() -> None:
    exhausted = fail(ACTIVE, Failure.QUOTA)
    assert exhausted is not None
    assert (exhausted.status, exhausted.until) == ("exhausted", None)
    suspended = health.after_failure(
        ACTIVE,
        Failure.SUSPENDED,
        detail="Your User ID (d-1) is suspended.",
        retry_after_s=None,
        now=NOW,
    )
    assert suspended is not None
    assert suspended.status == "suspended"
    assert suspended.reason == "suspended by Kiro: Your User ID (d-1) is suspended."
    assert eligibility(suspended, NOW + 10**9) is Eligibility.NO


def test_a_late_throttle_never_lifts_a_more_serious_state() -> None:
    for status in ("exhausted", "suspended", "needs_login", "disabled"):
        state = AccountState(status, "why")  # type: ignore[arg-type]
        after = fail(state, Failure.THROTTLED)
        assert after is not None
        assert (after.status, after.reason) == (status, "why")
        assert health.after_success(state) is None
    disabled = AccountState("disabled", "by hand")
    after_quota = fail(disabled, Failure.QUOTA)
    assert after_quota is not None
    assert after_quota.status == "disabled"


def test_five_consecutive_auth_failures_disable() -> None:
    state = ACTIVE
    for n in range(1, 5):
        after = fail(state, Failure.BEARER)
        assert after is not None
        assert (after.status, after.auth_failures) == ("cooling_down", n)
        state = after
    disabled = fail(state, Failure.BEARER)
    assert disabled is not None
    assert disabled.status == "disabled"
    assert disabled.reason is not None
    assert disabled.reason.startswith("5 consecutive authentication failures")
    reset = health.after_success(state)
    assert reset is not None
    assert reset.auth_failures == 0


def test_refresh_failures() -> None:
    dead = health.after_refresh_failure(ACTIVE, permanent=True, detail="rejected", now=NOW)
    assert dead.status == "needs_login"
    assert "kiroctl accounts login" in (dead.reason or "")
    transient = health.after_refresh_failure(ACTIVE, permanent=False, detail="503", now=NOW)
    assert (transient.status, transient.last_error) == ("active", "refresh: 503")


def test_usage_probes_exhaust_until_the_reset_and_bring_back() -> None:
    out = health.after_usage(ACTIVE, remaining=0, resets_at=NOW + 3600)
    assert out is not None
    assert (out.status, out.until) == ("exhausted", NOW + 3600)
    assert health.after_usage(out, remaining=5, resets_at=None) == AccountState()
    assert health.after_usage(ACTIVE, remaining=5, resets_at=None) is None
    assert health.after_usage(AccountState("disabled"), remaining=0, resets_at=1.0) is None


def test_a_usage_probe_keeps_the_overage_guard_and_a_budget_rest() -> None:
    guarded = health.overage_guarded(ACTIVE, NOW + 3600)
    # Overage on in Kiro, not allowed: the probe's empty plan keeps the guard's reason.
    # (nothing to write: the state stays as it is, reason and all).
    assert health.after_usage(guarded, remaining=0, resets_at=NOW + 3600, overage_on=True) is None
    found = health.after_usage(ACTIVE, remaining=0, resets_at=NOW + 3600, overage_on=True)
    assert found is not None
    assert found.reason == health.OVERAGE_GUARD_REASON
    # Allowed: the account is served in overage, and the probe does not take it out.
    assert (
        health.after_usage(
            ACTIVE, remaining=0, resets_at=None, overage_on=True, overage_allowed=True
        )
        is None
    )
    rested = health.budget_rested(ACTIVE, "day", 1.0, NOW + 60)
    assert health.after_usage(rested, remaining=500, resets_at=NOW + 3600) is None


def test_enable_and_disable_by_hand() -> None:
    disabled = health.disabled(AccountState("cooling_down", "x", until=5.0, failures=3), None)
    assert (disabled.status, disabled.reason, disabled.until) == (
        "disabled",
        "disabled by the user",
        None,
    )
    enabled = health.enabled(AccountState("suspended", "x", failures=2, auth_failures=4))
    assert (enabled.status, enabled.failures, enabled.auth_failures) == ("active", 0, 0)


@pytest.mark.parametrize(
    "failure", [Failure.CAPACITY, Failure.SERVICE_THROTTLED, Failure.UNREACHABLE]
)
@pytest.mark.parametrize("retry_after", [None, 300.0])
def test_kiro_s_own_trouble_rests_no_account(failure: Failure, retry_after: float | None) -> None:
    """A model out of capacity, a service-wide throttle, Kiro unreachable from the machine: a
    one-account user's only account stays."""
    state = ACTIVE
    for _ in range(5):
        after = fail(state, failure, retry_after)
        assert after is not None
        assert (after.status, after.failures, after.until) == ("active", 0, None)
        assert after.last_error == f"{failure.value}: HTTP 500"
        state = after


def test_a_penalty_window_rests_two_minutes_without_a_hint() -> None:
    after = fail(ACTIVE, Failure.PENALTY)
    assert after is not None
    assert (after.status, after.until, after.transient) == ("cooling_down", NOW + 120, False)
    assert after.reason == health.PENALTY_REASON
    # a penalty seen on an account that rests longer does not shorten its rest
    longer = fail(AccountState("cooling_down", "x", NOW + 600), Failure.PENALTY, 30.0)
    assert longer is not None
    assert longer.until == NOW + 600


@pytest.mark.parametrize(
    ("now", "midnight"),
    [
        (1_767_225_600.0 - 1, 1_767_225_600.0),  # 2025-12-31 23:59:59 → 2026-01-01 00:00
        (1_767_225_600.0, 1_767_225_600.0 + 86400),  # at midnight: the next one
        (1_767_225_600.0 + 3600 * 13.5, 1_767_225_600.0 + 86400),
    ],
)
def test_the_daily_limit_rests_until_midnight_utc(now: float, midnight: float) -> None:
    assert health.next_utc_midnight(now) == midnight
    after = health.after_failure(
        ACTIVE, Failure.DAILY_LIMIT, detail="", retry_after_s=300.0, now=now
    )
    assert after is not None
    assert (after.status, after.until, after.reason) == (
        "cooling_down",
        max(midnight, now + 300),
        health.DAILY_REASON,
    )


def test_a_full_conversation_leaves_the_account_alone() -> None:
    assert fail(ACTIVE, Failure.CONTEXT_TOO_LONG) is None


def test_a_budget_rest_lasts_its_period_whatever_succeeds_before_it_ends() -> None:
    rested = health.budget_rested(AccountState(), "day", 2.0, until=1000.0)
    assert (rested.status, rested.until, rested.transient) == ("cooling_down", 1000.0, False)
    assert health.is_budget_rest(rested.reason)
    assert "2 credits a day" in (rested.reason or "")
    # A request in flight as the rest began succeeds: the rest stays.
    assert health.after_success(rested, now=999.0) is None
    # The day turned: the next success (its trial) ends it.
    after = health.after_success(rested, now=1001.0)
    assert after is not None
    assert after.status == "active"
    # Something graver is not made lighter by a budget.
    suspended = AccountState(status="suspended", reason="by Kiro")
    assert health.budget_rested(suspended, "day", 2.0, until=1000.0) == suspended


def test_the_overage_guard_rests_until_the_plan_resets_and_lifts_when_allowed() -> None:
    guarded = health.overage_guarded(AccountState(), resets_at=5000.0)
    assert (guarded.status, guarded.until) == ("exhausted", 5000.0)
    assert guarded.reason == health.OVERAGE_GUARD_REASON
    # A probe still showing the plan used up keeps it, reason and all; a probe that finds it so
    # first gives the guard's reason; with overage allowed it serves again.
    on = {"remaining": 0.0, "resets_at": 5000.0, "overage_on": True}
    assert health.after_usage(guarded, **on) is None
    found = health.after_usage(AccountState(), **on)
    assert found is not None
    assert found.reason == health.OVERAGE_GUARD_REASON
    off = health.after_usage(AccountState(), remaining=0.0, resets_at=5000.0)
    assert off is not None
    assert off.reason == "monthly credits used up"
    served = health.after_usage(guarded, **on, overage_allowed=True)
    assert served is not None
    assert served.status == "active"
    # A 402 (Kiro's own overage cap, say) is not lifted by the permission.
    quota = health.after_failure(
        AccountState(), Failure.QUOTA, detail="q", retry_after_s=None, now=0.0
    )
    assert quota is not None
    assert (
        health.after_usage(
            quota, remaining=0.0, resets_at=None, overage_on=True, overage_allowed=True
        )
        is None
    )
    lifted = health.budget_lifted(guarded)
    assert lifted is not None
    assert lifted.status == "active"
    assert health.budget_lifted(quota) is None
