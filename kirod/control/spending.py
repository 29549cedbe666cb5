"""What `GET /v1/usage` tells an API key: its own credits, and what the pool has left.

The key's credits come from the operation log (its rows today and this month, UTC, as
`kiroctl stats` counts days); each account's remaining credits from the pool's last usage probe
less what requests metered since. An account appears by its opaque id, state and numbers only:
never its label (often an email), tokens or profile.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from kirod.accounts.pool import AccountPool
from kirod.storage.oplog import OpLog


def day_and_month_start(now: float) -> tuple[float, float]:
    """Epoch seconds of the UTC day and month `now` falls in."""
    moment = datetime.fromtimestamp(now, UTC)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return day.timestamp(), day.replace(day=1).timestamp()


class Spending:
    def __init__(self, oplog: OpLog, pool: AccountPool) -> None:
        self._oplog = oplog
        self._pool = pool

    async def report(self, key_id: str, *, now: float | None = None) -> dict[str, Any]:
        """The `GET /v1/usage` document for API key `key_id` (shape in README, "Usage")."""
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
        return {
            "object": "usage",
            "at": at,
            "key_id": key_id,
            "credits": periods,
            "pool": {
                "remaining_credits": round(sum(known), 4) if known else None,
                "accounts": accounts,
            },
        }
