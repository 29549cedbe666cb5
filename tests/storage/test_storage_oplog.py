"""The operation log: rows, statistics for `kiroctl stats`, retention; and affinity rows."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kirod.report_types import Stats
from kirod.storage.affinity import AffinityStore
from kirod.storage.db import Database
from kirod.storage.oplog import FLUSH_ROWS, Attempt, OpEntry, OpLog, Percentiles

BASE = OpEntry(
    at=1000.0,
    request_id="req_1",
    key_id="key-1",
    protocol="anthropic_messages",
    model="claude-sonnet-4-6",
    stream=True,
    account_id="acc-a",
    attempts=(Attempt("acc-b", "throttled"), Attempt("acc-a", "ok")),
    stop_reason="end_turn",
    input_tokens=100,
    output_tokens=20,
    credits=0.5,
    ttfb_ms=100.0,
    total_ms=900.0,
    status=200,
    error=None,
    dropped=("temperature", "top_p"),
)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with Database(tmp_path / "kirod.db") as database:
        yield database


async def test_rows_round_trip_newest_first(db: Database) -> None:
    log = OpLog(db)
    log.append(BASE)
    log.append(dataclasses.replace(BASE, at=2000.0, request_id="req_2", dropped=()))
    rows = await log.entries()
    assert [row.request_id for row in rows] == ["req_2", "req_1"]
    assert rows[1] == BASE
    assert [row.request_id for row in await log.entries(since=1500.0)] == ["req_2"]
    assert len(await log.entries(limit=1)) == 1


async def count_rows(db: Database) -> int:
    row = await db.read_one("SELECT count(*) FROM oplog")
    assert row is not None
    return int(row[0])


async def test_rows_are_batched_and_written_without_a_reader(db: Database) -> None:
    log = OpLog(db, flush_delay_s=0.05)
    for n in range(5):
        log.append(dataclasses.replace(BASE, request_id=f"req_{n}"))
    assert await count_rows(db) == 0  # queued, not yet written
    for _ in range(100):
        await asyncio.sleep(0.02)
        if await count_rows(db) == 5:
            break
    assert await count_rows(db) == 5


async def test_a_full_batch_is_written_at_once_and_close_writes_the_rest(db: Database) -> None:
    log = OpLog(db, flush_delay_s=3600.0)
    for n in range(FLUSH_ROWS):
        log.append(dataclasses.replace(BASE, request_id=f"req_{n}"))
    for _ in range(100):
        await asyncio.sleep(0.02)
        if await count_rows(db) == FLUSH_ROWS:
            break
    assert await count_rows(db) == FLUSH_ROWS
    for n in range(3):
        log.append(dataclasses.replace(BASE, request_id=f"late_{n}"))
    await log.close()
    assert await count_rows(db) == FLUSH_ROWS + 3


async def test_stats(db: Database) -> None:
    log = OpLog(db)
    for n in range(1, 101):
        log.append(dataclasses.replace(BASE, at=1000.0 + n, ttfb_ms=float(n)))
    log.append(
        dataclasses.replace(
            BASE,
            at=2000.0,
            model="gpt-5",
            account_id="acc-b",
            key_id="key-2",
            status=429,
            error="accounts_cooling_down",
            ttfb_ms=None,
            credits=None,
            input_tokens=None,
            output_tokens=None,
        )
    )
    log.append(
        dataclasses.replace(BASE, at=2001.0, error="upstream_throttled", ttfb_ms=None, credits=0.25)
    )
    stats = await log.stats()
    assert (stats.requests, stats.succeeded) == (102, 100)
    assert stats.success_rate == pytest.approx(100 / 102)
    # Nearest rank over the rollup's histogram: the middle of the bucket of the 50th, 95th and
    # 99th value (1 ms wide below 64 ms, then 2 ms wide up to 128 ms).
    assert stats.ttfb_ms == Percentiles(p50=50.5, p95=95.0, p99=99.0)
    assert (stats.input_tokens, stats.output_tokens, stats.credits) == (10100, 2020, 50.25)
    assert [(g.key, g.requests, g.errors) for g in stats.accounts] == [
        ("acc-a", 101, 1),
        ("acc-b", 1, 1),
    ]
    assert [(g.key, g.requests) for g in stats.models] == [("claude-sonnet-4-6", 101), ("gpt-5", 1)]
    assert [(g.key, g.requests, g.errors) for g in stats.keys] == [
        ("key-1", 101, 1),
        ("key-2", 1, 1),
    ]
    assert stats.errors == {"accounts_cooling_down": 1, "upstream_throttled": 1}
    recent = await log.stats(since=1999.0)
    assert (recent.requests, recent.succeeded, recent.ttfb_ms) == (2, 0, None)
    assert recent.to_json()["success_rate"] == 0.0
    empty = await OpLog(db).stats(since=10**9)
    assert (empty.requests, empty.success_rate, empty.ttfb_ms) == (0, None, None)


async def test_affinity_rows_rebind_and_lapse(db: Database) -> None:
    store = AffinityStore(db)
    store.put("h1", "acc-a", "conv-1", now=100.0)
    binding = await store.get("h1", used_since=50.0)
    assert binding is not None
    assert (binding.account_id, binding.conversation_id) == ("acc-a", "conv-1")
    store.put("h1", "acc-b", "conv-2", now=200.0)
    rebound = await store.get("h1", used_since=50.0)
    assert rebound is not None
    assert (rebound.account_id, rebound.conversation_id, rebound.last_used_at) == (
        "acc-b",
        "conv-2",
        200.0,
    )
    assert await store.get("h1", used_since=201.0) is None
    assert await store.prune(used_before=300.0) == 1
    assert await store.get("h1", used_since=0.0) is None


async def test_stats_per_utc_day(db: Database) -> None:
    log = OpLog(db)
    day = 86_400.0
    for at, credits, error in (
        (2 * day - 1, 0.5, None),  # 1970-01-02, last second
        (2 * day, 0.25, None),  # 1970-01-03
        (2 * day + 60, 0.125, "upstream_throttled"),
    ):
        log.append(dataclasses.replace(BASE, at=at, credits=credits, error=error))
    stats = await log.stats()
    assert [(g.key, g.requests, g.errors, g.credits) for g in stats.days] == [
        ("1970-01-02", 1, 0, 0.5),
        ("1970-01-03", 2, 1, 0.375),
    ]
    assert Stats.from_json(stats.to_json()).days == stats.days


async def test_stats_count_cut_tool_calls_and_recovered_requests(db: Database) -> None:
    log = OpLog(db)
    log.append(BASE)
    recovered = dataclasses.replace(BASE, request_id="req_2", truncations=1, continuations=1)
    failed = dataclasses.replace(
        BASE, request_id="req_3", truncations=2, continuations=1, error="tool_input_truncated"
    )
    log.append(recovered)
    log.append(failed)
    assert (await log.entries())[0:2] == [failed, recovered]
    stats = await log.stats()
    assert (stats.truncated, stats.recovered) == (2, 1)
    assert (stats.truncation_rate, stats.recovery_rate) == (2 / 3, 0.5)
    assert Stats.from_json(stats.to_json()) == stats
