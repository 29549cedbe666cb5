"""The operation log's rollups: what the statistics and the traffic read instead of the rows.

`oplog_rollup` sums the rows by slot at three levels (`LEVELS`): UTC days and hours for as long as
rows are kept, and 10 seconds for the last `RECENT.keep_s` (for `kiroctl top`'s last minute, the
console's last hour in minutes, and the edges of other ranges). A slot holds the requests,
successes, tokens, credits and cut tool calls of its rows in all (kind `total`) and by each value
of each breakdown the statistics show (`account`, `model` as they name it, API `key`, `error`
code, and `status` for a failure without a code): a row counts once in each kind, so a slot takes
a few dozen rows whatever the traffic. Kind `ttfb` is the slot's first-byte times as a histogram
(`value` the bucket, `requests` its rows), good for nearest-rank percentiles to half a
millisecond below 64 ms, then within 1/64 (32 buckets per power of two, each reported as its
middle); keeping it in the same table lets one statement write, and one query read, everything.

The rollup is kept in the transaction that writes the rows (`add`) and in the one that drops
them (`drop`), by the statement that built it from the rows at the schema migration
(`kirod/storage/db.py`), so they agree with the rows at every commit: a crash loses both or
neither. A read over `[since, until)` (`cover`, `source`) takes whole days, then whole hours,
then whole recent 10-second slots, and rows only for what is left at its edges: `kiroctl stats`
reads a few thousand sums however large the log is. Every slot is derived from the row's whole
second (`CAST(at AS INTEGER)`), so the levels and the rows agree on the slot of every row, even
one 1 ulp before a boundary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

UNKNOWN_MODEL = "(unknown)"
"""How the statistics name the model of a request refused because no account serves it."""


@dataclass(frozen=True)
class Level:
    span_s: int  # a slot's seconds: slot = the row's whole second // span_s
    keep_s: float | None = None  # None: kept with the rows; else only for rows this recent
    read_s: float | None = None  # None: read for any range; else only for the last read_s

    @property
    def slot_sql(self) -> str:
        return f"CAST(at AS INTEGER) / {self.span_s}"


DAYS = Level(86400)
HOURS = Level(3600)
# Read for the last 70 minutes (the console's hour and the minute before it, and 10 minutes to
# spare for the maintenance pass that drops the slots kept beyond two hours running late).
RECENT = Level(10, keep_s=7200, read_s=4200)
LEVELS = (DAYS, HOURS, RECENT)  # the coarsest first

_EXACT_BELOW = 64  # milliseconds bucketed one by one; above, 32 buckets per power of two
_SUB_BUCKETS_LOG2 = 5
_LONGEST_LOG2 = 31  # 2**31 ms is 25 days: no first byte comes later


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
TTFB = "ttfb"  # the histogram's kind
_KIND_VALUE = (
    "CASE kind WHEN 'total' THEN '' WHEN 'account' THEN account_id WHEN 'model' THEN model"
    " WHEN 'key' THEN key_id WHEN 'error' THEN error ELSE CAST(http_status AS TEXT) END"
)
_KINDS_TABLE = " UNION ALL ".join(f"SELECT '{kind}' AS kind" for kind in KINDS)
_SUMS = ", ".join(f"SUM({sql}) AS {name}" for name, sql in MEASURES.items())
_NAMES = ", ".join(MEASURES)


def _rolled(time_sql: str, where: str, sign: int = 1) -> str:
    """The rows of `oplog` matching `where`, summed by `time_sql` (an expression of `at`) and by
    each kind's value, and their first-byte histogram; columns `t, kind, value` and `MEASURES`
    (times `sign`)."""
    grouped = (
        f"SELECT {time_sql} AS t, {', '.join(_DIMENSIONS)}, {_SUMS}"  # noqa: S608 - kirod's own
        f" FROM oplog WHERE {where} GROUP BY 1, 2, 3, 4, 5, 6"
    )
    signed = ", ".join(f"{sign} * {name} AS {name}" for name in MEASURES)
    zeros = ", ".join(["0"] * (len(MEASURES) - 1))
    return (
        f"SELECT t, kind, value, {signed} FROM (SELECT t, kind, {_KIND_VALUE} AS value,"  # noqa: S608
        f" {_NAMES} FROM ({grouped}) CROSS JOIN ({_KINDS_TABLE})) WHERE value IS NOT NULL"
        f" UNION ALL SELECT {time_sql}, '{TTFB}', CAST({BUCKET_SQL} AS TEXT),"
        f" {sign} * count(*), {zeros} FROM oplog WHERE ttfb_ms IS NOT NULL AND ({where})"
        " GROUP BY 1, 3"
    )


def roll(where: str, recent_since: str, sign: int = 1) -> str:
    """The statement that adds (`sign` 1) or takes away (-1) the rows of `oplog` matching
    `where` to or from every level, the recent one only for rows from `recent_since` (an SQL
    expression of epoch seconds) on."""

    def chosen(level: Level) -> str:
        return where if level.keep_s is None else f"({where}) AND at >= {recent_since}"

    levels = " UNION ALL ".join(
        f"SELECT {level.span_s}, * FROM ({_rolled(level.slot_sql, chosen(level), sign)})"  # noqa: S608
        for level in LEVELS
    )
    updates = ", ".join(f"{name} = {name} + excluded.{name}" for name in MEASURES)
    return (
        f"INSERT INTO oplog_rollup (span, slot, kind, value, {_NAMES})"  # noqa: S608
        f" SELECT * FROM ({levels}) WHERE true"
        f" ON CONFLICT (span, slot, kind, value) DO UPDATE SET {updates}"
    )


def fill(recent_since: str) -> str:
    """The statement that builds the rollup from the rows already written (the schema
    migration), the recent level from `recent_since` (an SQL expression of epoch seconds) on."""
    return roll("true", recent_since) + ";"


# The rows just written: the write-behind batch's ids follow the log's last one, one by one.
_ADD = roll("id > last_insert_rowid() - :rows", ":recent_since")
_BEFORE = "at <= :at AND (at < :at OR id < :id)"  # (at, id) < (:at, :id), in the index's order
_DROP = roll(_BEFORE, ":recent_since", sign=-1)


def _recent_since(now: float) -> float:
    assert RECENT.keep_s is not None
    return now - RECENT.keep_s


async def add(conn: aiosqlite.Connection, rows: int, now: float) -> None:
    """Roll up the `rows` rows the transaction has just inserted."""
    await conn.execute(_ADD, {"rows": rows, "recent_since": _recent_since(now)})


async def drop(conn: aiosqlite.Connection, before: tuple[float, int], now: float) -> None:
    """Delete the rows before `before` (at, id) in the log's time order, and take them out of
    the rollups (the recent level, as `add`, only those it keeps)."""
    at, row_id = before
    bounds = {"at": at, "id": row_id}
    await conn.execute(_DROP, {**bounds, "recent_since": _recent_since(now)})
    await conn.execute(f"DELETE FROM oplog WHERE {_BEFORE}", bounds)  # noqa: S608
    for level in LEVELS:  # the slots the rows were in, up to the one `before` is in
        await conn.execute(
            "DELETE FROM oplog_rollup WHERE span = ? AND slot <= ? AND requests = 0",
            (level.span_s, at / level.span_s),
        )


async def prune_recent(conn: aiosqlite.Connection, now: float) -> None:
    """Drop the recent level's slots older than it keeps."""
    oldest = math.floor(_recent_since(now) / RECENT.span_s)
    await conn.execute(
        "DELETE FROM oplog_rollup WHERE span = ? AND slot < ?", (RECENT.span_s, oldest)
    )


Segment = tuple[Level | None, float, float]  # a level (None: the rows) over [start, end)


def cover(since: float, until: float | None, now: float, *, bucket_s: int = 86400) -> list[Segment]:
    """How to read `[since, until)` (None: up to now and on): whole slots of the coarsest level
    that fits, then of finer ones towards the edges, and rows for what is left. Only levels
    whose slots lie within one bucket of `bucket_s` seconds are used (a bucket of a day: all)."""
    levels = [level for level in LEVELS if bucket_s % level.span_s == 0]
    return _cover(since, math.inf if until is None else until, now, levels)


def _cover(start: float, end: float, now: float, levels: Sequence[Level]) -> list[Segment]:
    if not levels:
        return [(None, start, end)]
    level, finer = levels[0], levels[1:]
    span = level.span_s
    usable = start if level.read_s is None else max(start, now - level.read_s)
    first = math.ceil(usable / span) * span
    last = math.inf if end == math.inf else math.floor(end / span) * span
    if first >= last:
        return _cover(start, end, now, finer)
    head = _cover(start, first, now, finer) if start < first else []
    tail = _cover(last, end, now, finer) if last < end else []
    return [*head, (level, first, last), *tail]


def source(segments: Sequence[Segment], *, rows_by: str | None = None) -> tuple[str, list[Any]]:
    """A subquery over `segments`, and its parameters. Rows are summed by `rows_by` (an
    expression of `at`; by default the start of their UTC day). Columns: `t` (that time, or the
    slot's start), `kind`, `value` and `MEASURES`."""
    by = rows_by or f"{DAYS.slot_sql} * {DAYS.span_s}.0"
    parts: list[str] = []
    params: list[Any] = []
    for level, start, end in segments:
        if level is None:
            parts.append(_rolled(by, "at >= ?" if end == math.inf else "at >= ? AND at < ?"))
            bounds: list[Any] = [start] if end == math.inf else [start, end]
            params += bounds * 2  # the sums, then the histogram
        else:
            slots = "slot >= ?" if end == math.inf else "slot >= ? AND slot < ?"
            parts.append(
                f"SELECT slot * {level.span_s}.0 AS t, kind, value, {_NAMES}"  # noqa: S608
                f" FROM oplog_rollup WHERE span = {level.span_s} AND {slots}"
            )
            params += [int(bound // level.span_s) for bound in (start, end) if bound != math.inf]
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
