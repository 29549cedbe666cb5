"""Stored Responses on a real SQLite file: the byte cap and retention, and the running total the
cap reads instead of summing the table on every put (issue 47)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kirod.storage.db import MIGRATIONS, Database
from kirod.storage.responses import ResponseStore, StoredResponse


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with Database(tmp_path / "kirod.db") as database:
        yield database


def stored(
    rid: str, *, at: float | None = None, text: str = "hi", tenant: str = "key-1"
) -> StoredResponse:
    return StoredResponse(
        id=rid,
        tenant=tenant,
        created_at=time.time() if at is None else at,
        model="gpt-5",
        previous_id=None,
        response={"id": rid, "output_text": text},
        input_items=[{"role": "user", "content": text}],
        history=[{"role": "user", "content": text}, {"role": "assistant", "content": text}],
    )


async def insert(db: Database, response: StoredResponse) -> None:
    """A row written as an older kirod wrote it, without the running total."""
    parts = [json.dumps(p) for p in (response.response, response.input_items, response.history)]
    await db.execute(
        "INSERT INTO responses (id, tenant, created_at, model, previous_id, response,"
        " input_items, history, size) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?)",
        (response.id, response.tenant, response.created_at, response.model, *parts,
         sum(map(len, parts))),
    )  # fmt: skip


async def fresh(db: Database) -> tuple[int, int]:
    row = await db.read_one("SELECT count(*), COALESCE(SUM(size), 0) FROM responses")
    assert row is not None
    return int(row[0]), int(row[1])


async def running(db: Database) -> tuple[int, int]:
    row = await db.read_one("SELECT rows, bytes FROM responses_total")
    assert row is not None
    return int(row[0]), int(row[1])


async def test_beyond_the_byte_cap_the_oldest_responses_go_first(db: Database) -> None:
    probe = ResponseStore(db, max_age_s=3600.0, max_bytes=10**9)
    await probe.put(stored("probe", text="x" * 100))
    size = (await fresh(db))[1]
    assert await probe.delete("probe", "key-1")
    store = ResponseStore(db, max_age_s=3600.0, max_bytes=3 * size + size // 2)
    now = time.time()
    for n in range(6):
        await store.put(stored(f"r{n}", at=now + n, text="y" * 100))  # the same size each
    kept = [n for n in range(6) if await store.get(f"r{n}", "key-1") is not None]
    assert kept == [3, 4, 5]
    assert (await fresh(db))[1] <= store.max_bytes
    await store.put(stored("huge", at=now + 10, text="z" * (4 * size)))  # beyond the whole cap
    assert await store.get("huge", "key-1") is None
    assert await fresh(db) == (0, 0)


async def test_a_response_older_than_the_retention_is_neither_answered_nor_kept(
    db: Database,
) -> None:
    store = ResponseStore(db, max_age_s=60.0, max_bytes=10**9)
    await insert(db, stored("old", at=time.time() - 120))  # left by an earlier run
    assert await store.get("old", "key-1") is None  # expired, though still in the file
    await store.put(stored("new"))  # a put takes the expired rows out
    assert await store.get("new", "key-1") is not None
    rows = await db.read("SELECT id FROM responses")
    assert [row["id"] for row in rows] == ["new"]


async def test_the_running_total_equals_a_fresh_sum_after_puts_prunes_and_deletes(
    db: Database,
) -> None:
    rng = random.Random(47)
    store = ResponseStore(db, max_age_s=50.0, max_bytes=6_000)
    now = time.time()
    ids: list[str] = []
    for step in range(400):
        choice = rng.random()
        if choice < 0.6 or not ids:  # a new response, sometimes one already past retention
            rid = f"r{step}"
            ids.append(rid)
            age = 100.0 if rng.random() < 0.1 else rng.random() * 10
            await store.put(stored(rid, at=now - age, text="a" * rng.randrange(10, 900)))
        elif choice < 0.8:  # the same id stored again (a replaced row)
            rid = rng.choice(ids)
            await store.put(stored(rid, at=now, text="b" * rng.randrange(10, 900)))
        else:  # deleted, by its tenant or by another one (then nothing goes)
            tenant = rng.choice(("key-1", "key-2"))
            await store.delete(rng.choice(ids), tenant)
        assert await running(db) == await fresh(db), step
        assert (await fresh(db))[1] <= store.max_bytes
    assert (await fresh(db))[0] > 0


async def test_the_running_totals_start_from_the_rows_an_older_database_holds(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kirod.db"
    totals = next(n for n, script in enumerate(MIGRATIONS) if "responses_total (" in script)
    async with Database(path, migrations=MIGRATIONS[:totals]) as older:
        for n in range(5):
            await insert(older, stored(f"r{n}", text="c" * (n * 50)))
            await older.execute(
                "INSERT INTO response_cache (key_id, hash, created_at, expires_at, bytes, body)"
                " VALUES ('key-1', ?, 0, 0, ?, '')",
                (f"h{n}", 10 * n),
            )
        before = await fresh(older)
    async with Database(path) as db:
        assert await running(db) == before
        cached = await db.read_one("SELECT rows, bytes FROM response_cache_total")
        assert cached is not None
        assert tuple(cached) == (5, 100)
        store = ResponseStore(db, max_age_s=3600.0, max_bytes=10**9)
        await store.put(stored("r9"))
        assert await store.delete("r0", "key-1")
        assert await running(db) == await fresh(db)
