"""Usage limits: what an account has left this billing window (docs/KIRO-PROTOCOL.md §6.1).

Remaining credits = base (limit - used) + an ACTIVE free trial + ACTIVE bonuses, taken from the
`CREDIT` entry of `usageBreakdownList`. The answer also says whether overage is on
(`overageConfiguration.overageStatus`) and whether the plan allows it at all
(`subscriptionInfo.overageCapability`), so a change made in Kiro IDE shows at the next probe.
`usage_unknowns` names the fields the answer has beyond the documented ones, for the drift record
(docs/RELIABILITY.md, "Drift"); the parse ignores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

from kirod.drift import type_name
from kirod.upstream.errors import UpstreamProtocolError


@dataclass(frozen=True)
class UsageSnapshot:
    remaining: float
    limit: float
    used: float
    resets_at: float | None  # epoch seconds
    subscription: str | None  # e.g. "KIRO PRO"
    email: str | None
    overage: str | None = None  # "enabled" or "disabled"; None when Kiro did not say
    overage_capable: bool | None = None  # False: the plan cannot use overage (Free)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _precise(entry: dict[str, Any], key: str) -> float:
    precise = entry.get(f"{key}WithPrecision")
    return _number(precise if precise is not None else entry.get(key))


def parse_usage_limits(doc: dict[str, Any]) -> UsageSnapshot:
    entries = doc.get("usageBreakdownList")
    if not isinstance(entries, list):
        raise UpstreamProtocolError("getUsageLimits answer has no usageBreakdownList")
    credit = next(
        (e for e in entries if isinstance(e, dict) and e.get("resourceType") == "CREDIT"),
        next((e for e in entries if isinstance(e, dict)), None),
    )
    if credit is None:
        raise UpstreamProtocolError("getUsageLimits answer has no usage entry")
    limit = _precise(credit, "usageLimit")
    used = _precise(credit, "currentUsage")
    remaining = max(0.0, limit - used)
    trial = credit.get("freeTrialInfo")
    if isinstance(trial, dict) and trial.get("freeTrialStatus") == "ACTIVE":
        trial_limit = _precise(trial, "usageLimit")
        trial_used = _precise(trial, "currentUsage")
        limit += trial_limit
        used += trial_used
        remaining += max(0.0, trial_limit - trial_used)
    for bonus in credit.get("bonuses") or ():
        if isinstance(bonus, dict) and bonus.get("status") == "ACTIVE":
            bonus_limit = _precise(bonus, "usageLimit")
            bonus_used = _precise(bonus, "currentUsage")
            limit += bonus_limit
            used += bonus_used
            remaining += max(0.0, bonus_limit - bonus_used)
    reset = credit.get("nextDateReset", doc.get("nextDateReset"))
    subscription = doc.get("subscriptionInfo")
    user = doc.get("userInfo")
    return UsageSnapshot(
        remaining=round(remaining, 4),
        limit=round(limit, 4),
        used=round(used, 4),
        resets_at=_number(reset) or None,
        subscription=str(subscription.get("subscriptionTitle"))
        if isinstance(subscription, dict) and subscription.get("subscriptionTitle")
        else None,
        email=str(user["email"]) if isinstance(user, dict) and user.get("email") else None,
        overage=_overage_status(doc.get("overageConfiguration")),
        overage_capable=_overage_capable(subscription),
    )


def _overage_status(configuration: object) -> str | None:
    status = configuration.get("overageStatus") if isinstance(configuration, dict) else None
    return status.lower() if status in ("ENABLED", "DISABLED") else None


def _overage_capable(subscription: object) -> bool | None:
    """`OVERAGE_CAPABLE`, or another value (`OVERAGE_INCAPABLE` on Free plans; peers also list
    `NOT_OVERAGE_CAPABLE`, `NOT_AVAILABLE`) that means the plan cannot."""
    capability = subscription.get("overageCapability") if isinstance(subscription, dict) else None
    return capability == "OVERAGE_CAPABLE" if isinstance(capability, str) else None


# The answer as documented (docs/KIRO-PROTOCOL.md §6.1, the capture of a paid account there and
# the fields beside what kirod reads): only a field beyond these is drift. `bonuses` entries are
# not checked: no capture shows a non-empty one whole.
USAGE_FIELDS: Final = frozenset(
    {
        "daysUntilReset",
        "limits",
        "nextDateReset",
        "overageConfiguration",
        "subscriptionInfo",
        "totalUsage",
        "usageBreakdown",
        "usageBreakdownList",
        "userInfo",
    }
)
USAGE_NESTED_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    # `__type` as a capture of an account in overage shows it (docs/KIRO-PROTOCOL.md §6.5).
    "overageConfiguration": frozenset({"overageStatus", "overageLimit", "__type"}),
    "subscriptionInfo": frozenset(
        {
            "subscriptionTitle",
            "type",
            "overageCapability",
            "upgradeCapability",
            "subscriptionManagementTarget",
        }
    ),
    "userInfo": frozenset({"email", "userId"}),
}
BREAKDOWN_FIELDS: Final = frozenset(
    {
        "resourceType",
        "unit",
        "displayName",
        "displayNamePlural",
        "currentUsage",
        "currentUsageWithPrecision",
        "usageLimit",
        "usageLimitWithPrecision",
        "nextDateReset",
        "currency",
        "overageRate",
        "overageCap",
        "overageCapWithPrecision",
        "overageCharges",
        "currentOverages",
        "currentOveragesWithPrecision",
        # An empty list in a capture of an account in overage (docs/KIRO-PROTOCOL.md §6.5).
        "overageCredits",
        "freeTrialInfo",
        "bonuses",
    }
)
FREE_TRIAL_FIELDS: Final = frozenset(
    {
        "freeTrialStatus",
        "freeTrialExpiry",
        "currentUsage",
        "currentUsageWithPrecision",
        "usageLimit",
        "usageLimitWithPrecision",
    }
)


def usage_unknowns(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields of a getUsageLimits answer kirod does not know, as sorted `path:type`
    (`usageBreakdownList.*.x` for an entry's); names only, never values."""
    found = set(_unknown(doc, USAGE_FIELDS, ""))
    for name, known in USAGE_NESTED_FIELDS.items():
        found.update(_unknown(doc.get(name), known, f"{name}."))
    entries = doc.get("usageBreakdownList")
    for entry in entries if isinstance(entries, list) else ():
        found.update(_unknown(entry, BREAKDOWN_FIELDS, "usageBreakdownList.*."))
        trial = entry.get("freeTrialInfo") if isinstance(entry, Mapping) else None
        found.update(_unknown(trial, FREE_TRIAL_FIELDS, "usageBreakdownList.*.freeTrialInfo."))
    return tuple(sorted(found))


def _unknown(mapping: object, known: frozenset[str], prefix: str) -> list[str]:
    if not isinstance(mapping, Mapping):
        return []
    return [
        f"{prefix}{key}:{type_name(value)}" for key, value in mapping.items() if key not in known
    ]
