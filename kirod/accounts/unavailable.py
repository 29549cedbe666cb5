"""The answer when no account can serve a request, and why: 429 with the soonest return when one
is known, else 503, with a code and message naming the accounts' common state and what to run.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Collection

from kirod.accounts import health
from kirod.errors import ApiError, ErrorKind
from kirod.storage.accounts import AccountRecord


def unavailable(
    records: Collection[AccountRecord], exclude: frozenset[str], now: float
) -> ApiError:
    """Why no account can serve: 429 with the soonest return when one is known, else 503.

    Accounts this request already tried count for the soonest return, not for the reason.
    """
    returns = [
        record.status_until
        for record in records
        if record.status_until is not None and record.status_until > now
    ]
    retry_after = math.ceil(min(returns) - now) if returns else None
    states = [record.state for record in records if record.id not in exclude]
    if not states and not exclude:
        return ApiError(
            ErrorKind.UNAVAILABLE,
            "no Kiro account is configured: add one with 'kiroctl accounts login' or "
            "'kiroctl accounts import'",
            code="no_accounts",
            final=True,
        )
    counts = collections.Counter(state.status for state in states)
    back = f"; the first is back in {retry_after} s" if retry_after is not None else ""
    only = next(iter(counts)) if len(counts) == 1 else None
    if not states:
        code = "no_available_accounts"
        message = f"no other Kiro account is available{back}"
    elif only == "cooling_down" and all(health.is_flagged(state.reason) for state in states):
        code = "accounts_cooling_down"
        message = f"all Kiro accounts are resting: Kiro flagged suspicious activity{back}"
    elif only == "cooling_down" and all(health.is_budget_rest(state.reason) for state in states):
        code = "accounts_over_budget"
        message = (
            "every Kiro account has spent the credit budget set for it "
            f"('kiroctl accounts set-budget' changes it){back}"
        )
    elif only == "exhausted" and all(
        state.reason == health.OVERAGE_GUARD_REASON for state in states
    ):
        code = "accounts_exhausted"
        message = (
            "all Kiro accounts have used up their plan credits, and kirod does not spend into "
            "overage unless allowed ('kiroctl accounts set-budget ACCOUNT --allow-overage')"
            f"{back}"
        )
    elif only == "cooling_down" and all(state.reason == health.DAILY_REASON for state in states):
        code = "accounts_cooling_down"
        message = f"all Kiro accounts reached Kiro's daily request limit (reset 00:00 UTC){back}"
    elif only == "cooling_down":
        code = "accounts_cooling_down"
        message = f"all Kiro accounts are cooling down after upstream failures{back}"
    elif only == "exhausted":
        code = "accounts_exhausted"
        message = f"all Kiro accounts have used up their credits{back}"
    elif only == "needs_login":
        code = "accounts_need_login"
        message = "all Kiro accounts need a new login: run 'kiroctl accounts login'"
    elif only == "disabled":
        code = "accounts_disabled"
        message = "all Kiro accounts are disabled: run 'kiroctl accounts enable ACCOUNT'"
    else:
        code = "no_available_accounts"
        parts = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in sorted(counts.items()))
        message = f"no Kiro account is available ({parts}){back}"
        if "needs_login" in counts:
            message += "; run 'kiroctl accounts login'"
    if retry_after is None:
        # Nothing comes back by itself: retrying only delays the message the user needs.
        final = "cooling_down" not in counts
        return ApiError(ErrorKind.UNAVAILABLE, message, code=code, final=final)
    return ApiError(
        ErrorKind.RATE_LIMIT,
        message,
        code=code,
        headers={"Retry-After": str(max(1, retry_after))},
    )
