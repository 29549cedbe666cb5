"""Credits spent today and this month per key and per account, and what requests in flight hold.

Loaded once at start from the `spend` table (`kirod.storage.spend`) and kept in memory from
then on: every request that ends adds its metered credits here (`settle`) as its operation-log
row, which the table follows, is queued. Memory is bounded by the keys and accounts there are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kirod.budgets.periods import day_of, month_of, month_of_day
from kirod.storage.spend import Scope, SpendDay


@dataclass(slots=True)
class Tally:
    day: int = -1  # the UTC day `day_credits` counts
    day_credits: float = 0.0
    month: int = -1  # the UTC month `month_credits` counts
    month_credits: float = 0.0
    reserved: float = 0.0  # credits held by requests in flight

    def roll(self, at: float) -> Tally:
        """Start the day or the month over once `at` is past it."""
        day = day_of(at)
        if day != self.day:
            self.day, self.day_credits = day, 0.0
            month = month_of(at)
            if month != self.month:
                self.month, self.month_credits = month, 0.0
        return self


class Ledger:
    def __init__(self) -> None:
        self._tallies: dict[tuple[Scope, str], Tally] = {}

    def load(self, days: Iterable[SpendDay], now: float) -> None:
        """The spend of `now`'s month as stored (days from its first on)."""
        today, month = day_of(now), month_of(now)
        for spent in days:
            tally = self.tally(spent.scope, spent.id, now)
            if month_of_day(spent.day) == month:
                tally.month_credits += spent.credits
            if spent.day == today:
                tally.day_credits += spent.credits

    def tally(self, scope: Scope, id_: str, at: float) -> Tally:
        tally = self._tallies.get((scope, id_))
        if tally is None:
            tally = self._tallies[(scope, id_)] = Tally()
        return tally.roll(at)

    def settle(self, scope: Scope, id_: str, credits: float, at: float) -> Tally:
        tally = self.tally(scope, id_, at)
        tally.day_credits += credits
        tally.month_credits += credits
        return tally

    def forget(self, scope: Scope, id_: str) -> None:
        """Drop a revoked key's or a removed account's tally; requests still in flight on it
        settle into a new one."""
        self._tallies.pop((scope, id_), None)
