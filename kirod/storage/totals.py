"""Byte bounds that read running totals, not the table: for the stores that keep text up to a
size (stored Responses, the response cache), pruned in the transaction of every write.

Each bounded table has a one-row `<table>_total` (rows, bytes) that triggers keep in the same
transaction as every insert, update and delete (schema migration 14 made them and started them
from the rows there were); so a write reads one row to know the total, and the oldest rows by
the table's `created_at` index to bring it back under the bound. Summing the table instead was a
full scan per write that grew with the store and held the one writer's lock (issue 47).
Writers upsert rather than `INSERT OR REPLACE`: the rows REPLACE deletes fire no delete trigger.
"""

from __future__ import annotations

import json

import aiosqlite

OLDEST_PER_READ = 16  # the oldest rows one read takes while bringing a total under its bound


async def total_bytes(conn: aiosqlite.Connection, table: str) -> int:
    """The running total of `table`'s sizes."""
    rows = list(await conn.execute_fetchall(f"SELECT bytes FROM {table}_total"))  # noqa: S608
    return int(rows[0][0]) if rows else 0


async def drop_oldest(
    conn: aiosqlite.Connection, table: str, *, key: str, size: str, max_bytes: int
) -> None:
    """Delete `table`'s oldest rows (by `created_at`; `key` names them, `size` their bytes)
    until its total is at most `max_bytes`."""
    excess = await total_bytes(conn, table) - max_bytes
    while excess > 0:
        oldest = await conn.execute_fetchall(
            f"SELECT {key}, {size} FROM {table} ORDER BY created_at LIMIT ?",  # noqa: S608
            (OLDEST_PER_READ,),
        )
        gone: list[object] = []
        for row in oldest:
            if excess <= 0:
                break
            gone.append(row[0])
            excess -= row[1]
        if not gone:
            return
        await conn.execute(
            f"DELETE FROM {table} WHERE {key} IN (SELECT value FROM json_each(?))",  # noqa: S608
            (json.dumps(gone),),
        )
