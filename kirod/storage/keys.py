"""API keys for the public listener, stored only as SHA-256 hashes, with their scopes.

Keys are long random tokens, so a plain (unsalted, fast) hash suffices: nothing can be brute-forced
from it, and lookups stay a cheap comparison. Only a short prefix is kept for display. A key's
scope limits the models it may use (glob patterns) and its request rate, and says whether it may
ask for cached answers; the gate enforces all three.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import time
import uuid
from dataclasses import dataclass

from kirod.errors import StoreError
from kirod.storage.db import Database

PREFIX_LENGTH = 12
TOUCH_INTERVAL = 60.0  # seconds; last_used_at is informative, so at most one write a minute
KEY_PREFIX = "sk-kirod-"


def hash_key(key: str) -> str:
    # A key read from a header that was not UTF-8 holds surrogates: hash them, it matches nothing.
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class KeyScope:
    """What a key may do: `models` are glob patterns (empty: any model); `rpm` None: no limit;
    `cache`: whether its requests may be answered from the response cache; the budgets
    (kirod.budgets), each None for none: credits a UTC day and month, tokens a minute."""

    models: tuple[str, ...] = ()
    rpm: int | None = None
    cache: bool = False
    credits_per_day: float | None = None
    credits_per_month: float | None = None
    tokens_per_minute: int | None = None


UNRESTRICTED = KeyScope()


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    """A key as listed; neither the key nor its hash is part of it."""

    id: str
    name: str
    prefix: str
    created_at: float
    last_used_at: float | None
    scope: KeyScope


@dataclass(frozen=True, slots=True)
class UsableKey:
    """What the gate matches a presented key against."""

    id: str
    key_hash: str
    scope: KeyScope


def _scope(row: sqlite3.Row) -> KeyScope:
    models = json.loads(row["models"]) if row["models"] else []
    return KeyScope(
        models=tuple(str(m) for m in models),
        rpm=row["rpm"],
        cache=bool(row["cache"]),
        credits_per_day=row["credits_per_day"],
        credits_per_month=row["credits_per_month"],
        tokens_per_minute=row["tokens_per_minute"],
    )


def _record(row: sqlite3.Row) -> ApiKeyRecord:
    return ApiKeyRecord(
        id=row["id"],
        name=row["name"],
        prefix=row["prefix"],
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        scope=_scope(row),
    )


class KeyStore:
    """API key rows in the kirod database; revoked keys are kept but never listed or matched."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._touched: dict[str, float] = {}

    def check_room(self) -> None:
        """Raise `StoreFull` if the disk is known to have no room for a new key."""
        self._db.check_room()

    async def insert(self, name: str, key: str, scope: KeyScope = UNRESTRICTED) -> ApiKeyRecord:
        # Never show more than half of the key, however short it is.
        prefix = key[: min(PREFIX_LENGTH, len(key) // 2)]
        rows = await self._db.execute(
            "INSERT INTO api_keys (id, name, key_hash, prefix, created_at, models, rpm, cache,"
            " credits_per_day, credits_per_month, tokens_per_minute)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
            (
                uuid.uuid4().hex,
                name,
                hash_key(key),
                prefix,
                time.time(),
                json.dumps(list(scope.models)) if scope.models else None,
                scope.rpm,
                int(scope.cache),
                scope.credits_per_day,
                scope.credits_per_month,
                scope.tokens_per_minute,
            ),
        )
        return _record(rows[0])

    async def set_budget(
        self,
        key_id: str,
        *,
        credits_per_day: float | None,
        credits_per_month: float | None,
        tokens_per_minute: int | None,
    ) -> ApiKeyRecord | None:
        """Replace the key's budgets (None: none); None when there is no such key."""
        rows = await self._db.execute(
            "UPDATE api_keys SET credits_per_day = ?, credits_per_month = ?,"
            " tokens_per_minute = ? WHERE id = ? AND revoked_at IS NULL RETURNING *",
            (credits_per_day, credits_per_month, tokens_per_minute, key_id),
        )
        return _record(rows[0]) if rows else None

    async def usable(self) -> list[UsableKey]:
        """Every key that is not revoked, for the request gate to match against."""
        rows = await self._db.read(
            "SELECT id, key_hash, models, rpm, cache, credits_per_day, credits_per_month,"
            " tokens_per_minute FROM api_keys WHERE revoked_at IS NULL"
        )
        return [UsableKey(row["id"], row["key_hash"], _scope(row)) for row in rows]

    async def touch(self, key_id: str) -> None:
        """Note that the key was used; called per request, so writes at most once a minute.
        Best effort: the request is not about this write, so a refused one (a full disk) is
        counted and the request goes on."""
        now = time.time()
        if now - self._touched.get(key_id, 0.0) < TOUCH_INTERVAL:
            return
        self._touched[key_id] = now
        if self._db.damaged is not None:
            return  # informative only: a read-only store still admits the key's requests
        try:
            await self._db.execute(
                "UPDATE api_keys SET last_used_at = ? WHERE id = ? AND revoked_at IS NULL",
                (now, key_id),
            )
        except StoreError as exc:
            self._db.skipped("key_last_use", exc)

    async def revoke(self, key_id: str) -> bool:
        rows = await self._db.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING id",
            (time.time(), key_id),
        )
        self._touched.pop(key_id, None)
        return bool(rows)

    async def count(self) -> int:
        row = await self._db.read_one("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL")
        return int(row[0]) if row is not None else 0

    async def list(self) -> list[ApiKeyRecord]:
        rows = await self._db.read(
            "SELECT * FROM api_keys WHERE revoked_at IS NULL ORDER BY created_at, id"
        )
        return [_record(row) for row in rows]
