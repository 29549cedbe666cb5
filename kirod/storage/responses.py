"""Stored OpenAI Responses, for `previous_response_id`, `GET`/`DELETE /v1/responses/{id}`.

Each row keeps the Response object, this request's input items, and the whole conversation up to
and including this response's output (`history`), so a continuation reads one row. Rows belong to
the API key that created them. Retention is bounded by age and by total size, oldest first.

Every put prunes in its own transaction, on the request path, so it reads only what does not grow
with the store: the running total of `responses_total` (kept by triggers, schema migration 14)
and the oldest rows through the `created_at` index, never a sum over the table (issue 47).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import aiosqlite

from kirod.errors import StoreError
from kirod.storage.db import Database


@dataclass(frozen=True)
class StoredResponse:
    id: str
    tenant: str
    created_at: float
    model: str
    previous_id: str | None
    response: dict[str, Any]
    input_items: list[dict[str, Any]]
    history: list[dict[str, Any]]


# Rows one put deletes for age at most, and the oldest rows one read for size takes at a time.
EXPIRED_PER_PUT = 64
OLDEST_PER_READ = 16


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class ResponseStore:
    def __init__(self, db: Database, *, max_age_s: float, max_bytes: int) -> None:
        self._db = db
        self.max_age_s = max_age_s
        self.max_bytes = max_bytes

    async def put(self, stored: StoredResponse) -> None:
        response = _dumps(stored.response)
        inputs = _dumps(stored.input_items)
        history = _dumps(stored.history)
        size = len(response) + len(inputs) + len(history)

        async def write(conn: aiosqlite.Connection) -> None:
            # An upsert, not INSERT OR REPLACE: the rows REPLACE deletes fire no delete trigger,
            # which would leave the running total counting the replaced row.
            await conn.execute(
                "INSERT INTO responses (id, tenant, created_at, model, previous_id, response,"
                " input_items, history, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant,"
                " created_at = excluded.created_at, model = excluded.model,"
                " previous_id = excluded.previous_id, response = excluded.response,"
                " input_items = excluded.input_items, history = excluded.history,"
                " size = excluded.size",
                (
                    stored.id,
                    stored.tenant,
                    stored.created_at,
                    stored.model,
                    stored.previous_id,
                    response,
                    inputs,
                    history,
                    size,
                ),
            )
            await self._prune(conn)

        await self._db.run_write(write)

    async def _prune(self, conn: aiosqlite.Connection) -> None:
        # At most EXPIRED_PER_PUT expired rows a put (each put adds one, so they still drain;
        # `get` never answers them meanwhile), so a store left alone for long costs no request
        # a long transaction.
        await conn.execute(
            "DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE created_at < ?"
            " ORDER BY created_at LIMIT ?)",
            (time.time() - self.max_age_s, EXPIRED_PER_PUT),
        )
        excess = await self.total_bytes(conn) - self.max_bytes
        while excess > 0:  # the oldest rows go until the total fits again
            oldest = await conn.execute_fetchall(
                "SELECT id, size FROM responses ORDER BY created_at LIMIT ?", (OLDEST_PER_READ,)
            )
            gone: list[str] = []
            for row in oldest:
                if excess <= 0:
                    break
                gone.append(row[0])
                excess -= row[1]
            if not gone:
                return
            await conn.execute(
                "DELETE FROM responses WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(gone),),
            )

    @staticmethod
    async def total_bytes(conn: aiosqlite.Connection) -> int:
        """The running total of the rows' sizes, as the triggers keep it."""
        rows = list(await conn.execute_fetchall("SELECT bytes FROM responses_total"))
        return int(rows[0][0]) if rows else 0

    async def get(self, response_id: str, tenant: str) -> StoredResponse | None:
        row = await self._db.read_one(
            "SELECT * FROM responses WHERE id = ? AND tenant = ? AND created_at >= ?",
            (response_id, tenant, time.time() - self.max_age_s),
        )
        if row is None:
            return None
        return StoredResponse(
            id=row["id"],
            tenant=row["tenant"],
            created_at=row["created_at"],
            model=row["model"],
            previous_id=row["previous_id"],
            response=json.loads(row["response"]),
            input_items=json.loads(row["input_items"]),
            history=json.loads(row["history"]),
        )

    async def available(self) -> bool:
        """Whether the store can be read (its table exists and the file answers)."""
        try:
            await self._db.read_one("SELECT 1 FROM responses LIMIT 1")
        except StoreError:
            return False
        return True

    async def delete(self, response_id: str, tenant: str) -> bool:
        rows = await self._db.execute(
            "DELETE FROM responses WHERE id = ? AND tenant = ? RETURNING id", (response_id, tenant)
        )
        return bool(rows)
