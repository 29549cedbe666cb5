"""Affinity bindings: which account (and Kiro conversation) serves a conversation.

A row is keyed by an opaque hash that the account layer derives from the API key's id and the
client's affinity key; neither the key nor anything from the prompt is stored. Bindings unused for
longer than the TTL are invisible and pruned.
"""

from __future__ import annotations

from dataclasses import dataclass

from kirod.storage.db import Database


@dataclass(frozen=True, slots=True)
class Binding:
    key_hash: str
    account_id: str
    conversation_id: str
    last_used_at: float


class AffinityStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, key_hash: str, *, used_since: float) -> Binding | None:
        row = await self._db.read_one(
            "SELECT key_hash, account_id, conversation_id, last_used_at FROM affinity"
            " WHERE key_hash = ? AND last_used_at >= ?",
            (key_hash, used_since),
        )
        if row is None:
            return None
        return Binding(
            row["key_hash"], row["account_id"], row["conversation_id"], row["last_used_at"]
        )

    async def put(self, key_hash: str, account_id: str, conversation_id: str, now: float) -> None:
        """Bind (or rebind) the key; rebinding replaces account and conversation together."""
        await self._db.execute(
            "INSERT INTO affinity (key_hash, account_id, conversation_id, created_at,"
            " last_used_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (key_hash) DO UPDATE SET"
            " account_id = excluded.account_id, conversation_id = excluded.conversation_id,"
            " last_used_at = excluded.last_used_at",
            (key_hash, account_id, conversation_id, now, now),
        )

    async def prune(self, *, used_before: float) -> int:
        rows = await self._db.execute(
            "DELETE FROM affinity WHERE last_used_at < ? RETURNING key_hash", (used_before,)
        )
        return len(rows)
