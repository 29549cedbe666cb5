"""The spend per key and account per UTC day: kept by the operation log's own transaction,
built from the rows an older database already has, and not dropped with the log's rows."""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from pathlib import Path

from kirod.storage.db import MIGRATIONS, Database
from kirod.storage.oplog import Attempt, OpEntry, OpLog
from kirod.storage.spend import SpendStore

DAY = 86400
MIDNIGHT = 1_700_006_400.0  # 2023-11-15T00:00:00Z
ROW = OpEntry(
    at=MIDNIGHT + 3600,
    request_id="req",
    key_id="key-1",
    protocol="anthropic_messages",
    model="claude-sonnet-4-6",
    stream=True,
    account_id="acc-a",
    attempts=(Attempt("acc-a", "ok"),),
    stop_reason="end_turn",
    input_tokens=10,
    output_tokens=5,
    credits=0.1,
    ttfb_ms=100.0,
    total_ms=400.0,
    status=200,
    error=None,
    dropped=(),
)


def rows() -> list[OpEntry]:
    """Two days of one key on two accounts, a failure without credits, and a cache hit."""
    out = []
    for n in range(30):
        out.append(
            dataclasses.replace(
                ROW,
                at=MIDNIGHT + n * 3000,  # 30 rows over about a day and a bit
                request_id=f"req-{n}",
                account_id="acc-a" if n % 3 else "acc-b",
                credits=0.1 + n / 1000,
            )
        )
    out.append(dataclasses.replace(ROW, request_id="fail", credits=None, input_tokens=None,
                                   output_tokens=None, status=502, error="upstream"))  # fmt: skip
    out.append(dataclasses.replace(ROW, request_id="hit", account_id=None, credits=None))
    return out


def by_day(found: list[tuple[str, str, int, float]]) -> dict[tuple[str, str, int], float]:
    return {(scope, id_, day): round(credits, 9) for scope, id_, day, credits in found}


def expected(entries: list[OpEntry]) -> dict[tuple[str, str, int], float]:
    sums: dict[tuple[str, str, int], float] = {}
    for entry in entries:
        day = int(entry.at) // DAY
        for scope, id_ in (("key", entry.key_id), ("account", entry.account_id)):
            if id_ is not None:
                sums[(scope, id_, day)] = sums.get((scope, id_, day), 0.0) + (entry.credits or 0.0)
    return {key: round(value, 9) for key, value in sums.items()}


async def test_every_row_adds_to_its_key_and_account_day_and_retention_keeps_it(
    tmp_path: Path,
) -> None:
    entries = rows()
    async with Database(tmp_path / "kirod.db") as db:
        log = OpLog(db, flush_delay_s=3600.0, clock=lambda: MIDNIGHT + 2 * DAY)
        for entry in entries:
            log.append(entry)
        await log.flush()
        spend = SpendStore(db)
        found = await spend.since(0)
        assert by_day([(d.scope, d.id, d.day, d.credits) for d in found]) == expected(entries)
        key_days = await spend.since(0, scope="key")
        assert sum(d.requests for d in key_days) == len(entries)
        assert all(d.scope == "key" for d in key_days)
        await log.prune(before=MIDNIGHT + 2 * DAY, max_rows=0)  # every row goes
        assert not (await log.entries(limit=10))
        assert await spend.since(0) == found


async def test_the_migration_builds_the_spend_from_an_older_databases_rows(tmp_path: Path) -> None:
    entries = rows()
    newer = tmp_path / "newer.db"
    async with Database(newer) as db:
        log = OpLog(db, flush_delay_s=3600.0, clock=lambda: MIDNIGHT + 2 * DAY)
        for entry in entries:
            log.append(entry)
        await log.flush()
        want = await SpendStore(db).since(0)
    older = tmp_path / "older.db"
    async with Database(older, migrations=MIGRATIONS[:14]):
        pass  # the schema before budgets
    with contextlib.closing(sqlite3.connect(older)) as conn:
        conn.execute("ATTACH DATABASE ? AS newer", (str(newer),))
        columns = ", ".join(row[1] for row in conn.execute("PRAGMA main.table_info(oplog)"))
        with conn:
            conn.execute(f"INSERT INTO oplog SELECT {columns} FROM newer.oplog")  # noqa: S608
    async with Database(older) as db:  # migrated as it opens
        got = await SpendStore(db).since(0)
    assert [(d.scope, d.id, d.day, d.requests) for d in got] == [
        (d.scope, d.id, d.day, d.requests) for d in want
    ]
    assert [round(d.credits, 9) for d in got] == [round(d.credits, 9) for d in want]
