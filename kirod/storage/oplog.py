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
`FLUSH_DELAY_S` or `FLUSH_ROWS`, flushed before any read and at shutdown. The same transaction
adds them to the rollups (`kirod.storage.rollup`) that the statistics and the traffic read, so
that these read only the rows at the edges of their range, however large the log grows (a few
seconds of rows for `kiroctl top`; at most an hour's for an old `kiroctl stats --since`);
retention takes rows out of both, `PRUNE_ROWS` at a time.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
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
from kirod.storage import rollup, spend
from kirod.storage.behind import WriteBehind
from kirod.storage.db import Database
from kirod.storage.rollup import TTFB

# A `kill -9` loses the rows of the requests that ended in the last FLUSH_DELAY_S (and the
# transaction writing them): docs/RELIABILITY.md states the window. Against 0.5 s, 0.1 s showed
# no CPU per request beyond the runs' spread (bench/README.md, issue 41).
FLUSH_DELAY_S = 0.1
FLUSH_ROWS = 256
MAX_MODEL_CHARS = 128
MAX_TRACE_ROWS = 200  # rows one trace answer holds
METERED_SCAN_ROWS = 20_000  # the newest rows `metered` reads at start
PRUNE_ROWS = 20_000  # rows one retention transaction deletes at most, so readers wait briefly
UNKNOWN_MODEL = rollup.UNKNOWN_MODEL

_COLUMNS = (
    "at", "request_id", "key_id", "protocol", "model", "stream", "account_id", "attempts",
    "stop_reason", "input_tokens", "output_tokens", "credits", "ttfb_ms", "total_ms", "status",
    "error", "dropped", "truncations", "continuations", "extensions", "cache", "cuts",
    "reserved_credits", "reserved_tokens",
)  # fmt: skip
# A batch is one statement over a JSON array of rows, and a read one JSON value: the store's
# thread needs the GIL once per row it steps through, and a busy event loop makes each of those
# waits up to the switch interval (5 ms), which a row at a time turned into seconds under load.
_FIELDS = ", ".join(f"json_extract(value, '$[{n}]')" for n in range(len(_COLUMNS)))
_INSERT = (
    f"INSERT INTO oplog ({', '.join(_COLUMNS)}) SELECT {_FIELDS}"  # noqa: S608 - kirod's own
    " FROM json_each(?)"
)
# `at` as text of 17 digits: SQLite writes a REAL into JSON with 15, which would move it.
_AS_JSON = "json_group_array(json_array(id, {}))".format(
    ", ".join("printf('%!.17g', at)" if name == "at" else name for name in _COLUMNS)
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
    cuts: int = 0  # answers Kiro ended without their tail frames, sent on as max_tokens
    # What the request's budgets held for it before it was routed (kirod.budgets); None when no
    # budget applied. `credits` and the tokens are what it settled to.
    reserved_credits: float | None = None
    reserved_tokens: int | None = None

    @property
    def succeeded(self) -> bool:
        return self.status < 400 and self.error is None


# The UTC day of a rollup's slot or of a row (`t` of `rollup.source`), as YYYY-MM-DD.
_DAY = "date(CAST(t AS INTEGER), 'unixepoch')"
_SUMS = ", ".join(f"SUM({name}) AS {name}" for name in rollup.MEASURES)


class OpLog:
    def __init__(
        self,
        db: Database,
        *,
        flush_delay_s: float = FLUSH_DELAY_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self._clock = clock  # what "now" is for the rollups' recent slots and the traffic
        self._behind = WriteBehind[OpEntry](
            db, self._insert, name="oplog", delay_s=flush_delay_s, max_rows=FLUSH_ROWS
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
        rows = await self._rows(
            "WHERE at >= ? ORDER BY at DESC, id DESC LIMIT ?", (since or 0.0, limit)
        )
        return [_entry(row) for row in sorted(rows, key=lambda row: (-row[1], -row[0]))]

    async def metered(self, limit: int) -> list[tuple[str, int, float]]:
        """(Kiro model, tokens reserved, credits metered) of the newest `limit` answered rows
        that a budget held for, newest first: what `kirod.budgets.rates` learns again from
        at start. Only the newest `METERED_SCAN_ROWS` rows are looked at, so a large log
        without budgets costs the start no scan of it."""
        rows = await self._rows(
            "WHERE id > (SELECT COALESCE(MAX(id), 0) FROM oplog) - ? AND credits > 0"
            " AND reserved_tokens > 0 AND stop_reason IS NOT NULL ORDER BY id DESC LIMIT ?",
            (METERED_SCAN_ROWS, limit),
        )
        found: list[tuple[str, int, float]] = []
        for row in sorted(rows, key=lambda row: -row[0]):
            entry = _entry(row)
            model = next((a.model for a in reversed(entry.attempts) if a.outcome == "ok"), None)
            if model is not None and entry.reserved_tokens and entry.credits:
                found.append((model, entry.reserved_tokens, entry.credits))
        return found

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
            rows = await self._rows(
                "WHERE request_id = ? ORDER BY id LIMIT ?", (request_id, MAX_TRACE_ROWS)
            )
        elif after is not None:
            rows = await self._rows("WHERE id > ? ORDER BY id LIMIT ?", (after, MAX_TRACE_ROWS))
        else:
            rows = await self._rows("ORDER BY id DESC LIMIT ?", (limit,))
        rows.sort(key=lambda row: row[0])  # oldest first
        if rows:
            cursor = int(rows[-1][0])
        else:
            newest = await self._db.read_one("SELECT COALESCE(MAX(id), 0) FROM oplog")
            cursor = max(after or 0, int(newest[0]) if newest is not None else 0)
        return Trace(requests=tuple(_traced(row[0], _entry(row)) for row in rows), cursor=cursor)

    async def key_credits(self, key_id: str, *, since: float) -> tuple[int, float]:
        """Requests made with API key `key_id` from `since` on, and the Kiro credits they used."""
        await self.flush()
        table, params = rollup.source(rollup.cover(since, None, self._clock()))
        row = await self._db.read_one(
            f"SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(credits), 0)"  # noqa: S608
            f" FROM {table} WHERE kind = 'key' AND value = ?",
            (*params, key_id),
        )
        return (int(row[0]), round(float(row[1]), 6)) if row is not None else (0, 0.0)

    async def prune(self, *, before: float, max_rows: int, chunk: int = PRUNE_ROWS) -> None:
        """Drop rows older than `before`, then the oldest beyond `max_rows`, with their part of
        the rollup; in transactions of at most `chunk` rows, oldest first."""
        await self.flush()
        now = self._clock()

        async def recent(conn: aiosqlite.Connection) -> None:
            await rollup.prune_recent(conn, now)
            # The spend the log's trigger keeps (kirod.storage.spend) outlives its rows.
            await conn.execute(
                "DELETE FROM spend WHERE day < ?", (int(now) // 86400 - spend.KEEP_DAYS,)
            )

        await self._db.run_write(recent)
        cut = (before, 0)  # rows before (at, id) in the log's time order go
        counted = await self._db.read_one("SELECT count(*) FROM oplog")
        excess = int(counted[0]) - max_rows if counted is not None else 0
        if excess > 0:
            oldest_kept = await self._db.read_one(
                "SELECT at, id FROM oplog ORDER BY at, id LIMIT 1 OFFSET ?", (excess,)
            )
            # None: `max_rows` is 0, so every row goes.
            kept = (math.inf, 0) if oldest_kept is None else (oldest_kept[0], oldest_kept[1])
            cut = max(cut, (float(kept[0]), int(kept[1])))

        async def some(conn: aiosqlite.Connection) -> bool:
            """Up to `chunk` rows before `cut`; whether that was the last of them."""
            beyond = await conn.execute_fetchall(
                "SELECT at, id FROM oplog ORDER BY at, id LIMIT 1 OFFSET ?", (chunk,)
            )
            step = min([cut, *((float(row[0]), int(row[1])) for row in beyond)])
            await rollup.drop(conn, step, now)
            return step == cut

        while not await self._db.run_write(some):
            pass

    async def stats(self, *, since: float | None = None) -> Stats:
        """Totals, success rate, TTFB percentiles and breakdowns over rows from `since` on."""
        await self.flush()
        table, params = rollup.source(rollup.cover(since or 0.0, None, self._clock()))
        rows = await self._json(
            ("kind", "value", "day", *rollup.MEASURES),
            f"SELECT kind, value, CASE kind WHEN 'total' THEN {_DAY} END AS day,"  # noqa: S608
            f" {_SUMS} FROM {table} GROUP BY 1, 2, 3",
            params,
        )
        by_kind: dict[str, list[list[Any]]] = {kind: [] for kind in (*rollup.KINDS, TTFB)}
        for row in rows:
            by_kind[row[0]].append(row)
        totals = [sum(row[column] for row in by_kind["total"]) for column in range(3, 10)]
        histogram = _histogram((row[1], row[3]) for row in by_kind[TTFB])
        return Stats(
            since=since,
            requests=totals[0],
            succeeded=totals[1],
            input_tokens=totals[2],
            output_tokens=totals[3],
            credits=round(totals[4], 6),
            ttfb_ms=Percentiles(*[rollup.percentile(histogram, f) for f in (0.50, 0.95, 0.99)])
            if histogram
            else None,
            accounts=_grouped(by_kind["account"]),
            models=_grouped(by_kind["model"]),
            keys=_grouped(by_kind["key"]),
            errors={group.key: group.requests for group in _grouped(by_kind["error"])},
            truncated=totals[5],
            recovered=totals[6],
            days=tuple(sorted(_grouped(by_kind["total"], key=2), key=lambda group: group.key)),
        )

    async def traffic(self, window: str) -> Traffic:
        """The rows of one window of `TRAFFIC_WINDOWS` ending now, in buckets, oldest first.

        Buckets align to whole minutes, hours or UTC days, the last holding now; every one is
        present (zeros without rows). They are read from the rollup's slots that fit in them,
        and rows only at the edges. Failures without an error code count as `http_<status>`;
        credits by day leave out rows no account answered. Raises ValueError for an unknown
        window.
        """
        if window not in TRAFFIC_WINDOWS:
            raise ValueError(f"window must be one of: {', '.join(TRAFFIC_WINDOWS)}")
        count, bucket_s = TRAFFIC_WINDOWS[window]
        await self.flush()
        now = self._clock()
        until = float((math.floor(now / bucket_s) + 1) * bucket_s)
        since = until - count * bucket_s
        table, params = rollup.source(
            rollup.cover(since, until, now, bucket_s=bucket_s),
            rows_by=f"CAST(at AS INTEGER) / {bucket_s} * {bucket_s}.0",  # a row's bucket's start
        )
        rows = await self._json(
            ("bucket", "day", "kind", "value", "requests", "succeeded", "credits"),
            "SELECT CAST((t - ?) / ? AS INTEGER) AS bucket, CASE kind"  # noqa: S608
            f" WHEN 'account' THEN {_DAY} END AS day, kind, value, SUM(requests) AS requests,"
            f" SUM(succeeded) AS succeeded, SUM(credits) AS credits FROM {table}"
            f" WHERE kind IN ('total', 'account', 'error', 'status', '{TTFB}')"
            " GROUP BY 1, 2, 3, 4",
            (since, bucket_s, *params),
        )
        totals: dict[int, tuple[int, int, float]] = {}
        failures: dict[str, int] = {}
        days: dict[tuple[str, str], tuple[float, int]] = {}
        timed: dict[int, list[tuple[str, int]]] = {}
        for row in rows:
            index, day, kind, value, requests, succeeded, credits = row
            if kind == "total":
                known = totals.get(index, (0, 0, 0.0))
                totals[index] = (
                    known[0] + requests,
                    known[1] + requests - succeeded,
                    known[2] + credits,
                )
            elif kind == "account":
                spent = days.get((day, value), (0.0, 0))
                days[(day, value)] = (spent[0] + credits, spent[1] + requests)
            elif kind == TTFB:
                timed.setdefault(index, []).append((value, requests))
            else:  # every row of an error code or a failure's status failed
                label = value if kind == "error" else f"http_{value}"
                failures[label] = failures.get(label, 0) + requests
        buckets = []
        for index in range(count):
            requests, failed, credits = totals.get(index, (0, 0, 0.0))
            histogram = _histogram(timed.get(index, []))
            buckets.append(
                TrafficBucket(
                    start=since + index * bucket_s,
                    requests=requests,
                    errors=failed,
                    ttfb_p50_ms=rollup.percentile(histogram, 0.50) if histogram else None,
                    ttfb_p95_ms=rollup.percentile(histogram, 0.95) if histogram else None,
                    credits=round(credits, 6),
                )
            )
        return Traffic(
            window=window,
            since=since,
            bucket_s=bucket_s,
            buckets=tuple(buckets),
            errors=dict(sorted(failures.items(), key=lambda item: (-item[1], item[0]))),
            credits_by_day=tuple(
                CreditsDay(day, account, round(spent[0], 6), spent[1])
                for (day, account), spent in sorted(days.items())
            ),
        )

    async def _json(
        self, columns: Sequence[str], query: str, params: Sequence[Any]
    ) -> list[list[Any]]:
        """The rows of `query`, its `columns` of each, read as one JSON value (see `_INSERT`)."""
        found = await self._db.read_one(
            f"SELECT json_group_array(json_array({', '.join(columns)})) FROM ({query})",  # noqa: S608
            params,
        )
        return json.loads(found[0]) if found is not None else []

    async def _rows(self, clauses: str, params: Sequence[Any]) -> list[list[Any]]:
        """The rows `clauses` (WHERE, ORDER BY, LIMIT) select, each as [id, *`_COLUMNS`] with
        `at` a float; in no particular order."""
        found = await self._db.read_one(
            f"SELECT {_AS_JSON} FROM (SELECT * FROM oplog {clauses})",  # noqa: S608
            params,
        )
        rows: list[list[Any]] = json.loads(found[0]) if found is not None else []
        for row in rows:
            row[1] = float(row[1])
        return rows

    async def _insert(self, conn: aiosqlite.Connection, entries: Sequence[OpEntry]) -> None:
        """Write a batch and roll it up, in the one transaction of the write-behind."""
        batch = json.dumps([_row(entry) for entry in entries], allow_nan=False)
        await conn.execute(_INSERT, (batch,))
        await rollup.add(conn, len(entries), self._clock())


def _histogram(counts: Iterable[tuple[str, int]]) -> list[tuple[int, int]]:
    """The (bucket, rows) of a query's `ttfb` (value, rows), by bucket; empty if no rows."""
    return sorted((int(bucket), rows) for bucket, rows in counts if rows)


def _grouped(rows: Iterable[Sequence[Any]], key: int = 1) -> tuple[StatsGroup, ...]:
    """Rows of a stats query (kind, value, day, then `MEASURES`) summed by column `key`, most
    requests first."""
    sums: dict[str, tuple[int, int, float]] = {}
    for row in rows:
        known = sums.get(row[key], (0, 0, 0.0))
        sums[row[key]] = (known[0] + row[3], known[1] + row[3] - row[4], known[2] + row[7])
    groups = [StatsGroup(key, r, e, round(c, 6)) for key, (r, e, c) in sums.items()]
    return tuple(sorted(groups, key=lambda group: (-group.requests, group.key)))


def _finite(value: float | None) -> float | None:
    """A number JSON can carry: NaN or an infinity (never measured; credits as an upstream
    sent them) is stored as unknown rather than fail its whole batch."""
    return value if value is None or math.isfinite(value) else None


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
        _finite(entry.credits),
        _finite(entry.ttfb_ms),
        _finite(entry.total_ms) or 0.0,
        entry.status,
        entry.error,
        ",".join(entry.dropped),
        entry.truncations,
        entry.continuations,
        ",".join(entry.extensions),
        entry.cache,
        entry.cuts,
        _finite(entry.reserved_credits),
        entry.reserved_tokens,
    )


def _entry(row: Sequence[Any]) -> OpEntry:
    """A row as `_rows` reads it: [id, *`_COLUMNS`]."""
    fields = dict(zip(_COLUMNS, row[1:], strict=True))
    return OpEntry(
        **{name: fields[name] for name in _COLUMNS if name not in _CONVERTED},
        stream=bool(fields["stream"]),
        attempts=_attempts(fields["attempts"]),
        dropped=tuple(part for part in fields["dropped"].split(",") if part),
        extensions=tuple(part for part in fields["extensions"].split(",") if part),
    )


_CONVERTED = frozenset({"stream", "attempts", "dropped", "extensions"})


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
        cuts=entry.cuts,
        reserved_credits=entry.reserved_credits,
        reserved_tokens=entry.reserved_tokens,
        attempts=tuple(attempts),
    )


def _attempts(raw: str) -> tuple[Attempt, ...]:
    return tuple(Attempt.from_json(item) for item in json.loads(raw))
