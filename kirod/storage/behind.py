"""Write-behind: rows queued by the request path and written in batches, off it.

A transaction per request was the largest single cost of a small request (a thread hop and a
commit each). A `WriteBehind` writes what was queued in one transaction per `delay_s`, or as soon
as `max_rows` are waiting. The store that owns it flushes before every read of the same table, so
readers never miss a queued row, and `close` writes the rest at shutdown; a crash can lose the
last `delay_s` of rows, never the file's consistency.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import aiosqlite

from kirod import log
from kirod.errors import DatabaseDamaged, StoreError
from kirod.storage.db import Database
from kirod.tasks import TaskOwner

logger = logging.getLogger(__name__)

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
        """Write every queued row; serialised, so a reader waits for a batch being written."""
        async with self._flushing:
            batch, self._pending = self._pending, []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if batch:

                async def transaction(conn: aiosqlite.Connection) -> None:
                    await self._write(conn, batch)

                await self._db.run_write(transaction)

    async def close(self) -> None:
        """Write what is queued; for shutdown, before the database closes."""
        await self._flushes.join()
        await self._flush_logged()

    def _flush_in_background(self) -> None:
        self._timer = None
        self._flushes.spawn(self._flush_logged(), name="flush")

    async def _flush_logged(self) -> None:
        try:
            await self.flush()
        except DatabaseDamaged:
            pass  # the store is read-only; it said so once, when it found the damage
        except StoreError as exc:
            log.event(logger, f"{self._name}_write_failed", level=logging.ERROR, error=str(exc))
