"""Write-behind: rows queued by the request path and written in batches, off it.

A transaction per request was the largest single cost of a small request (a thread hop and a
commit each). A `WriteBehind` writes what was queued in one transaction per `delay_s`, or as soon
as `max_rows` are waiting. The store that owns it flushes before every read of the same table, so
readers never miss a queued row, and `close` writes the rest at shutdown.

At most one background flush is queued or running: rows that arrive meanwhile wait for it and go
in the next batch, written as soon as it ends if they have waited `delay_s` by then (issue 47: a
slow store used to stack a flush per `delay_s`, 72 after 30 s, each waiting for the store's lock
and rows written seconds late). So a crash loses the rows queued in the last `delay_s` plus the
time of at most two transactions (the one being written when a row came, then its own), never the
file's consistency.

What is written behind is never a request's purpose, so a batch the store refuses (a full disk)
is dropped and counted (`Database.skipped`), never raised into the request or the reader that
flushed it.
"""

from __future__ import annotations

import asyncio
import time
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
        self._oldest_at = 0.0  # when the oldest pending row was queued (monotonic)
        self._timer: asyncio.TimerHandle | None = None
        self._flushes = TaskOwner(f"{name}-write")
        self._flushing = asyncio.Lock()
        self._background = False  # a background flush is queued or running

    def add(self, row: T) -> None:
        """Queue `row`; it is written within `delay_s` (and the flush before it), or at the
        next `flush`."""
        if not self._pending:
            self._oldest_at = time.monotonic()
        self._pending.append(row)
        if self._background:
            return  # the flush queued or running schedules the next batch when it ends
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
        if self._timer is not None:
            self._timer.cancel()  # when `max_rows` came first
            self._timer = None
        if self._background:
            return
        self._background = True
        self._flushes.spawn(self._flush_then_next(), name="flush")

    async def _flush_then_next(self) -> None:
        try:
            await self.flush()
        finally:
            self._background = False
            self._schedule_rest()

    def _schedule_rest(self) -> None:
        """After a background flush: the rows queued meanwhile, now if they waited long enough."""
        if not self._pending or self._timer is not None:
            return
        left = self._delay_s - (time.monotonic() - self._oldest_at)
        if left <= 0 or len(self._pending) >= self._max_rows:
            self._flush_in_background()
        else:
            self._timer = asyncio.get_running_loop().call_later(left, self._flush_in_background)
