"""The overview's facts, read through the same service calls as the control API, and the flat
`key → text` view of them that both the page and its live updates are rendered from."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from kirod.localapi.control import Control
from kirod.report_types import Account, Budget, Pool, PoolAccount, Stats, Status, Traffic, Usage

SNAPSHOT_TTL_S = 1.0  # however many pages are open, the services are asked at most this often


@dataclass(frozen=True)
class Card:
    account: Account
    pool: PoolAccount | None  # None: an account the dispatcher has not loaded yet
    credits_today: float
    requests_today: int


@dataclass(frozen=True)
class Overview:
    status: Status
    ready: bool
    cards: tuple[Card, ...]
    queued: int
    strategy: str
    today: Stats

    def fields(self) -> dict[str, str]:
        """Every value the page shows that can change without an account coming or going."""
        status = self.status
        values = {
            "health": status.health,
            "problems": "; ".join(status.problems) or "none",
            "drift": "none" if status.drift is None else status.drift.sentence(),
            "ready": "ready" if self.ready else "not ready",
            "t.accounts": str(status.accounts.total),
            "t.usable": str(status.accounts.usable),
            "t.in_flight": str(sum(card.pool.in_flight for card in self.cards if card.pool)),
            "t.queued": str(self.queued),
            "t.requests": str(self.today.requests),
            "t.credits": credits_text(self.today.credits),
        }
        for card in self.cards:
            values.update(card_fields(card))
        return values

    @property
    def account_ids(self) -> tuple[str, ...]:
        return tuple(card.account.id for card in self.cards)


def credits_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}".rstrip("0").rstrip(".")


def card_fields(card: Card) -> dict[str, str]:
    account, pool = card.account, card.pool
    key = f"a.{account.id}."
    status = pool.status if pool else account.status
    reason = (pool.reason if pool else account.status_reason) or ""
    until = pool.until if pool else account.status_until
    usage = account.usage
    used, limit = _usage(pool, account)
    return {
        key + "status": status.replace("_", " "),
        key + "reason": reason or "—",
        key + "until": "" if until is None else f"{until:.0f}",
        key + "slots": f"{pool.in_flight} / {pool.capacity}" if pool else "—",
        key + "usage": (
            f"{credits_text(used)} / {credits_text(limit)} credits" if limit else "not probed yet"
        ),
        key + "usage_pct": f"{min(100.0, 100 * used / limit):.0f}"
        if limit and used is not None
        else "0",
        key + "overage": _overage(usage),
        key + "budget": budget_text(account.budget),
        key + "resets": ""
        if usage is None or usage.resets_at is None
        else f"{usage.resets_at:.0f}",
        key
        + "today": f"{credits_text(card.credits_today)} credits, {card.requests_today} requests",
        key + "error": (pool.last_error if pool else account.last_error) or "none",
    }


def _overage(usage: Usage | None) -> str:
    """The overage switch as the last usage probe found it (Kiro IDE may have changed it)."""
    if usage is not None and usage.overage_capable is False:
        return "not available on this plan"
    if usage is None or usage.overage not in ("enabled", "disabled"):
        return "not probed yet"
    return "on" if usage.overage == "enabled" else "off"


def budget_text(budget: Budget) -> str:
    """An account's ceilings against what it spent: `2.5 of 10 today · 40 of 200 this month`."""
    parts = [
        f"{credits_text(spent)} of {credits_text(limit)} {period}"
        for spent, limit, period in (
            (budget.spent_today, budget.credits_per_day, "today"),
            (budget.spent_month, budget.credits_per_month, "this month"),
        )
        if limit is not None
    ]
    return " · ".join(parts) or "no ceiling"


def _usage(pool: PoolAccount | None, account: Account) -> tuple[float | None, float | None]:
    """Credits used and the limit, from the freshest probe either view has."""
    remaining = pool.remaining_credits if pool else None
    limit = pool.usage_limit if pool else None
    if limit is None and account.usage is not None:
        remaining, limit = account.usage.remaining, account.usage.limit
    if limit is None or remaining is None:
        return None, limit
    return max(0.0, limit - remaining), limit


def start_of_day(now: float) -> float:
    return now - now % 86400


async def read_overview(control: Control) -> Overview:
    now = time.time()
    status = await control.status()
    accounts = [Account.from_json(doc) for doc in await control.accounts.all()]
    pool = Pool.from_json(await control.reports.pool())
    today = await control.reports.stats(start_of_day(now))
    by_id = {item.id: item for item in pool.accounts}
    spent = {group.key: group for group in today.accounts}
    cards = tuple(
        Card(
            account,
            by_id.get(account.id),
            spent[account.id].credits if account.id in spent else 0.0,
            spent[account.id].requests if account.id in spent else 0,
        )
        for account in accounts
    )
    ready = (
        status.state == "serving"
        and status.accounts.usable > 0
        and not control.models.catalog_unavailable()
    )
    return Overview(status, ready, cards, pool.queued, pool.strategy, today)


class Snapshots:
    """One overview shared by every open page for `SNAPSHOT_TTL_S`; one read at a time."""

    def __init__(self, control: Control) -> None:
        self._control = control
        self._lock = asyncio.Lock()
        self._taken_at = -SNAPSHOT_TTL_S
        self._last: Overview | None = None

    async def get(self) -> Overview:
        async with self._lock:
            now = time.monotonic()
            if self._last is None or now - self._taken_at >= SNAPSHOT_TTL_S:
                self._last = await read_overview(self._control)
                self._taken_at = now
            return self._last


# How long one window's figures are reused by every open page: no shorter than its buckets need
# (a month's are days); each read is a few milliseconds of the store's connection, from the
# operation log's rollups.
TRAFFIC_TTL_S = {"hour": 5.0, "day": 30.0, "month": 120.0}


class TrafficCache:
    """The traffic of each window, read at most once per `TRAFFIC_TTL_S` for every page."""

    def __init__(self, control: Control) -> None:
        self._control = control
        self._lock = asyncio.Lock()
        self._kept: dict[str, tuple[float, Traffic]] = {}

    async def get(self, window: str) -> Traffic:
        async with self._lock:
            now = time.monotonic()
            kept = self._kept.get(window)
            if kept is None or now - kept[0] >= TRAFFIC_TTL_S.get(window, 0.0):
                # An unknown window raises here, for the page to answer 400.
                kept = (now, await self._control.reports.traffic(window))
                self._kept[window] = kept
            return kept[1]
