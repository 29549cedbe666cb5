"""The write-behind against a slow store: a real SQLite file whose write lock a second connection
holds, so every flush waits on the file (issue 47: a flush was stacked per delay, 72 after 30 s)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import aiosqlite

from kirod.storage.behind import WriteBehind
from kirod.storage.db import Database

DELAY_S = 0.02
NAME = "rows"


def flushes() -> int:
    """Background flushes of the write-behind queued or running, as the event loop has them."""
    return sum(
        1
        for task in asyncio.all_tasks()
        if task.get_name() == f"{NAME}-write:flush" and not task.done()
    )


async def test_a_slow_store_delays_one_batch_instead_of_stacking_flushes(tmp_path: Path) -> None:
    path = tmp_path / "kirod.db"
    batches: list[int] = []
    async with Database(path, busy_timeout=30.0) as db:
        await db.execute("CREATE TABLE queued (n INTEGER NOT NULL)")

        async def write(conn: aiosqlite.Connection, rows: Sequence[int]) -> None:
            await conn.executemany("INSERT INTO queued (n) VALUES (?)", [(n,) for n in rows])
            batches.append(len(rows))

        behind = WriteBehind[int](db, write, name=NAME, delay_s=DELAY_S, max_rows=8)
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")  # the file is another writer's for now
            most = 0
            for n in range(200):  # 40 delays' worth, and 25 times max_rows
                behind.add(n)
                await asyncio.sleep(DELAY_S / 5)
                most = max(most, flushes())
            assert most == 1
            assert batches == []  # nothing could be written meanwhile
            other.execute("COMMIT")
        await behind.close()
        rows = await db.read("SELECT n FROM queued ORDER BY rowid")
    assert [row["n"] for row in rows] == list(range(200))  # each once, in order
    assert len(batches) == 2  # the batch that waited, then everything queued behind it
