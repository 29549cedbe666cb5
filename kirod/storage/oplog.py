"""The operation log: one row per public model request, and the statistics `kiroctl stats` shows.

A row says who asked (the API key's id, never the key), for which model over which protocol, which
accounts were tried and how each attempt ended, and how the request went: status, error class,
stop reason, tokens, credits, time to first byte and total time. Prompts, outputs and tool content
are never part of it. Retention is bounded by age and row count, and every row by size: the model
is the one string a client chooses, kept to `MAX_MODEL_CHARS` (the decoders refuse longer names),
so that `kiroctl trace` shows the name a client asked for even when no account serves it; the
statistics count such names as one `UNKNOWN_MODEL`, so a flood of invented names never fills
`kiroctl stats`. Every other field is kirod's own (ids, codes, numbers).

Rows are written behind the request (`kirod.storage.behind`): in one transaction per
`FLUSH_DELAY_S` or `FLUSH_ROWS`, flushed before any read and at shutdown.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

from kirod.report_types import (
    TRAFFIC_WINDOWS,
    CreditsDay,
    Percentiles,
    Stats,
    StatsGroup,
    Trace,
    TraceAttempt,
    TraceRequest,
    Traffic,
    TrafficBucket,
)
from kirod.storage.behind import WriteBehind
from kirod.storage.db import Database

FLUSH_DELAY_S = 0.5
FLUSH_ROWS = 256
MAX_MODEL_CHARS = 128
MAX_TRACE_ROWS = 200  # rows one trace answer holds
UNKNOWN_MODEL = "(unknown)"
"""How the statistics name the model of a request refused because no account serves it."""
_STATS_MODEL = f"CASE WHEN error = 'model_not_found' THEN '{UNKNOWN_MODEL}' ELSE model END"

_INSERT = (
    "INSERT INTO oplog (at, request_id, key_id, protocol, model, stream, account_id, attempts,"
    " stop_reason, input_tokens, output_tokens, credits, ttfb_ms, total_ms, status, error,"
    " dropped, truncations, continuations, extensions, cache)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One account tried: `outcome` is `ok` or the failure class (`throttled`, `quota`, …).

    The rest is for `kiroctl trace`, None when not known (rows written before it was recorded):
    the account's region and the Kiro model id routed to, Kiro's HTTP status and reason code
    when it answered an error, the milliseconds since the request began when the attempt ended,
    and for the attempt that answered, the upstream frames it read and their bytes.
    """

    account_id: str
    outcome: str
    region: str | None = None
    model: str | None = None
    status: int | None = None
    reason: str | None = None
    ms: float | None = None
    frames: int | None = None
    bytes_read: int | None = None

    def to_json(self) -> dict[str, Any]:
        """As the row's `attempts` JSON keeps it: the optional fields only when known."""
        doc: dict[str, Any] = {"account": self.account_id, "outcome": self.outcome}
        for name in _ATTEMPT_EXTRAS:
            value = getattr(self, name)
            if value is not None:
                doc[name] = value
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Attempt:
        return cls(
            str(doc["account"]),
            str(doc["outcome"]),
            region=doc.get("region"),
            model=doc.get("model"),
            status=doc.get("status"),
            reason=doc.get("reason"),
            ms=doc.get("ms"),
            frames=doc.get("frames"),
            bytes_read=doc.get("bytes_read"),
        )


_ATTEMPT_EXTRAS = ("region", "model", "status", "reason", "ms", "frames", "bytes_read")


@dataclass(frozen=True, slots=True)
class OpEntry:
    at: float  # epoch seconds when the request reached the account layer
    request_id: str
    key_id: str
    protocol: str
    model: str  # as the client named it (at most MAX_MODEL_CHARS)
    stream: bool
    account_id: str | None  # the account that answered, or the last one tried
    attempts: tuple[Attempt, ...]
    stop_reason: str | None
    input_tokens: int | None
    output_tokens: int | None
    credits: float | None
    ttfb_ms: float | None
    total_ms: float
    status: int  # HTTP status sent; 499 when the client went away first
    error: str | None  # error code when the request (or its stream) failed
    dropped: tuple[str, ...]  # request parameters Kiro cannot honour, dropped
    truncations: int = 0  # tool calls Kiro cut off (never handed out)
    continuations: int = 0  # of those, the ones kirod continued the turn after
    extensions: tuple[str, ...] = ()  # the extensions that changed the request, in order
    cache: str | None = None  # "hit" (no account, no credits) or "miss" when the cache was asked

    @property
    def succeeded(self) -> bool:
        return self.status < 400 and self.error is None


# A request succeeded when its status is below 400 and its stream did not end in an error.
_SUCCESS = "(status < 400 AND error IS NULL)"
_DAY = "date(at, 'unixepoch')"  # the UTC day of a row, as YYYY-MM-DD


class OpLog:
    def __init__(self, db: Database, *, flush_delay_s: float = FLUSH_DELAY_S) -> None:
        self._db = db
        self._behind = WriteBehind[OpEntry](
            db, _insert, name="oplog", delay_s=flush_delay_s, max_rows=FLUSH_ROWS
        )

    def append(self, entry: OpEntry) -> None:
        """Queue a row; it is written within `flush_delay_s`, or before any read."""
        self._behind.add(entry)

    async def flush(self) -> None:
        await self._behind.flush()

    async def close(self) -> None:
        """Write what is queued; for shutdown, before the database closes."""
        await self._behind.close()

    async def entries(self, *, since: float | None = None, limit: int = 100) -> list[OpEntry]:
        """The newest rows first."""
        await self.flush()
        rows = await self._db.read(
            "SELECT * FROM oplog WHERE at >= ? ORDER BY at DESC, id DESC LIMIT ?",
            (since or 0.0, limit),
        )
        return [_entry(row) for row in rows]

    async def trace(
        self, *, request_id: str | None = None, last: int = 10, after: int | None = None
    ) -> Trace:
        """The rows of `request_id`; else those written after row `after`; else the `last` ones.

        Oldest first, at most `MAX_TRACE_ROWS`. The cursor is the newest row id answered (or, with
        none, the newest in the log), to pass as `after` to follow the log from there.
        """
        await self.flush()
        limit = max(0, min(last, MAX_TRACE_ROWS))  # 0: none, only the cursor (--follow)
        if request_id is not None:
            rows = await self._db.read(
                "SELECT * FROM oplog WHERE request_id = ? ORDER BY id LIMIT ?",
                (request_id, MAX_TRACE_ROWS),
            )
        elif after is not None:
            rows = await self._db.read(
                "SELECT * FROM oplog WHERE id > ? ORDER BY id LIMIT ?", (after, MAX_TRACE_ROWS)
            )
        else:
            rows = list(
                reversed(
                    await self._db.read("SELECT * FROM oplog ORDER BY id DESC LIMIT ?", (limit,))
                )
            )
        if rows:
            cursor = int(rows[-1]["id"])
        else:
            newest = await self._db.read_one("SELECT COALESCE(MAX(id), 0) FROM oplog")
            cursor = max(after or 0, int(newest[0]) if newest is not None else 0)
        return Trace(
            requests=tuple(_traced(int(row["id"]), _entry(row)) for row in rows), cursor=cursor
        )

    async def key_credits(self, key_id: str, *, since: float) -> tuple[int, float]:
        """Requests made with API key `key_id` from `since` on, and the Kiro credits they used."""
        await self.flush()
        row = await self._db.read_one(
            "SELECT count(*), COALESCE(SUM(credits), 0) FROM oplog WHERE key_id = ? AND at >= ?",
            (key_id, since),
        )
        return (int(row[0]), round(float(row[1]), 6)) if row is not None else (0, 0.0)

    async def prune(self, *, before: float, max_rows: int) -> None:
        """Drop rows older than `before`, then the oldest beyond `max_rows`."""
        await self.flush()

        async def transaction(conn: aiosqlite.Connection) -> None:
            await conn.execute("DELETE FROM oplog WHERE at < ?", (before,))
            await conn.execute(
                "DELETE FROM oplog WHERE id IN (SELECT id FROM oplog ORDER BY at DESC, id DESC"
                " LIMIT -1 OFFSET ?)",
                (max_rows,),
            )

        await self._db.run_write(transaction)

    async def stats(self, *, since: float | None = None) -> Stats:
        """Totals, success rate, TTFB percentiles and breakdowns over rows from `since` on."""
        await self.flush()
        start = since or 0.0
        totals = await self._db.read_one(
            "SELECT count(*), COALESCE(SUM(status < 400 AND error IS NULL), 0),"
            " COALESCE(SUM(input_tokens), 0),"
            " COALESCE(SUM(output_tokens), 0), COALESCE(SUM(credits), 0),"
            " COALESCE(SUM(truncations > 0), 0),"
            " COALESCE(SUM(continuations > 0 AND status < 400 AND error IS NULL), 0)"
            " FROM oplog WHERE at >= ?",
            (start,),
        )
        assert totals is not None
        errors = await self._db.read(
            "SELECT error, count(*) FROM oplog WHERE at >= ? AND error IS NOT NULL"
            " GROUP BY error ORDER BY count(*) DESC, error",
            (start,),
        )
        return Stats(
            since=since,
            requests=totals[0],
            succeeded=totals[1],
            input_tokens=totals[2],
            output_tokens=totals[3],
            credits=round(totals[4], 6),
            ttfb_ms=await self._ttfb(start),
            accounts=await self._groups("account_id", start),
            models=await self._groups(_STATS_MODEL, start),
            keys=await self._groups("key_id", start),
            errors={row[0]: row[1] for row in errors},
            truncated=totals[5],
            recovered=totals[6],
            days=await self._groups(_DAY, start, order=_DAY),
        )

    async def traffic(self, window: str, *, now: float | None = None) -> Traffic:
        """The rows of one window of `TRAFFIC_WINDOWS` ending now, in buckets, oldest first.

        Buckets align to whole minutes, hours or UTC days, the last holding `now`; every one is
        present (zeros without rows). TTFB percentiles are two ordered offset queries per bucket
        with timed rows, so the store's one connection is never held for a whole window (at
        the 200,000 rows `oplog_max_rows` keeps, a month is 60 queries over ~7,000 rows each,
        not one of 200,000 read into Python). Failures without
        an error code count as `http_<status>`; credits by day leave out rows no account
        answered. Raises ValueError for an unknown window.
        """
        if window not in TRAFFIC_WINDOWS:
            raise ValueError(f"window must be one of: {', '.join(TRAFFIC_WINDOWS)}")
        count, bucket_s = TRAFFIC_WINDOWS[window]
        await self.flush()
        until = float((math.floor((time.time() if now is None else now) / bucket_s) + 1) * bucket_s)
        since = until - count * bucket_s
        slot = "CAST((at - ?) / ? AS INTEGER)"  # a row's bucket: since <= at < until
        span = "FROM oplog WHERE at >= ? AND at < ?"
        slotted = (since, bucket_s, since, until)
        groups = await self._db.read(
            f"SELECT {slot}, count(*), count(*) - SUM({_SUCCESS}), COALESCE(SUM(credits), 0),"
            f" count(ttfb_ms) {span} GROUP BY 1",
            slotted,
        )
        errors = await self._db.read(
            f"SELECT COALESCE(error, 'http_' || status), count(*) {span} AND NOT {_SUCCESS}"
            " GROUP BY 1 ORDER BY count(*) DESC, 1",
            (since, until),
        )
        days = await self._db.read(
            f"SELECT {_DAY}, account_id, COALESCE(SUM(credits), 0), count(*) {span}"
            " AND account_id IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2",
            (since, until),
        )
        totals = {row[0]: (row[1], row[2], row[3], row[4]) for row in groups}
        buckets = []
        for index in range(count):
            requests, failed, credits, timed = totals.get(index, (0, 0, 0.0, 0))
            start = since + index * bucket_s
            p50, p95 = (
                [await self._ttfb_rank(start, start + bucket_s, timed, f) for f in (0.50, 0.95)]
                if timed
                else (None, None)
            )
            buckets.append(
                TrafficBucket(
                    start=start,
                    requests=requests,
                    errors=failed,
                    ttfb_p50_ms=p50,
                    ttfb_p95_ms=p95,
                    credits=round(credits, 6),
                )
            )
        return Traffic(
            window=window,
            since=since,
            bucket_s=bucket_s,
            buckets=tuple(buckets),
            errors={row[0]: row[1] for row in errors},
            credits_by_day=tuple(
                CreditsDay(row[0], row[1], round(row[2], 6), row[3]) for row in days
            ),
        )

    async def _groups(
        self, column: str, start: float, *, order: str | None = None
    ) -> tuple[StatsGroup, ...]:
        """Rows grouped by `column` (a column or SQL expression), most requests first."""
        order = order or f"count(*) DESC, {column}"
        rows = await self._db.read(
            f"SELECT {column}, count(*), count(*) - COALESCE(SUM({_SUCCESS}), 0),"  # noqa: S608
            f" COALESCE(SUM(credits), 0) FROM oplog WHERE at >= ? AND {column} IS NOT NULL"
            f" GROUP BY {column} ORDER BY {order}",
            (start,),
        )
        return tuple(StatsGroup(row[0], row[1], row[2], round(row[3], 6)) for row in rows)

    async def _ttfb(self, start: float) -> Percentiles | None:
        """Nearest-rank percentiles from `start` on."""
        row = await self._db.read_one(
            "SELECT count(*) FROM oplog WHERE at >= ? AND ttfb_ms IS NOT NULL", (start,)
        )
        count = row[0] if row is not None else 0
        if not count:
            return None
        return Percentiles(
            *[await self._ttfb_rank(start, math.inf, count, f) for f in (0.50, 0.95, 0.99)]
        )

    async def _ttfb_rank(self, start: float, until: float, count: int, fraction: float) -> float:
        """The nearest-rank percentile of the `count` timed rows in `[start, until)`, read with
        one ordered offset query: SQLite sorts, so no row list crosses into Python and each
        query holds the store's one connection only briefly."""
        found = await self._db.read_one(
            "SELECT ttfb_ms FROM oplog WHERE at >= ? AND at < ? AND ttfb_ms IS NOT NULL"
            " ORDER BY ttfb_ms LIMIT 1 OFFSET ?",
            (start, until, max(0, math.ceil(fraction * count) - 1)),
        )
        assert found is not None
        return float(found[0])


async def _insert(conn: aiosqlite.Connection, entries: Sequence[OpEntry]) -> None:
    await conn.executemany(_INSERT, [_row(entry) for entry in entries])


def _row(entry: OpEntry) -> tuple[Any, ...]:
    attempts = json.dumps([a.to_json() for a in entry.attempts], separators=(",", ":"))
    return (
        entry.at,
        entry.request_id,
        entry.key_id,
        entry.protocol,
        entry.model[:MAX_MODEL_CHARS],
        int(entry.stream),
        entry.account_id,
        attempts,
        entry.stop_reason,
        entry.input_tokens,
        entry.output_tokens,
        entry.credits,
        entry.ttfb_ms,
        entry.total_ms,
        entry.status,
        entry.error,
        ",".join(entry.dropped),
        entry.truncations,
        entry.continuations,
        ",".join(entry.extensions),
        entry.cache,
    )


def _entry(row: Any) -> OpEntry:
    return OpEntry(
        at=row["at"],
        request_id=row["request_id"],
        key_id=row["key_id"],
        protocol=row["protocol"],
        model=row["model"],
        stream=bool(row["stream"]),
        account_id=row["account_id"],
        attempts=_attempts(row["attempts"]),
        stop_reason=row["stop_reason"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        credits=row["credits"],
        ttfb_ms=row["ttfb_ms"],
        total_ms=row["total_ms"],
        status=row["status"],
        error=row["error"],
        dropped=tuple(part for part in row["dropped"].split(",") if part),
        truncations=row["truncations"],
        continuations=row["continuations"],
        extensions=tuple(part for part in row["extensions"].split(",") if part),
        cache=row["cache"],
    )


def _traced(row_id: int, entry: OpEntry) -> TraceRequest:
    """A row as `kiroctl trace` shows it: each attempt with why the request left the one before."""
    attempts: list[TraceAttempt] = []
    previous: Attempt | None = None
    for attempt in entry.attempts:
        if previous is None or previous.outcome == "ok":
            why = None
        elif previous.account_id == attempt.account_id:
            why = f"retried after {previous.outcome}"  # a rejected bearer, after a refresh
        else:
            why = previous.outcome
        attempts.append(
            TraceAttempt(
                account_id=attempt.account_id,
                outcome=attempt.outcome,
                region=attempt.region,
                model=attempt.model,
                upstream_status=attempt.status,
                upstream_reason=attempt.reason,
                ended_ms=attempt.ms,
                frames=attempt.frames,
                bytes_read=attempt.bytes_read,
                failover_reason=why,
            )
        )
        previous = attempt
    return TraceRequest(
        id=row_id,
        at=entry.at,
        request_id=entry.request_id,
        key_id=entry.key_id,
        protocol=entry.protocol,
        model=entry.model,
        stream=entry.stream,
        account_id=entry.account_id,
        status=entry.status,
        error=entry.error,
        stop_reason=entry.stop_reason,
        ttfb_ms=entry.ttfb_ms,
        total_ms=entry.total_ms,
        input_tokens=entry.input_tokens,
        output_tokens=entry.output_tokens,
        credits=entry.credits,
        truncations=entry.truncations,
        continuations=entry.continuations,
        dropped=entry.dropped,
        extensions=entry.extensions,
        cache=entry.cache,
        attempts=tuple(attempts),
    )


def _attempts(raw: str) -> tuple[Attempt, ...]:
    return tuple(Attempt.from_json(item) for item in json.loads(raw))
