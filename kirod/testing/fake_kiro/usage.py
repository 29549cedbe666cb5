"""An account's plan and credit usage, as getUsageLimits reports it (docs/KIRO-PROTOCOL.md §6.1).

Successful chats consume their metered credits, and an account with nothing left is refused
with 402 MONTHLY_REQUEST_COUNT, so quota exhaustion happens on its own in long tests. The
overage switch (setUserPreference) is kept here and reported back; a Free plan cannot use it.
With overage on, an account past its plan keeps being served: the excess is counted as
`currentOverages` and billed as `overageCharges`, up to the overage cap, past which it is refused
with OVERAGE_REQUEST_LIMIT_EXCEEDED (docs/KIRO-PROTOCOL.md §6.5).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

PLANS: Mapping[str, tuple[str, float]] = {
    "KIRO FREE": ("Q_DEVELOPER_STANDALONE_FREE", 50.0),
    "KIRO PRO": ("Q_DEVELOPER_STANDALONE_PRO", 1000.0),
    "KIRO PRO+": ("Q_DEVELOPER_STANDALONE_PRO_PLUS", 2000.0),
    "KIRO POWER": ("Q_DEVELOPER_STANDALONE_POWER", 10000.0),
}
"""Subscription title → (subscription type, monthly credit limit)."""


@dataclass(frozen=True)
class Bonus:
    current: float
    limit: float
    status: str = "ACTIVE"  # or EXPIRED

    def to_json(self) -> dict[str, Any]:
        return {"currentUsage": self.current, "usageLimit": self.limit, "status": self.status}


@dataclass(frozen=True)
class FreeTrial:
    current: float
    limit: float
    expiry: float  # epoch seconds
    status: str = "ACTIVE"  # or EXPIRED

    def to_json(self) -> dict[str, Any]:
        return {
            "freeTrialStatus": self.status,
            "freeTrialExpiry": self.expiry,
            "currentUsage": round(self.current),
            "currentUsageWithPrecision": self.current,
            "usageLimit": round(self.limit),
            "usageLimitWithPrecision": self.limit,
        }


@dataclass(frozen=True)
class Usage:
    """Credit usage of one account; `next_date_reset` is epoch seconds."""

    subscription: str
    current: float
    limit: float
    next_date_reset: float
    bonuses: tuple[Bonus, ...] = ()
    free_trial: FreeTrial | None = None
    overage_rate: float = 0.04
    overage_status: str = "DISABLED"  # or ENABLED, as setUserPreference last set it
    overages: float = 0.0
    """Credits served past the plan with overage on (`currentOverages`): also counted in
    `current`, as a live capture of an account in overage shows (docs/KIRO-PROTOCOL.md §6.5)."""
    overage_cap: float | None = None
    """The most overage credits served (`overageCap`); None: the plan's limit, as every capture
    shows it (docs/KIRO-PROTOCOL.md §6.5)."""
    days_until_reset: int | None = None
    """What `daysUntilReset` says; None: the days to `next_date_reset`. Kiro answered 0 while
    `nextDateReset` was 2026-10-01, weeks away (sunerpy/kiro-provider
    docs/audits/kiro-protocol-evidence-probe-2026-09-02.zh.md, B12, 2026-09-02)."""

    @property
    def overage_capable(self) -> bool:
        return "FREE" not in self.subscription

    @classmethod
    def for_plan(cls, subscription: str, now: float) -> Usage:
        _, limit = PLANS[subscription]
        return cls(subscription, 0.0, limit, _first_of_next_month(now))

    def remaining(self) -> float:
        """Base credits left, plus active trial and bonuses (as peers compute it)."""
        left = self.limit - self.current
        if self.free_trial is not None and self.free_trial.status == "ACTIVE":
            left += self.free_trial.limit - self.free_trial.current
        return left + sum(b.limit - b.current for b in self.bonuses if b.status == "ACTIVE")

    @property
    def overage_on(self) -> bool:
        return self.overage_status == "ENABLED" and self.overage_capable

    def cap(self) -> float:
        return self.limit if self.overage_cap is None else self.overage_cap

    def refusal(self) -> str | None:
        """The reason a chat is refused for the account's credits, None while it is served:
        nothing left of the plan with overage off, or the overage cap reached with it on."""
        if self.remaining() > 0:
            return None
        if not self.overage_on:
            return "MONTHLY_REQUEST_COUNT"
        return "OVERAGE_REQUEST_LIMIT_EXCEEDED" if self.overages >= self.cap() else None

    def consume(self, credits: float) -> Usage:
        """A served chat's credits; with overage on, what the plan no longer covers is overage
        (the chat that crosses the plan's end is served whole, its excess billed)."""
        excess = min(credits, max(0.0, credits - max(0.0, self.remaining())))
        overages = round(self.overages + excess, 6) if self.overage_on else self.overages
        return replace(self, current=round(self.current + credits, 6), overages=overages)

    def to_json(self, *, email: str | None, user_id: str, now: float) -> dict[str, Any]:
        """The getUsageLimits response; `email` is null unless the caller asked for it."""
        subscription_type, _ = PLANS.get(self.subscription, ("Q_DEVELOPER_STANDALONE", 0.0))
        days = self.days_until_reset
        if days is None:
            days = max(0, int((self.next_date_reset - now) // 86400))
        breakdown = {
            "resourceType": "CREDIT",
            "unit": "INVOCATIONS",
            "displayName": "Credit",
            "displayNamePlural": "Credits",
            "currentUsage": round(self.current),
            "currentUsageWithPrecision": self.current,
            "usageLimit": round(self.limit),
            "usageLimitWithPrecision": self.limit,
            "nextDateReset": self.next_date_reset,
            "currency": "USD",
            "overageRate": self.overage_rate,
            "overageCap": round(self.cap()),
            "overageCapWithPrecision": self.cap(),
            # An unpriced count of credits, billed at `overageRate` (docs/KIRO-PROTOCOL.md §6.5).
            "overageCharges": self.overages * self.overage_rate,
            "currentOverages": round(self.overages),
            "currentOveragesWithPrecision": self.overages,
            "freeTrialInfo": None if self.free_trial is None else self.free_trial.to_json(),
            "bonuses": [bonus.to_json() for bonus in self.bonuses],
        }
        return {
            "daysUntilReset": days,
            "limits": [],
            "nextDateReset": self.next_date_reset,
            "overageConfiguration": {"overageStatus": self.overage_status, "overageLimit": None},
            "subscriptionInfo": {
                "subscriptionTitle": self.subscription,
                "type": subscription_type,
                # What peers' captures of Free accounts show.
                "overageCapability": "OVERAGE_CAPABLE"
                if self.overage_capable
                else "OVERAGE_INCAPABLE",
                "upgradeCapability": "UPGRADE_CAPABLE",
                "subscriptionManagementTarget": "MANAGE",
            },
            "totalUsage": None,
            "usageBreakdown": None,
            "usageBreakdownList": [breakdown],
            "userInfo": {"email": email, "userId": user_id},
        }


def _first_of_next_month(now: float) -> float:
    today = dt.datetime.fromtimestamp(now, dt.UTC)
    year, month = (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
    return dt.datetime(year, month, 1, tzinfo=dt.UTC).timestamp()


DRIFT_USAGE_FIELD = "overageChargesWithPrecision"
"""`Drift.USAGE_FIELD`: a field the `CREDIT` entry gains. The kind of change seen before: the
entry's figures gained `…WithPrecision` siblings one by one (`currentUsageWithPrecision`,
`usageLimitWithPrecision`, `overageCapWithPrecision`; docs/KIRO-PROTOCOL.md §6.1), and
`overageCharges` is the one figure still without."""


def with_usage_drift(doc: dict[str, Any]) -> dict[str, Any]:
    """A getUsageLimits answer under `Drift.USAGE_FIELD`."""
    for entry in doc["usageBreakdownList"]:
        entry[DRIFT_USAGE_FIELD] = float(entry.get("overageCharges", 0))
    return doc
