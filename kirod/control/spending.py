"""What `GET /v1/usage` tells an API key: its own credits, and what the pool has left.

The key's credits come from the operation log (its rows today and this month, UTC, as
`kiroctl stats` counts days); each account's remaining credits from the pool's last usage probe
less what requests metered since. An account appears by its opaque id, state and numbers only:
never its label (often an email), tokens or profile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kirod.accounts.pool import AccountPool
from kirod.budgets.budgets import Budgets
from kirod.budgets.limits import Limits
from kirod.budgets.periods import DAY_S, day_of
from kirod.errors import InvalidControlRequest
from kirod.report_types import Spend, SpendDay
from kirod.storage.oplog import OpLog
from kirod.storage.spend import SpendStore

MAX_DAYS = 400


def day_and_month_start(now: float) -> tuple[float, float]:
    """Epoch seconds of the UTC day and month `now` falls in."""
    moment = datetime.fromtimestamp(now, UTC)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return day.timestamp(), day.replace(day=1).timestamp()


class Spending:
    def __init__(
        self,
        oplog: OpLog,
        pool: AccountPool,
        spend: SpendStore | None = None,
        budgets: Budgets | None = None,
        key_limits: Callable[[str], Limits] | None = None,
    ) -> None:
        self._oplog = oplog
        self._pool = pool
        self._spend = spend
        self._budgets = budgets
        self._key_limits = key_limits

    async def series(self, scope: str, id_: str, *, days: int, now: float | None = None) -> Spend:
        """A key's or an account's spend per UTC day over the last `days` days, today last,
        days without requests included (for the charts)."""
        found = await self.every_series(scope, days=days, now=now)
        return found.get(id_) or _series(scope, id_, {}, *_days(days, now))

    async def every_series(
        self, scope: str, *, days: int, now: float | None = None
    ) -> dict[str, Spend]:
        """`series` of every key (or account) that spent in those days, in one read (a console
        page charts them all); those that did not are absent."""
        if scope not in ("key", "account"):
            raise InvalidControlRequest("scope must be key or account")
        if not 1 <= days <= MAX_DAYS:
            raise InvalidControlRequest(f"days must be from 1 to {MAX_DAYS}")
        first, today = _days(days, now)
        found: dict[str, dict[int, SpendDay]] = {}
        if self._spend is not None:
            await self._oplog.flush()  # the rows queued behind requests, and their spend
            for row in await self._spend.since(first, scope="key" if scope == "key" else "account"):
                found.setdefault(row.id, {})[row.day] = _spend_day(
                    row.day, row.requests, row.input_tokens, row.output_tokens, row.credits
                )
        return {id_: _series(scope, id_, rows, first, today) for id_, rows in found.items()}

    async def report(self, key_id: str, *, now: float | None = None) -> dict[str, Any]:
        """The `GET /v1/usage` document for API key `key_id` (docs/guide/troubleshooting.md)."""
        at = time.time() if now is None else now
        day, month = day_and_month_start(at)
        periods: dict[str, Any] = {}
        for name, since in (("today", day), ("month", month)):
            requests, credits = await self._oplog.key_credits(key_id, since=since)
            periods[name] = {"since": since, "requests": requests, "credits": credits}
        status = await self._pool.status()
        accounts = [
            {
                "id": account.id,
                "status": account.status,
                "remaining_credits": account.remaining_credits,
                "limit": account.usage_limit,
                "resets_at": account.resets_at,
                "checked_at": account.usage_at,
            }
            for account in status.accounts
        ]
        known = [a.remaining_credits for a in status.accounts if a.remaining_credits is not None]
        budget = None
        if self._budgets is not None and self._key_limits is not None:
            limits = self._key_limits(key_id)
            if limits.any:
                budget = self._budgets.report("key", key_id, limits).to_json()
        return {
            "object": "usage",
            "at": at,
            "key_id": key_id,
            "budget": budget,
            "credits": periods,
            "pool": {
                "remaining_credits": round(sum(known), 4) if known else None,
                "accounts": accounts,
            },
        }


def _spend_day(
    day: int, requests: int, input_tokens: int, output_tokens: int, credits: float
) -> SpendDay:
    date = datetime.fromtimestamp(day * DAY_S, UTC).strftime("%Y-%m-%d")
    return SpendDay(date, requests, input_tokens, output_tokens, round(credits, 6))


def _days(days: int, now: float | None) -> tuple[int, int]:
    """The first and the last (today's) UTC day of the last `days` days."""
    today = day_of(time.time() if now is None else now)
    return today - days + 1, today


def _series(scope: str, id_: str, found: dict[int, SpendDay], first: int, today: int) -> Spend:
    days = tuple(found.get(day) or _spend_day(day, 0, 0, 0, 0.0) for day in range(first, today + 1))
    return Spend(scope, id_, days)
