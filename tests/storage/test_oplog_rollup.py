"""The operation log's rollups agree with its rows: as rows are written in batches, after
retention drops some (by age, by count, a few at a time), after a restart, and when the schema
migration builds them from the rows of an older database.

Each check compares `stats()`, `traffic()` and `key_credits()` with the same figures computed
here, in Python, from the rows themselves (`entries()`), over ranges that start and end on and
between the slots of every level; and the rollup as stored with one aggregation of the rows.
The rows end about now, since the migration keeps 10-second slots for the real clock's last two
hours.
"""

from __future__ import annotations

import contextlib
import math
import random
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kirod.report_types import TRAFFIC_WINDOWS
from kirod.storage import rollup
from kirod.storage.db import MIGRATIONS, Database
from kirod.storage.oplog import UNKNOWN_MODEL, Attempt, OpEntry, OpLog

HOUR = 3600.0
SPAN_H = 30  # the rows cover 30 hours, up to `NOW`
NOW = (int(time.time()) // 3600 + 1) * HOUR - 100.0  # 100 s before the next hour begins
START = NOW + 100.0 - SPAN_H * HOUR  # an hour's first instant
ACCOUNTS = ("acc-a", "acc-b", "acc-c", None)
MODELS = ("claude-sonnet-4-6", "claude-opus-4-6", "gpt-5")
FAILURES = (  # (status, error)
    (200, None),
    (200, None),
    (200, None),
    (200, None),
    (200, "upstream_protocol"),
    (429, "accounts_cooling_down"),
    (499, None),
    (502, None),
    (404, "model_not_found"),
)


def rows(count: int, seed: int) -> list[OpEntry]:
    """Rows of every kind, at random instants, some on the first instant of an hour or of a
    recent 10-second slot, or just before it."""
    rng = random.Random(seed)
    made = []
    for number in range(count):
        edge = rng.choice(
            (START + rng.randrange(SPAN_H) * HOUR, NOW - 100 - rng.randrange(720) * 10)
        )
        at = rng.choice((edge, math.nextafter(edge, 0), START + rng.random() * (NOW - START)))
        status, error = rng.choice(FAILURES)
        ttfb = rng.choice((None, rng.random() * 70, rng.lognormvariate(6.5, 1.2)))
        made.append(
            OpEntry(
                at=at,
                request_id=f"req-{seed}-{number}",
                key_id=rng.choice(("key-1", "key-2")),
                protocol="anthropic_messages",
                model=f"nope-{number}" if error == "model_not_found" else rng.choice(MODELS),
                stream=rng.random() < 0.5,
                account_id=rng.choice(ACCOUNTS),
                attempts=(Attempt("acc-a", "ok"),),
                stop_reason=None,
                input_tokens=rng.choice((None, rng.randrange(50_000))),
                output_tokens=rng.choice((None, rng.randrange(5_000))),
                credits=rng.choice((None, round(rng.random(), 4))),
                ttfb_ms=ttfb,
                total_ms=1000.0,
                status=status,
                error=error,
                dropped=(),
                truncations=rng.choice((0, 0, 0, 1, 2)),
                continuations=rng.choice((0, 0, 1)),
            )
        )
    return made


def succeeded(entry: OpEntry) -> bool:
    return entry.status < 400 and entry.error is None


def groups(entries: Iterable[OpEntry], key: Any) -> list[tuple[str, int, int, float]]:
    """(key, requests, errors, credits), most requests first, as `kiroctl stats` lists them."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for entry in entries:
        name = key(entry)
        if name is not None:
            sums[name][0] += 1
            sums[name][1] += not succeeded(entry)
            sums[name][2] += entry.credits or 0.0
    return sorted(
        ((name, int(r), int(e), pytest.approx(c, abs=1e-6)) for name, (r, e, c) in sums.items()),
        key=lambda group: (-group[1], group[0]),
    )


def day(at: float) -> str:
    """The UTC day of the row's whole second (`fromtimestamp` would round to the microsecond)."""
    return datetime.fromtimestamp(int(at), UTC).strftime("%Y-%m-%d")


def nearest_rank(values: list[float], fraction: float) -> float:
    """What the histogram reports: the middle of the bucket of the nearest-rank value."""
    ordered = sorted(values)
    return rollup.bucket_middle(
        rollup.bucket(ordered[max(1, math.ceil(fraction * len(ordered))) - 1])
    )


async def check_stats(log: OpLog, since: float | None) -> None:
    stats = await log.stats(since=since)
    kept = [entry for entry in await log.entries(limit=10**9) if entry.at >= (since or 0.0)]
    assert (stats.requests, stats.succeeded) == (len(kept), sum(map(succeeded, kept)))
    assert stats.input_tokens == sum(entry.input_tokens or 0 for entry in kept)
    assert stats.output_tokens == sum(entry.output_tokens or 0 for entry in kept)
    assert stats.credits == pytest.approx(sum(entry.credits or 0.0 for entry in kept), abs=1e-6)
    assert stats.truncated == sum(entry.truncations > 0 for entry in kept)
    assert stats.recovered == sum(entry.continuations > 0 and succeeded(entry) for entry in kept)
    timed = [entry.ttfb_ms for entry in kept if entry.ttfb_ms is not None]
    if timed:
        assert stats.ttfb_ms is not None
        assert (stats.ttfb_ms.p50, stats.ttfb_ms.p95, stats.ttfb_ms.p99) == tuple(
            nearest_rank(timed, fraction) for fraction in (0.50, 0.95, 0.99)
        )
    else:
        assert stats.ttfb_ms is None

    def model(entry: OpEntry) -> str:
        return UNKNOWN_MODEL if entry.error == "model_not_found" else entry.model

    def as_rows(found: Iterable[Any]) -> list[tuple[str, int, int, float]]:
        return [(g.key, g.requests, g.errors, g.credits) for g in found]

    assert as_rows(stats.accounts) == groups(kept, lambda entry: entry.account_id)
    assert as_rows(stats.models) == groups(kept, model)
    assert as_rows(stats.keys) == groups(kept, lambda entry: entry.key_id)
    assert as_rows(stats.days) == sorted(groups(kept, lambda entry: day(entry.at)))
    assert stats.errors == dict(
        sorted(
            Counter(entry.error for entry in kept if entry.error).items(),
            key=lambda item: (-item[1], item[0]),
        )
    )


async def check_traffic(log: OpLog, window: str) -> None:
    traffic = await log.traffic(window)
    count, bucket_s = TRAFFIC_WINDOWS[window]
    until = traffic.since + count * bucket_s
    inside = [e for e in await log.entries(limit=10**9) if traffic.since <= e.at < until]
    by_slot: dict[int, list[OpEntry]] = defaultdict(list)
    for entry in inside:
        by_slot[int((int(entry.at) - traffic.since) // bucket_s)].append(entry)
    for index, bucket in enumerate(traffic.buckets):
        slot = by_slot.get(index, [])
        assert (bucket.requests, bucket.errors) == (
            len(slot),
            sum(not succeeded(e) for e in slot),
        ), (window, index)
        assert bucket.credits == pytest.approx(sum(e.credits or 0.0 for e in slot), abs=1e-6)
        timed = [e.ttfb_ms for e in slot if e.ttfb_ms is not None]
        expected = [nearest_rank(timed, f) for f in (0.50, 0.95)] if timed else [None, None]
        assert [bucket.ttfb_p50_ms, bucket.ttfb_p95_ms] == expected, (window, index)
    failures = Counter(e.error or f"http_{e.status}" for e in inside if not succeeded(e))
    assert traffic.errors == dict(sorted(failures.items(), key=lambda item: (-item[1], item[0])))
    spent: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for entry in inside:
        if entry.account_id is not None:
            spent[(day(entry.at), entry.account_id)][0] += entry.credits or 0.0
            spent[(day(entry.at), entry.account_id)][1] += 1
    assert [(d.day, d.account_id, d.requests) for d in traffic.credits_by_day] == [
        (key[0], key[1], int(value[1])) for key, value in sorted(spent.items())
    ]
    assert [d.credits for d in traffic.credits_by_day] == [
        pytest.approx(value[0], abs=1e-6) for _, value in sorted(spent.items())
    ]


async def check_key_credits(log: OpLog, since: float) -> None:
    kept = [e for e in await log.entries(limit=10**9) if e.at >= since and e.key_id == "key-1"]
    requests, credits = await log.key_credits("key-1", since=since)
    assert requests == len(kept)
    assert credits == pytest.approx(sum(e.credits or 0.0 for e in kept), abs=1e-6)


def tables(path: Path) -> list[list[tuple[Any, ...]]]:
    """Each level of the rollup as stored, then as one aggregation of the rows makes it
    (credits rounded); the recent level only as far back as reads use it."""
    found: list[list[tuple[Any, ...]]] = []
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TEMP TABLE oplog_rollup AS SELECT * FROM main.oplog_rollup WHERE 0")
        db.execute("CREATE UNIQUE INDEX temp.key ON oplog_rollup (span, slot, kind, value)")
        assert rollup.RECENT.keep_s is not None
        fresh = rollup.roll("true", str(NOW - rollup.RECENT.keep_s))
        db.execute(fresh.replace("INTO oplog_rollup", "INTO temp.oplog_rollup"))
        for level in rollup.LEVELS:
            read = level.read_s is not None and NOW - level.read_s
            oldest = int(read // level.span_s) if read else 0
            for schema in ("main", "temp"):
                rows = db.execute(
                    f"SELECT * FROM {schema}.oplog_rollup WHERE span = ? AND slot >= ?"  # noqa: S608
                    " ORDER BY 1, 2, 3, 4",
                    (level.span_s, oldest),
                ).fetchall()
                found.append([(*row[:8], round(row[8], 6), *row[9:]) for row in rows])
    return found


async def check(log: OpLog, path: Path) -> None:
    await log.flush()
    found = tables(path)
    for stored, fresh in zip(found[0::2], found[1::2], strict=True):
        assert stored == fresh
    for since in (
        None,
        START,
        START + 5 * HOUR + 0.5,
        NOW - 26 * HOUR - 7.25,
        NOW - 75 * 60 + 0.25,  # rows, then 10-second slots, then hours
        NOW - 60,  # `kiroctl top`
        NOW - 20,
    ):
        await check_stats(log, since)
    for window in TRAFFIC_WINDOWS:
        await check_traffic(log, window)
    for since in (START + 3 * HOUR, START + 7 * HOUR + 1.5, NOW - 3000.5):
        await check_key_credits(log, since)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "kirod.db"


@contextlib.asynccontextmanager
async def opened(path: Path) -> AsyncIterator[OpLog]:
    async with Database(path) as db:
        log = OpLog(db, clock=lambda: NOW)
        yield log
        await log.close()


async def test_the_rollup_agrees_with_the_rows_written_in_batches(path: Path) -> None:
    async with opened(path) as log:
        for number, entry in enumerate(rows(1500, seed=1)):
            log.append(entry)
            if number % 97 == 0:  # batches of every size, the full one (`FLUSH_ROWS`) too
                await log.flush()
        await check(log, path)


async def test_it_agrees_after_retention_and_after_a_restart(path: Path) -> None:
    async with opened(path) as log:
        for entry in rows(1200, seed=2):
            log.append(entry)
        await check(log, path)
        await log.prune(before=START + 4 * HOUR + 1234.5, max_rows=10**6)  # by age, mid-hour
        await check(log, path)
        await log.prune(before=0.0, max_rows=700, chunk=111)  # by count, a few at a time
        assert len(await log.entries(limit=10**9)) == 700
        await check(log, path)
    async with opened(path) as log:  # what the restarted daemon reads
        await check(log, path)
        for entry in rows(300, seed=3):
            log.append(entry)
        await check(log, path)
        await log.prune(before=0.0, max_rows=0)
        assert await log.entries() == []
        assert not any(tables(path))
        assert (await log.stats()).requests == 0


async def test_the_migration_builds_the_rollup_from_an_older_databases_rows(
    tmp_path: Path, path: Path
) -> None:
    async with opened(path) as log:
        for entry in rows(800, seed=4):
            log.append(entry)
        await log.flush()
    older = tmp_path / "older.db"
    async with Database(older, migrations=MIGRATIONS[:9]):
        pass  # the schema before the rollup
    with contextlib.closing(sqlite3.connect(older)) as db:
        db.execute("ATTACH DATABASE ? AS newer", (str(path),))
        columns = ", ".join(row[1] for row in db.execute("PRAGMA main.table_info(oplog)"))
        with db:  # the columns the older schema has (later ones keep their defaults)
            db.execute(f"INSERT INTO oplog SELECT {columns} FROM newer.oplog")  # noqa: S608
    async with opened(older) as log:  # migrated to the current schema as it opens
        assert tables(older)[0::2] == tables(path)[0::2]  # as stored
        await check(log, older)


async def test_recent_slots_go_after_two_hours_and_the_statistics_stay_whole(path: Path) -> None:
    now = [NOW]
    async with Database(path) as db:
        log = OpLog(db, clock=lambda: now[0])
        written = rows(400, seed=5)
        for entry in written:
            log.append(entry)
        await log.flush()

        def recent_slots() -> list[int]:
            with contextlib.closing(sqlite3.connect(path)) as raw:
                found = raw.execute("SELECT DISTINCT slot FROM oplog_rollup WHERE span = 10")
                return [row[0] for row in found]

        assert rollup.RECENT.keep_s is not None
        assert min(recent_slots()) >= (NOW - rollup.RECENT.keep_s) // 10  # only recent rows
        now[0] = NOW + 3600
        await log.prune(before=0.0, max_rows=10**6)
        assert recent_slots()
        assert min(recent_slots()) >= (now[0] - rollup.RECENT.keep_s) // 10
        assert (await log.stats()).requests == len(written)
        await check_stats(log, now[0] - 3600 - 50)  # rows, then the slots left, then hours
        await log.close()


def test_histogram_buckets_are_within_a_64th() -> None:
    assert [rollup.bucket(ms) for ms in (0.2, 63.9, 64.0, 65.9, 127.9, 128.0, 131.0)] == [
        0, 63, 64, 64, 126, 128, 128,
    ]  # fmt: skip
    for ms in (64.0, 99.9, 1000.0, 1234.5, 65_432.1, 3_600_000.0):
        assert abs(rollup.bucket_middle(rollup.bucket(ms)) - ms) <= ms / 64
