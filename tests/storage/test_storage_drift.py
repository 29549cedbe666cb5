"""The drift table: rows summed by day, kind and shape; bounded; pruned; read with the unwritten."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kirod import drift
from kirod.drift import Drift, Kind
from kirod.storage.db import Database
from kirod.storage.drift import KEEP_DAYS, DriftBook, DriftStore

DAY = 86_400.0
T0 = 1_790_000_000.0


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with Database(tmp_path / "kirod.db") as database:
        yield database


async def test_flushes_sum_into_one_row_and_reads_include_the_unwritten(db: Database) -> None:
    now = [T0]
    book = DriftBook(Drift(clock=lambda: now[0]), DriftStore(db))
    book.observed.observe(Kind.STOP_REASON, "generateAssistantResponse", stop_reason="PAUSED")
    await book.flush()
    now[0] += 60
    book.observed.observe(Kind.STOP_REASON, "generateAssistantResponse", stop_reason="PAUSED")
    (record,) = await book.since(T0 - 1)  # one written, one not yet: summed
    assert (record.count, record.first_seen, record.last_seen) == (2, T0, T0 + 60)
    await book.flush()
    (row,) = await DriftStore(db).since(0)
    assert (row.count, row.shape) == (2, (("stop_reason", "PAUSED"),))
    assert await book.since(T0 + 61) == []


async def test_a_restarted_daemon_adds_no_more_shapes_than_the_day_allows(db: Database) -> None:
    store = DriftStore(db)
    for run in range(2):  # two daemon runs the same day, each within its own bound
        recorder = Drift(clock=lambda: T0)
        for number in range(drift.MAX_SHAPES_PER_DAY):
            recorder.observe(Kind.CATALOG_FIELD, "ListAvailableModels", field=f"f{run}x{number}")
        await store.add(recorder.take())
    rows = await store.since(0)
    assert len(rows) == drift.MAX_SHAPES_PER_DAY + 1
    assert sum(r.count for r in rows) == 2 * drift.MAX_SHAPES_PER_DAY
    assert [r.count for r in rows if r.where == drift.OTHER] == [drift.MAX_SHAPES_PER_DAY]


async def test_old_days_are_pruned(db: Database) -> None:
    store = DriftStore(db)
    for age_days in (KEEP_DAYS + 2, 1):
        recorder = Drift(clock=lambda age=age_days: T0 - age * DAY)
        recorder.observe(Kind.USAGE_FIELD, "getUsageLimits", field="newLimit")
        await store.add(recorder.take())
    assert await store.prune(now=T0) == 1
    (kept,) = await store.since(0)
    assert kept.last_seen == T0 - DAY
