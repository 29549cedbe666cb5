"""The context windows kirod learned per (account, model) (`kirod.accounts.windows`).

One row per account and model whose window is not the listed one: a handful, read whole at
start, written only when a window is learned or goes back to the listed one.
"""

from __future__ import annotations

from dataclasses import dataclass

from kirod.errors import StoreError
from kirod.storage.db import Database


@dataclass(frozen=True, slots=True)
class LearnedWindow:
    account_id: str
    kiro_id: str
    listed: int  # the catalog's maxInputTokens when it was learned
    window: int  # what Kiro's context percentage is of on the account
    learned_at: float


class WindowStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def all(self) -> list[LearnedWindow]:
        rows = await self._db.read(
            "SELECT account_id, model, listed, learned, learned_at FROM model_windows"
        )
        return [LearnedWindow(row[0], row[1], row[2], row[3], row[4]) for row in rows]

    async def put(self, learned: LearnedWindow) -> None:
        await self._db.execute(
            "INSERT INTO model_windows (account_id, model, listed, learned, learned_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id, model) DO UPDATE SET"
            " listed = excluded.listed, learned = excluded.learned,"
            " learned_at = excluded.learned_at",
            (
                learned.account_id,
                learned.kiro_id,
                learned.listed,
                learned.window,
                learned.learned_at,
            ),
        )

    def skipped(self, exc: StoreError) -> None:
        """A learned window the store refused: counted with the store's other lost writes."""
        self._db.skipped("learned_window", exc)

    async def drop(self, account_id: str, kiro_id: str) -> None:
        await self._db.execute(
            "DELETE FROM model_windows WHERE account_id = ? AND model = ?", (account_id, kiro_id)
        )
