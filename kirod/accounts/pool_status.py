"""One account's row in the pool's report (`GET /pool`, `kiroctl pool`, the console): what the
store holds beside what only the pool knows, in the control plane's report type.
"""

from __future__ import annotations

from kirod.accounts.health import Eligibility, eligibility
from kirod.report_types import PoolAccount
from kirod.storage.accounts import AccountRecord


def pool_account(
    record: AccountRecord, *, in_flight: int, capacity: int, remaining: float | None, now: float
) -> PoolAccount:
    """The account's row: its stored state, and the requests in flight and the credits left
    (the last probe's less what was metered since) that only the pool knows."""
    usage = record.usage or {}
    return PoolAccount(
        id=record.id,
        label=record.label,
        auth_kind=record.auth_kind,
        status=record.status,
        reason=record.status_reason,
        since=record.status_since,
        until=record.status_until,
        half_open=eligibility(record.state, now) is Eligibility.TRIAL,
        in_flight=in_flight,
        capacity=capacity,
        failures=record.failures,
        auth_failures=record.auth_failures,
        last_error=record.last_error,
        last_error_at=record.last_error_at,
        remaining_credits=None if remaining is None else round(remaining, 4),
        usage_limit=_number(usage.get("limit")),
        resets_at=_number(usage.get("resets_at")),
        usage_at=record.usage_at,
        subscription=usage.get("subscription"),
        expires_at=_number(record.credentials.get("expires_at")),
    )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None
