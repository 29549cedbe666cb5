"""The response cache's table: one answer per (API key, request hash), bounded by age and size.

Bodies are opaque text to this module (the account layer serialises the canonical answer). A
row lives `ttl_s` at most; beyond `max_bytes` in all, the oldest rows go first. Rows are written
behind the request (`kirod.storage.behind`), never inline in a handler a client can cancel; a
lookup flushes what is queued first, so an answer stored a moment ago is found.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import aiosqlite

from kirod.storage import totals
from kirod.storage.behind import WriteBehind
from kirod.storage.db import Database

FLUSH_DELAY_S = 0.2
FLUSH_ROWS = 64
EXPIRED_PER_WRITE = 256


@dataclass(frozen=True, slots=True)
class CachedBody:
    key_id: str
    hash: str
    created_at: float
    body: str
    size: int  # of the body in UTF-8, what the byte bound counts


@dataclass(frozen=True, slots=True)
class CacheUsage:
    entries: int
    bytes: int
    oldest_at: float | None


class CacheStore:
    def __init__(self, db: Database, *, ttl_s: float, max_bytes: int) -> None:
        self._db = db
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes
        self._behind = WriteBehind[CachedBody](
            db, self._insert, name="response_cache", delay_s=FLUSH_DELAY_S, max_rows=FLUSH_ROWS
        )

    def put(self, key_id: str, digest: str, body: str) -> None:
        """Queue an answer; it is written within `FLUSH_DELAY_S`, or before the next read."""
        size = len(body.encode())
        if size <= self.max_bytes:
            self._behind.add(CachedBody(key_id, digest, time.time(), body, size))

    async def get(self, key_id: str, digest: str) -> str | None:
        """The live answer stored for this key and hash, if any."""
        await self._behind.flush()
        row = await self._db.read_one(
            "SELECT body FROM response_cache WHERE key_id = ? AND hash = ? AND expires_at > ?",
            (key_id, digest, time.time()),
        )
        return None if row is None else str(row["body"])

    async def usage(self) -> CacheUsage:
        await self._behind.flush()
        row = await self._db.read_one(
            "SELECT count(*), COALESCE(SUM(bytes), 0), MIN(created_at) FROM response_cache"
            " WHERE expires_at > ?",
            (time.time(),),
        )
        assert row is not None
        return CacheUsage(int(row[0]), int(row[1]), row[2])

    async def clear(self) -> int:
        """Drop every row; the number dropped (expired ones included)."""
        await self._behind.flush()
        rows = await self._db.execute("DELETE FROM response_cache RETURNING key_id")
        return len(rows)

    async def close(self) -> None:
        """Write what is queued; for shutdown, before the database closes."""
        await self._behind.close()

    async def _insert(self, conn: aiosqlite.Connection, rows: Sequence[CachedBody]) -> None:
        # An upsert: the running total's triggers see a replaced row (kirod.storage.totals).
        await conn.executemany(
            "INSERT INTO response_cache (key_id, hash, created_at, expires_at, bytes, body)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key_id, hash) DO UPDATE SET"
            " created_at = excluded.created_at, expires_at = excluded.expires_at,"
            " bytes = excluded.bytes, body = excluded.body",
            [
                (r.key_id, r.hash, r.created_at, r.created_at + self.ttl_s, r.size, r.body)
                for r in rows
            ],
        )
        # Expired by the TTL in force, found through the age index; at most EXPIRED_PER_WRITE a
        # batch (`get` never answers an expired row meanwhile).
        await conn.execute(
            "DELETE FROM response_cache WHERE rowid IN (SELECT rowid FROM response_cache"
            " WHERE created_at <= ? ORDER BY created_at LIMIT ?)",
            (time.time() - self.ttl_s, EXPIRED_PER_WRITE),
        )
        await totals.drop_oldest(
            conn, "response_cache", key="rowid", size="bytes", max_bytes=self.max_bytes
        )
