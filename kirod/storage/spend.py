"""What each API key and each account spent per UTC day: the `spend` table.

A trigger on the operation log (migration 15) adds every row to its key's and its account's day
in the transaction that writes the row, so the spend agrees with the log at every commit and a
crash loses both or neither (the write-behind window of docs/RELIABILITY.md). Retention drops
log rows, never spend: a month's budget must outlive a log cut to fewer rows. Days older than
`KEEP_DAYS` are dropped with the log's retention pass (`OpLog.prune`); a row is a few dozen
bytes per key and account and day.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kirod.storage.db import Database

Scope = Literal["key", "account"]
KEEP_DAYS = 400  # a year of days for the charts, and the month before it


@dataclass(frozen=True, slots=True)
class SpendDay:
    scope: Scope
    id: str
    day: int  # UTC days since the epoch
    requests: int
    input_tokens: int
    output_tokens: int
    credits: float


class SpendStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def since(self, first_day: int, *, scope: Scope | None = None) -> list[SpendDay]:
        """Every key's and account's days from `first_day` on (of one `scope`)."""
        sql = "SELECT * FROM spend WHERE day >= ?"
        params: tuple[object, ...] = (first_day,)
        if scope is not None:
            sql += " AND scope = ?"
            params = (first_day, scope)
        rows = await self._db.read(sql + " ORDER BY scope, id, day", params)
        return [
            SpendDay(
                scope=row["scope"],
                id=row["id"],
                day=int(row["day"]),
                requests=int(row["requests"]),
                input_tokens=int(row["input_tokens"]),
                output_tokens=int(row["output_tokens"]),
                credits=float(row["credits"]),
            )
            for row in rows
        ]
