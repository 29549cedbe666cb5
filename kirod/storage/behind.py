"""Write-behind: rows queued by the request path and written in batches, off it.

A transaction per request was the largest single cost of a small request (a thread hop and a
commit each). A `WriteBehind` writes what was queued in one transaction per `delay_s`, or as soon
as `max_rows` are waiting. The store that owns it flushes before every read of the same table, so
readers never miss a queued row, and `close` writes the rest at shutdown; a crash can lose the
last `delay_s` of rows, never the file's consistency.

What is written behind is never a request's purpose, so a batch the store refuses (a full disk)
is dropped and counted (`Database.skipped`), never raised into the request or the reader that
flushed it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import aiosqlite

from kirod.errors import StoreError
from kirod.storage.db import Database
from kirod.tasks import TaskOwner

T = TypeVar("T")

Write = Callable[[aiosqlite.Connection, Sequence[T]], Awaitable[None]]


class WriteBehind(Generic[T]):
    def __init__(
        self, db: Database, write: Write[T], *, name: str, delay_s: float, max_rows: int
    ) -> None:
        self._db = db
        self._write = write
        self._name = name
        self._delay_s = delay_s
        self._max_rows = max_rows
        self._pending: list[T] = []
        self._timer: asyncio.TimerHandle | None = None
        self._flushes = TaskOwner(f"{name}-write")
        self._flushing = asyncio.Lock()

    def add(self, row: T) -> None:
        """Queue `row`; it is written within `delay_s`, or at the next `flush`."""
        self._pending.append(row)
        if len(self._pending) >= self._max_rows:
            self._flush_in_background()
        elif self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._delay_s, self._flush_in_background)

    async def flush(self) -> None:
        """Write every queued row; serialised, so a reader waits for a batch being written. A
        batch the store refuses is dropped and counted."""
        async with self._flushing:
            batch, self._pending = self._pending, []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if batch:

                async def transaction(conn: aiosqlite.Connection) -> None:
                    await self._write(conn, batch)

                try:
                    await self._db.run_write(transaction)
                except StoreError as exc:
                    self._db.skipped(self._name, exc)

    async def close(self) -> None:
        """Write what is queued; for shutdown, before the database closes."""
        await self._flushes.join()
        await self.flush()

    def _flush_in_background(self) -> None:
        self._timer = None
        self._flushes.spawn(self.flush(), name="flush")
