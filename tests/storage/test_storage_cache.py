"""The response cache's table: per-key rows, the TTL, the byte bound (oldest out first), clear."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kirod.storage.cache import CacheStore
from kirod.storage.db import Database


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with Database(tmp_path / "kirod.db") as database:
        yield database


async def test_an_answer_is_found_by_its_key_and_hash_only(db: Database) -> None:
    store = CacheStore(db, ttl_s=60.0, max_bytes=1000)
    store.put("key-1", "h1", "body one")
    assert await store.get("key-1", "h1") == "body one"  # the queued row is flushed first
    assert await store.get("key-2", "h1") is None  # another key's entries are not its own
    assert await store.get("key-1", "h2") is None
    usage = await store.usage()
    assert (usage.entries, usage.bytes) == (1, len("body one"))
    await store.close()


async def test_an_answer_expires_after_its_ttl(db: Database) -> None:
    store = CacheStore(db, ttl_s=0.05, max_bytes=1000)
    store.put("key-1", "h1", "soon gone")
    await store.usage()  # written now
    await asyncio.sleep(0.1)
    assert await store.get("key-1", "h1") is None
    assert (await store.usage()).entries == 0
    store.put("key-1", "h2", "fresh")  # a write sweeps the expired rows out
    await store.usage()
    rows = await db.read("SELECT hash FROM response_cache")
    assert [row["hash"] for row in rows] == ["h2"]
    await store.close()


async def test_beyond_the_byte_bound_the_oldest_answers_go_first(db: Database) -> None:
    store = CacheStore(db, ttl_s=60.0, max_bytes=25)
    for index in range(4):
        store.put("key-1", f"h{index}", f"answer-{index}")  # 8 bytes each
        await store.usage()
    assert [await store.get("key-1", f"h{i}") for i in range(4)] == [
        None,
        "answer-1",
        "answer-2",
        "answer-3",
    ]
    assert (await store.usage()).bytes == 24
    store.put("key-1", "huge", "x" * 26)  # larger than the whole bound: never kept
    assert await store.get("key-1", "huge") is None
    assert (await store.usage()).entries == 3
    await store.close()


async def test_clear_drops_every_row_and_close_writes_what_is_queued(tmp_path: Path) -> None:
    async with Database(tmp_path / "kirod.db") as db:
        store = CacheStore(db, ttl_s=60.0, max_bytes=1000)
        store.put("key-1", "h1", "a")
        store.put("key-2", "h2", "b")
        assert await store.clear() == 2
        assert (await store.usage()).entries == 0
        store.put("key-1", "h3", "kept at shutdown")
        await store.close()
    async with Database(tmp_path / "kirod.db") as db:
        assert await CacheStore(db, ttl_s=60.0, max_bytes=1000).get("key-1", "h3") == (
            "kept at shutdown"
        )


async def test_the_running_total_equals_a_fresh_sum_after_puts_prunes_and_clears(
    db: Database,
) -> None:
    rng = random.Random(47)
    store = CacheStore(db, ttl_s=60.0, max_bytes=2_000)
    for step in range(300):
        if rng.random() < 0.02:
            await store.clear()
        else:  # a new hash, or one already cached (a replaced row), some beyond the bound
            store.put(
                rng.choice(("key-1", "key-2")), f"h{rng.randrange(40)}", "a" * rng.randrange(1, 500)
            )
            await store.usage()  # written now, and pruned in the same transaction
        total = await db.read_one("SELECT rows, bytes FROM response_cache_total")
        summed = await db.read_one("SELECT count(*), COALESCE(SUM(bytes), 0) FROM response_cache")
        assert total is not None
        assert summed is not None
        assert tuple(total) == tuple(summed), step
        assert summed[1] <= store.max_bytes
    await store.close()
