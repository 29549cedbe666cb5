"""The operation log's rollups: what the statistics and the traffic read instead of the rows.

Two levels, each a table of sums and a histogram of first-byte times. `oplog_hours` has a slot per
UTC hour for as long as rows are kept; `oplog_recent` one per 10 seconds for the last
`RECENT_KEEP_S`, for the last minute (`kiroctl top`), the last hour in minutes (the console) and
the edges of other ranges. A slot holds the requests, successes, tokens, credits and cut tool
calls of its rows in all (kind `total`) and by each value of each breakdown the statistics show
(`account`, `model` as they name it, API `key`, `error` code, and `status` for a failure without
a code): a row counts once in each kind, so a slot takes a few dozen rows whatever the traffic.
The histogram (`bucket`) keeps nearest-rank percentiles to half a millisecond below 64 ms, then
within 1/64 (32 buckets per power of two, each reported as its middle).

Both levels are kept in the transaction that writes the rows (`add`) and in the one that drops
them (`drop`), by the statements that built them from the rows at the schema migration
(`kirod/storage/db.py`), so they agree with the rows at every commit: a crash loses both or
neither. A read over `[since, until)` (`source`) takes whole hours from the first level, whole
10-second slots of the last `RECENT_READ_S` from the second, and rows only for what is left at
its edges. Every slot is derived from the row's whole second (`CAST(at AS INTEGER)`), so the
levels and the rows agree on which slot a row is in, even a row 1 ulp before a boundary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

UNKNOWN_MODEL = "(unknown)"
"""How the statistics name the model of a request refused because no account serves it."""
RECENT_KEEP_S = 7200
"""How long the 10-second slots are kept (by `prune_recent`)."""
RECENT_READ_S = 4200
"""How far back reads use the 10-second slots: the last hour's minutes, and 10 minutes to spare
for `prune_recent` running late (which only drops slots older than `RECENT_KEEP_S`)."""

_EXACT_BELOW = 64  # milliseconds bucketed one by one; above, 32 buckets per power of two
_SUB_BUCKETS_LOG2 = 5
_LONGEST_LOG2 = 31  # 2**31 ms is 25 days: no first byte comes later


@dataclass(frozen=True)
class Level:
    table: str
    ttfb: str
    span_s: int  # a slot's seconds; slot = whole second // span_s

    @property
    def slot_sql(self) -> str:
        return f"CAST(at AS INTEGER) / {self.span_s}"


HOURS = Level("oplog_hours", "oplog_ttfb", 3600)
RECENT = Level("oplog_recent", "oplog_recent_ttfb", 10)
LEVELS = (HOURS, RECENT)


def _shift(whole: int) -> int:
    """How many low bits a bucket drops from a whole number of milliseconds of 64 or more."""
    return min(whole.bit_length() - 1, _LONGEST_LOG2) - _SUB_BUCKETS_LOG2


def bucket(ms: float) -> int:
    """The histogram bucket of a first-byte time, as `BUCKET_SQL` computes it."""
    whole = int(ms)
    return whole if whole < _EXACT_BELOW else whole >> _shift(whole) << _shift(whole)


def bucket_middle(start: int) -> float:
    """The value reported for a bucket: its middle (buckets span [start, next start))."""
    width = 1 if start < _EXACT_BELOW else 1 << _shift(start)
    return start + width / 2


def _bucket_sql(column: str) -> str:
    whole = f"CAST({column} AS INTEGER)"
    cases = [f"WHEN {column} < {_EXACT_BELOW} THEN {whole}"]
    for power in range(_EXACT_BELOW.bit_length() - 1, _LONGEST_LOG2):
        shift = power - _SUB_BUCKETS_LOG2
        cases.append(f"WHEN {column} < {1 << (power + 1)} THEN ({whole} >> {shift}) << {shift}")
    shift = _LONGEST_LOG2 - _SUB_BUCKETS_LOG2
    return f"CASE {' '.join(cases)} ELSE ({whole} >> {shift}) << {shift} END"


BUCKET_SQL = _bucket_sql("ttfb_ms")

# What one row of `oplog` contributes. A request succeeded when its status is below 400 and its
# stream did not end in an error; the statistics count a name no account serves
# (`model_not_found`) as one `UNKNOWN_MODEL`, so that invented names never fill them.
_DIMENSIONS = (
    "account_id",
    f"CASE WHEN error = 'model_not_found' THEN '{UNKNOWN_MODEL}' ELSE model END AS model",
    "key_id",
    "error",
    "CASE WHEN error IS NULL AND status >= 400 THEN status END AS http_status",
)
MEASURES: dict[str, str] = {
    "requests": "1",
    "succeeded": "status < 400 AND error IS NULL",
    "input_tokens": "COALESCE(input_tokens, 0)",
    "output_tokens": "COALESCE(output_tokens, 0)",
    "credits": "COALESCE(credits, 0.0)",
    "truncated": "truncations > 0",
    "recovered": "continuations > 0 AND status < 400 AND error IS NULL",
}
KINDS = ("total", "account", "model", "key", "error", "status")
_KIND_VALUE = (
    "CASE kind WHEN 'total' THEN '' WHEN 'account' THEN account_id WHEN 'model' THEN model"
    " WHEN 'key' THEN key_id WHEN 'error' THEN error ELSE CAST(http_status AS TEXT) END"
)
_KINDS_TABLE = " UNION ALL ".join(f"SELECT '{kind}' AS kind" for kind in KINDS)
_SUMS = ", ".join(f"SUM({sql}) AS {name}" for name, sql in MEASURES.items())
_NAMES = ", ".join(MEASURES)


def _by_kind(time_sql: str, where: str, sign: int = 1) -> str:
    """The rows of `oplog` matching `where`, summed by `time_sql` (an expression of `at`) and by
    each kind's value; columns `t, kind, value` and `MEASURES` (times `sign`)."""
    grouped = (
        f"SELECT {time_sql} AS t, {', '.join(_DIMENSIONS)}, {_SUMS}"  # noqa: S608 - kirod's own
        f" FROM oplog WHERE {where} GROUP BY 1, 2, 3, 4, 5, 6"
    )
    signed = ", ".join(f"{sign} * {name} AS {name}" for name in MEASURES)
    return (
        f"SELECT t, kind, value, {signed} FROM (SELECT t, kind, {_KIND_VALUE} AS value,"  # noqa: S608
        f" {_NAMES} FROM ({grouped}) CROSS JOIN ({_KINDS_TABLE})) WHERE value IS NOT NULL"
    )


def roll(level: Level, where: str, sign: int = 1) -> tuple[str, str]:
    """The two statements that add (`sign` 1) or take away (-1) the rows of `oplog` matching
    `where` to or from `level`; what they leave at zero or below is for `drop` to delete."""
    updates = ", ".join(f"{name} = {name} + excluded.{name}" for name in MEASURES)
    sums = (
        f"INSERT INTO {level.table} (slot, kind, value, {_NAMES})"  # noqa: S608 - kirod's own
        f" SELECT t, kind, value, {_NAMES} FROM ({_by_kind(level.slot_sql, where, sign)})"
        f" WHERE true ON CONFLICT (slot, kind, value) DO UPDATE SET {updates}"
    )
    ttfb = (
        f"INSERT INTO {level.ttfb} (slot, bucket, count)"  # noqa: S608 - kirod's own
        f" SELECT {level.slot_sql}, {BUCKET_SQL}, {sign} * count(*)"
        f" FROM oplog WHERE ttfb_ms IS NOT NULL AND ({where}) GROUP BY 1, 2"
        f" ON CONFLICT (slot, bucket) DO UPDATE SET count = count + excluded.count"
    )
    return sums, ttfb


def fill(recent_since: str) -> str:
    """The script that builds both levels from the rows already written (the schema migration);
    the 10-second slots only from `recent_since` (an SQL expression of epoch seconds) on."""
    statements = [*roll(HOURS, "true"), *roll(RECENT, f"at >= {recent_since}")]
    return ";\n".join(statements) + ";"


_ADD = tuple(statement for level in LEVELS for statement in roll(level, "id > ?"))
_BEFORE = "at <= ? AND (at < ? OR id < ?)"  # (at, id) < (?, ?), in the index's order
_DROP = tuple(statement for level in LEVELS for statement in roll(level, _BEFORE, sign=-1))


async def add(conn: aiosqlite.Connection, after_id: int) -> None:
    """Roll up the rows just written, those with an id above `after_id`."""
    for statement in _ADD:
        await conn.execute(statement, (after_id,))


async def drop(conn: aiosqlite.Connection, before: tuple[float, int]) -> None:
    """Delete the rows before `before` (at, id) in the log's time order, and take them out of
    both levels (a 10-second slot already pruned comes back below zero, and goes again)."""
    at, row_id = before
    for statement in _DROP:
        await conn.execute(statement, (at, at, row_id))
    await conn.execute(f"DELETE FROM oplog WHERE {_BEFORE}", (at, at, row_id))  # noqa: S608
    for level in LEVELS:
        last = at / level.span_s  # the slots that lost rows: up to the one `before` is in
        await conn.execute(
            f"DELETE FROM {level.table} WHERE slot <= ? AND requests <= 0",  # noqa: S608
            (last,),
        )
        zeros = f"DELETE FROM {level.ttfb} WHERE slot <= ? AND count <= 0"  # noqa: S608
        await conn.execute(zeros, (last,))


async def prune_recent(conn: aiosqlite.Connection, now: float) -> None:
    """Drop the 10-second slots older than `RECENT_KEEP_S`."""
    oldest = math.floor((now - RECENT_KEEP_S) / RECENT.span_s)
    for table in (RECENT.table, RECENT.ttfb):
        await conn.execute(f"DELETE FROM {table} WHERE slot < ?", (oldest,))  # noqa: S608


Segment = tuple[Level | None, float, float]  # a level (None: the rows) over [start, end)


def cover(since: float, until: float | None, now: float, *, hours: bool = True) -> list[Segment]:
    """How to read `[since, until)` (None: no end): whole hours from `HOURS` (with `hours`),
    whole 10-second slots of the last `RECENT_READ_S` from `RECENT`, the rest from the rows."""
    end = math.inf if until is None else until
    first = math.ceil(since / HOURS.span_s) * HOURS.span_s
    last = math.inf if until is None else math.floor(end / HOURS.span_s) * HOURS.span_s
    if not hours or first >= last:
        return _finely(since, end, now)
    if until is None:  # the hours run on to now: the current hour's slot has every row so far
        return [*_finely(since, first, now), (HOURS, first, last)]
    return [*_finely(since, first, now), (HOURS, first, last), *_finely(last, end, now)]


def _finely(start: float, end: float, now: float) -> list[Segment]:
    """`[start, end)` from the 10-second slots where they are kept whole, else from the rows;
    never empty (a segment of rows may be)."""
    span = RECENT.span_s
    first = math.ceil(max(start, now - RECENT_READ_S) / span) * span
    last = math.floor(end / span) * span if end != math.inf else math.inf
    if first >= last:
        return [(None, start, end)]
    parts: list[Segment] = [(None, start, first), (RECENT, first, last), (None, last, end)]
    return [part for part in parts if part[1] < part[2]]


def source(
    segments: Sequence[Segment], *, histogram: bool = False, rows_by: str | None = None
) -> tuple[str, list[Any]]:
    """A subquery over `segments`, and its parameters. Rows are summed by `rows_by` (an
    expression of `at`; by default the start of their hour, as `HOURS` has them). Columns: `t`
    (that time, or the slot's start), `kind`, `value` and `MEASURES`; with `histogram`, `t`,
    `bucket` and `count` (of the rows with a first byte)."""
    by = rows_by or f"{HOURS.slot_sql} * {HOURS.span_s}.0"
    parts: list[str] = []
    params: list[Any] = []
    for level, start, end in segments:
        bounded = "at >= ?" if end == math.inf else "at >= ? AND at < ?"
        bounds = [start] if end == math.inf else [start, end]
        if level is None and histogram:
            parts.append(
                f"SELECT {by} AS t, {BUCKET_SQL} AS bucket, count(*) AS count"  # noqa: S608
                f" FROM oplog WHERE ttfb_ms IS NOT NULL AND {bounded} GROUP BY 1, 2"
            )
        elif level is None:
            parts.append(_by_kind(by, bounded))
        else:
            columns = "bucket, count" if histogram else f"kind, value, {_NAMES}"
            slots = "slot >= ?" if end == math.inf else "slot >= ? AND slot < ?"
            parts.append(
                f"SELECT slot * {level.span_s}.0 AS t, {columns}"  # noqa: S608
                f" FROM {level.ttfb if histogram else level.table} WHERE {slots}"
            )
            bounds = [int(bound // level.span_s) for bound in bounds]
        params += bounds
    union = " UNION ALL ".join(f"SELECT * FROM ({part})" for part in parts)  # noqa: S608
    return f"({union})", params


def percentile(histogram: Sequence[tuple[int, int]], fraction: float) -> float:
    """The nearest-rank percentile of a histogram of (bucket, count), sorted by bucket."""
    total = sum(count for _, count in histogram)
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for start, count in histogram:
        seen += count
        if seen >= rank:
            return bucket_middle(start)
    raise ValueError("an empty histogram has no percentile")
