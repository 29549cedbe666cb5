"""The drift kirod observed (`kirod.drift`), summed by UTC day, kind and shape.

Written from the maintenance pass and on shutdown, never on the request path; read by `kiroctl
doctor` and the status line. Bounded: at most `MAX_SHAPES_PER_DAY` shapes of a kind a day (the
rest are summed into the `other` shape, as the daemon does before a restart), and rows older than
`KEEP_DAYS` go in the maintenance pass.
"""

from __future__ import annotations

import json
import time

import aiosqlite

from kirod.drift import MAX_SHAPES_PER_DAY, OTHER, Drift, Kind, Record, Shape
from kirod.errors import StoreError
from kirod.storage.db import Database

KEEP_DAYS = 90


def _shape_json(shape: Shape) -> str:
    return json.dumps([list(fact) for fact in shape], separators=(",", ":"))


def _shape(text: str) -> Shape:
    return tuple((str(name), str(value)) for name, value in json.loads(text))


class DriftStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, records: list[Record]) -> None:
        """Sum `records` into their rows in one transaction."""
        if not records:
            return

        async def write(conn: aiosqlite.Connection) -> None:
            for record in records:
                await _add(conn, record)

        await self._db.run_write(write)

    def skipped(self, exc: StoreError) -> None:
        """A flush the store refused: counted with the store's other lost writes."""
        self._db.skipped("drift", exc)

    async def since(self, since: float) -> list[Record]:
        """The rows last seen at or after `since`, newest first."""
        rows = await self._db.read(
            "SELECT day, kind, place, shape, count, first_seen, last_seen, region, version"
            " FROM drift WHERE last_seen >= ? ORDER BY last_seen DESC",
            (since,),
        )
        return [
            Record(
                row[0], Kind(row[1]), row[2], _shape(row[3]), row[4], row[5], row[6], row[7], row[8]
            )
            for row in rows
            if row[1] in Kind._value2member_map_
        ]

    async def prune(self, now: float | None = None) -> int:
        """Drop the days older than `KEEP_DAYS`; returns how many rows went."""
        oldest = time.strftime(
            "%Y-%m-%d", time.gmtime((time.time() if now is None else now) - KEEP_DAYS * 86_400)
        )
        rows = await self._db.execute("DELETE FROM drift WHERE day < ? RETURNING day", (oldest,))
        return len(rows)


async def _add(conn: aiosqlite.Connection, record: Record) -> None:
    place, shape = record.where, _shape_json(record.shape)
    known = await conn.execute_fetchall(
        "SELECT 1 FROM drift WHERE day = ? AND kind = ? AND place = ? AND shape = ?",
        (record.day, record.kind.value, place, shape),
    )
    if not known:
        (count,) = next(
            iter(
                await conn.execute_fetchall(
                    "SELECT COUNT(*) FROM drift WHERE day = ? AND kind = ?",
                    (record.day, record.kind.value),
                )
            )
        )
        if count >= MAX_SHAPES_PER_DAY:
            place, shape = OTHER, _shape_json(())
    await conn.execute(
        "INSERT INTO drift (day, kind, place, shape, count, first_seen, last_seen, region, version)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (day, kind, place, shape) DO UPDATE SET"
        " count = count + excluded.count,"
        " first_seen = MIN(first_seen, excluded.first_seen),"
        " last_seen = MAX(last_seen, excluded.last_seen),"
        " region = COALESCE(excluded.region, region), version = excluded.version",
        (
            record.day,
            record.kind.value,
            place,
            shape,
            record.count,
            record.first_seen,
            record.last_seen,
            record.region,
            record.version,
        ),
    )


class DriftBook:
    """The daemon's drift: observed in memory (`observed`), written by `flush`, read whole."""

    def __init__(self, observed: Drift, store: DriftStore) -> None:
        self.observed = observed
        self._store = store

    async def flush(self) -> None:
        """Write what was observed since the last flush; kept for the next one if the store
        cannot take it (a full disk loses no record while the daemon runs), which is counted
        with the store's other refused writes and never raised."""
        records = self.observed.take()
        try:
            await self._store.add(records)
        except StoreError as exc:
            self.observed.give_back(records)
            self._store.skipped(exc)

    async def prune(self) -> int:
        return await self._store.prune()

    async def since(self, since: float) -> list[Record]:
        """The records last seen at or after `since`, the written and the not yet written
        summed, newest first."""
        summed: dict[tuple[str, Kind, str, Shape], Record] = {}
        for record in [*await self._store.since(since), *self.observed.pending()]:
            if record.last_seen < since:
                continue
            key = (record.day, record.kind, record.where, record.shape)
            if key in summed:
                summed[key].merge(record)
            else:
                summed[key] = record
        return sorted(summed.values(), key=lambda record: record.last_seen, reverse=True)
