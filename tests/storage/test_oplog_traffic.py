"""The operation log as a time series (`GET /traffic`): buckets, percentiles, errors, credits."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kirod.report_types import TRAFFIC_WINDOWS, CreditsDay, Traffic
from kirod.storage.db import Database
from kirod.storage.oplog import Attempt, OpEntry, OpLog

DAY = 86400
MIDNIGHT = 1_700_006_400.0  # 2023-11-15T00:00:00Z
NOW = MIDNIGHT + 12 * 3600 + 30 * 60 + 15.5  # 12:30:15.5 UTC

ROW = OpEntry(
    at=NOW,
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
    credits=0.25,
    ttfb_ms=100.0,
    total_ms=400.0,
    status=200,
    error=None,
    dropped=(),
)


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[OpLog]:
    async with Database(tmp_path / "kirod.db") as database:
        # Rows reach the table only by the flush; "now" is NOW.
        yield OpLog(database, flush_delay_s=3600.0, clock=lambda: NOW)


def add(log: OpLog, at: float, **changes: Any) -> None:
    log.append(dataclasses.replace(ROW, at=at, request_id=f"req-{at}", **changes))


async def test_an_empty_log_has_every_bucket_at_zero(log: OpLog) -> None:
    for window, (count, bucket_s) in TRAFFIC_WINDOWS.items():
        traffic = await log.traffic(window)
        assert (traffic.window, traffic.bucket_s, len(traffic.buckets)) == (
            window,
            bucket_s,
            count,
        )
        assert [b.start for b in traffic.buckets] == [
            traffic.since + n * bucket_s for n in range(count)
        ]
        assert traffic.buckets[-1].start <= NOW < traffic.buckets[-1].start + bucket_s
        assert traffic.since % bucket_s == 0  # aligned to whole minutes, hours, UTC days
        assert all(
            (b.requests, b.errors, b.credits, b.ttfb_p50_ms, b.ttfb_p95_ms) == (0, 0, 0, None, None)
            for b in traffic.buckets
        )
        assert (traffic.errors, traffic.credits_by_day) == ({}, ())


async def test_hour_buckets_count_requests_errors_and_credits(log: OpLog) -> None:
    since = MIDNIGHT + 11 * 3600 + 31 * 60  # the minute that starts the last 60
    add(log, since - 0.001)  # before the window
    add(log, since)  # the first bucket's first instant
    add(log, NOW - 1, credits=1.5)
    add(log, NOW, status=502, error="upstream_unavailable", credits=None)
    add(log, NOW, status=200, error="stream_interrupted")  # a stream that failed after a 200
    add(log, NOW + 60)  # after now's minute (a clock that stepped back)
    traffic = await log.traffic("hour")
    assert traffic.since == since
    first, *middle, last = traffic.buckets
    assert (first.requests, first.errors, first.credits) == (1, 0, 0.25)
    assert all(b.requests == 0 for b in middle)
    assert (last.requests, last.errors, last.credits) == (3, 2, 1.75)
    assert traffic.errors == {"stream_interrupted": 1, "upstream_unavailable": 1}


async def test_failures_without_an_error_code_are_counted_by_status(log: OpLog) -> None:
    add(log, NOW, status=499, error=None)
    add(log, NOW, status=429, error="rate_limited")
    add(log, NOW, status=429, error="rate_limited")
    traffic = await log.traffic("hour")
    assert traffic.errors == {"rate_limited": 2, "http_499": 1}  # most first
    assert traffic.buckets[-1].errors == sum(traffic.errors.values())


async def test_ttfb_percentiles_are_per_bucket_nearest_rank(log: OpLog) -> None:
    for ms in range(20, 0, -1):
        add(log, MIDNIGHT + 12 * 3600 + ms, ttfb_ms=float(ms))  # the 12:00 bucket
    add(log, MIDNIGHT + 11 * 3600, ttfb_ms=None)  # untimed: counted, no percentile
    add(log, MIDNIGHT + 10 * 3600, ttfb_ms=7.5)
    traffic = await log.traffic("day")
    by_start = {b.start: b for b in traffic.buckets}
    noon = by_start[MIDNIGHT + 12 * 3600]
    # The 10th and 19th of 20, as the middle of their histogram buckets ([10, 11), [19, 20)).
    assert (noon.requests, noon.ttfb_p50_ms, noon.ttfb_p95_ms) == (20, 10.5, 19.5)
    eleven = by_start[MIDNIGHT + 11 * 3600]
    assert (eleven.requests, eleven.ttfb_p50_ms, eleven.ttfb_p95_ms) == (1, None, None)
    ten = by_start[MIDNIGHT + 10 * 3600]
    assert (ten.ttfb_p50_ms, ten.ttfb_p95_ms) == (7.5, 7.5)


async def test_credits_by_utc_day_and_account_over_the_month(log: OpLog) -> None:
    add(log, MIDNIGHT - 1, account_id="acc-b", credits=2.0)  # yesterday, 23:59:59
    add(log, MIDNIGHT - 2, account_id="acc-b", credits=1.0)
    add(log, MIDNIGHT, account_id="acc-b", credits=0.5)
    add(log, NOW, account_id="acc-a", credits=0.1)
    add(log, NOW, account_id="acc-a", credits=0.2)
    add(log, NOW, account_id=None, status=503, error="no_account", credits=None)
    add(log, MIDNIGHT - 30 * DAY, account_id="acc-a", credits=9.0)  # a day before the window
    traffic = await log.traffic("month")
    assert traffic.since == MIDNIGHT - 29 * DAY
    assert traffic.credits_by_day == (
        CreditsDay("2023-11-14", "acc-b", 3.0, 2),
        CreditsDay("2023-11-15", "acc-a", 0.3, 2),
        CreditsDay("2023-11-15", "acc-b", 0.5, 1),
    )
    assert [(b.requests, b.credits) for b in traffic.buckets[-2:]] == [(2, 3.0), (4, 0.8)]
    assert sum(b.requests for b in traffic.buckets) == 6


async def test_the_last_instant_before_the_end_is_in_the_last_bucket(log: OpLog) -> None:
    until = MIDNIGHT + DAY
    add(log, math.nextafter(until, 0))
    traffic = await log.traffic("month")
    assert traffic.buckets[-1].requests == 1


async def test_the_answer_survives_json(log: OpLog) -> None:
    add(log, NOW, ttfb_ms=12.5, credits=0.125)
    add(log, NOW, status=500, error="internal_error", ttfb_ms=None)
    traffic = await log.traffic("hour")
    assert Traffic.from_json(json.loads(json.dumps(traffic.to_json()))) == traffic


async def test_an_unknown_window_is_refused(log: OpLog) -> None:
    with pytest.raises(ValueError, match="hour, day, month"):
        await log.traffic("week")
