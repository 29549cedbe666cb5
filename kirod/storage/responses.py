"""Stored OpenAI Responses, for `previous_response_id`, `GET`/`DELETE /v1/responses/{id}`.

Each row keeps the Response object, this request's input items, and the whole conversation up to
and including this response's output (`history`), so a continuation reads one row. Rows belong to
the API key that created them. Retention is bounded by age and by total size, oldest first.

Every put prunes in its own transaction, on the request path, so it reads only what does not grow
with the store: the running total and the oldest rows (`kirod.storage.totals`), never a sum.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import aiosqlite

from kirod.errors import StoreError
from kirod.storage import totals
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


EXPIRED_PER_PUT = 64  # expired rows one put deletes at most


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class ResponseStore:
    def __init__(self, db: Database, *, max_age_s: float, max_bytes: int) -> None:
        self._db = db
        self.max_age_s = max_age_s
        self.max_bytes = max_bytes

    def check_room(self) -> None:
        """Raise `StoreFull` if the disk is known to have no room for a `put`."""
        self._db.check_room()

    async def put(self, stored: StoredResponse) -> None:
        response = _dumps(stored.response)
        inputs = _dumps(stored.input_items)
        history = _dumps(stored.history)
        size = len(response) + len(inputs) + len(history)

        async def write(conn: aiosqlite.Connection) -> None:
            # An upsert: the running total's triggers see a replaced row (kirod.storage.totals).
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
        await totals.drop_oldest(conn, "responses", key="id", size="size", max_bytes=self.max_bytes)

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
