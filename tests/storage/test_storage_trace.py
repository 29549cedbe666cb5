"""What `kiroctl trace` and `GET /v1/usage` read from the operation log."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kirod.storage.db import Database
from kirod.storage.oplog import MAX_TRACE_ROWS, Attempt, OpEntry, OpLog

ROW = OpEntry(
    at=1000.0,
    request_id="req_1",
    key_id="key-1",
    protocol="anthropic_messages",
    model="claude-sonnet-4-6",
    stream=True,
    account_id="acc-b",
    attempts=(
        Attempt(
            "acc-a",
            "throttled",
            region="us-east-1",
            model="claude-sonnet-4.6",
            status=429,
            reason="ThrottlingException",
            ms=12.5,
        ),
        Attempt("acc-b", "bearer", region="eu-central-1", model="claude-sonnet-4.6", ms=20.0),
        Attempt(
            "acc-b",
            "ok",
            region="eu-central-1",
            model="claude-sonnet-4.6",
            ms=40.0,
            frames=17,
            bytes_read=5321,
        ),
    ),
    stop_reason="tool_use",
    input_tokens=100,
    output_tokens=20,
    credits=0.5,
    ttfb_ms=41.0,
    total_ms=900.0,
    status=200,
    error=None,
    dropped=(),
    truncations=1,
    continuations=1,
    cuts=1,
)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with Database(tmp_path / "kirod.db") as database:
        yield database


async def test_attempts_keep_what_the_trace_shows(db: Database) -> None:
    log = OpLog(db)
    log.append(ROW)
    [row] = await log.entries()
    assert row == ROW


async def test_rows_written_before_the_trace_fields_still_read(db: Database) -> None:
    log = OpLog(db)
    log.append(ROW)
    await log.flush()
    legacy = json.dumps(
        [{"account": "acc-a", "outcome": "quota"}, {"account": "acc-b", "outcome": "ok"}]
    )
    await db.execute("UPDATE oplog SET attempts = ?", (legacy,))
    [traced] = (await log.trace(request_id="req_1")).requests
    assert [
        (a.account_id, a.outcome, a.region, a.frames, a.bytes_read) for a in traced.attempts
    ] == [
        ("acc-a", "quota", None, None, None),
        ("acc-b", "ok", None, None, None),
    ]
    assert traced.attempts[1].failover_reason == "quota"


async def test_a_trace_explains_each_attempt(db: Database) -> None:
    log = OpLog(db)
    log.append(ROW)
    trace = await log.trace(request_id="req_1")
    [row] = trace.requests
    assert trace.cursor == row.id
    first, bearer, ok = row.attempts
    assert (first.upstream_status, first.upstream_reason, first.failover_reason) == (
        429,
        "ThrottlingException",
        None,
    )
    assert bearer.failover_reason == "throttled"  # moved from acc-a to acc-b
    assert ok.failover_reason == "retried after bearer"  # same account, a refreshed token
    assert (ok.frames, ok.bytes_read, ok.region, ok.ended_ms) == (17, 5321, "eu-central-1", 40.0)
    assert first.bytes_read is None  # only the attempt that answered read an answer
    assert row.recovered
    assert row.truncations == 1
    assert row.cuts == 1  # an answer Kiro ended without its tail frames
    doc = row.to_json()
    assert doc["recovered"] is True
    assert doc["attempts"][0]["model"] == "claude-sonnet-4.6"
    assert type(row).from_json(json.loads(json.dumps(doc))) == row
    assert (await log.trace(request_id="req_nope")).requests == ()


async def test_last_and_after_follow_the_log(db: Database) -> None:
    log = OpLog(db)
    assert (await log.trace(last=5)).cursor == 0
    for n in range(5):
        log.append(dataclasses.replace(ROW, request_id=f"req_{n}", at=1000.0 + n))
    last = await log.trace(last=2)
    assert [row.request_id for row in last.requests] == ["req_3", "req_4"]  # oldest first
    empty = await log.trace(last=0)  # no row, only the cursor to follow the log from
    assert empty.requests == ()
    assert empty.cursor == last.cursor
    assert (await log.trace(after=last.cursor)).requests == ()
    assert (await log.trace(after=last.cursor)).cursor == last.cursor
    log.append(dataclasses.replace(ROW, request_id="req_new", at=2000.0))
    new = await log.trace(after=last.cursor)
    assert [row.request_id for row in new.requests] == ["req_new"]
    assert new.cursor > last.cursor
    assert len((await log.trace(after=0)).requests) == 6
    assert len((await log.trace(last=10**6)).requests) <= MAX_TRACE_ROWS


async def test_key_credits_count_one_key_from_a_time(db: Database) -> None:
    log = OpLog(db)
    log.append(ROW)
    log.append(dataclasses.replace(ROW, at=3000.0, credits=1.25))
    log.append(dataclasses.replace(ROW, at=3000.0, credits=None))
    log.append(dataclasses.replace(ROW, key_id="key-2", at=3000.0, credits=7.0))
    assert await log.key_credits("key-1", since=0) == (3, 1.75)
    assert await log.key_credits("key-1", since=2000.0) == (2, 1.25)
    assert await log.key_credits("key-3", since=0) == (0, 0.0)
