"""Affinity bindings: which account (and Kiro conversation) serves a conversation.

A row is keyed by an opaque hash that the account layer derives from the API key's id and the
client's affinity key; neither the key nor anything from the prompt is stored. Bindings unused for
longer than the TTL are invisible and pruned.

Bindings are written behind the request (`kirod.storage.behind`), flushed before every read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aiosqlite

from kirod.storage.behind import WriteBehind
from kirod.storage.db import Database

FLUSH_DELAY_S = 0.5
FLUSH_ROWS = 256


@dataclass(frozen=True, slots=True)
class Binding:
    key_hash: str
    account_id: str
    conversation_id: str
    last_used_at: float


class AffinityStore:
    def __init__(self, db: Database, *, flush_delay_s: float = FLUSH_DELAY_S) -> None:
        self._db = db
        self._behind = WriteBehind[Binding](
            db, _upsert, name="affinity", delay_s=flush_delay_s, max_rows=FLUSH_ROWS
        )

    async def get(self, key_hash: str, *, used_since: float) -> Binding | None:
        await self._behind.flush()
        row = await self._db.read_one(
            "SELECT key_hash, account_id, conversation_id, last_used_at FROM affinity"
            " WHERE key_hash = ? AND last_used_at >= ?",
            (key_hash, used_since),
        )
        return None if row is None else _binding(row)

    async def live(self, *, used_since: float) -> list[Binding]:
        """Every binding used since `used_since`: what a restart remembers."""
        await self._behind.flush()
        rows = await self._db.read(
            "SELECT key_hash, account_id, conversation_id, last_used_at FROM affinity"
            " WHERE last_used_at >= ?",
            (used_since,),
        )
        return [_binding(row) for row in rows]

    def put(self, key_hash: str, account_id: str, conversation_id: str, now: float) -> None:
        """Bind (or rebind) the key; rebinding replaces account and conversation together."""
        self._behind.add(Binding(key_hash, account_id, conversation_id, now))

    async def prune(self, *, used_before: float) -> int:
        await self._behind.flush()
        rows = await self._db.execute(
            "DELETE FROM affinity WHERE last_used_at < ? RETURNING key_hash", (used_before,)
        )
        return len(rows)

    async def flush(self) -> None:
        """Write what is queued now."""
        await self._behind.flush()

    async def close(self) -> None:
        """Write what is queued; for shutdown, before the database closes."""
        await self._behind.close()


def _binding(row: aiosqlite.Row) -> Binding:
    return Binding(row["key_hash"], row["account_id"], row["conversation_id"], row["last_used_at"])


async def _upsert(conn: aiosqlite.Connection, bindings: Sequence[Binding]) -> None:
    await conn.executemany(
        "INSERT INTO affinity (key_hash, account_id, conversation_id, created_at, last_used_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (key_hash) DO UPDATE SET"
        " account_id = excluded.account_id, conversation_id = excluded.conversation_id,"
        " last_used_at = excluded.last_used_at",
        [
            (b.key_hash, b.account_id, b.conversation_id, b.last_used_at, b.last_used_at)
            for b in bindings
        ],
    )
