"""Drift: where Kiro answered in a way kirod does not know, recorded by shape.

Kiro changes without notice (a new event type, a new error reason, a window that grows on some
accounts, a catalog field), and each change so far reached kirod's users as a quiet misbehaviour.
Wherever kirod meets such a thing it keeps serving as well as it can and calls `Drift.observe`
with the thing's **shape**: its kind, where it was met (the Kiro operation), and a few named
facts that are key names, type names, codes and counts. Never text, tokens, ids or content:
every value goes through `shape_value`, which keeps a code-like word with its digits and ARNs
masked and replaces anything else by its length.

What is observed is summed in memory by (UTC day, kind, where, shape); the daemon writes the sums
to the store (`kirod.storage.drift`) in the maintenance pass and on shutdown, and `kiroctl
doctor` reads them. Bounded everywhere: at most `MAX_SHAPES_PER_DAY` shapes of one kind a day
(the rest are summed as one `other` shape), and a kind reaches the log at most once per
`LOG_INTERVAL_S`. On the request path an observation is a dictionary update; nothing is
observed when Kiro answers as kirod knows.

The kinds are `Kind`; docs/RELIABILITY.md lists them, under "Drift", with what kirod does
about each.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from kirod import __version__, log

logger = logging.getLogger(__name__)

LOG_INTERVAL_S: Final = 3600.0
MAX_SHAPES_PER_DAY: Final = 16
MAX_FACTS: Final = 8
MAX_VALUE_CHARS: Final = 200
MAX_WORD_CHARS: Final = 48  # a name's longest part: longer ones read as a token or a blob
OTHER: Final = "other"


class Kind(enum.StrEnum):
    """What kirod met that it does not know."""

    EVENT_TYPE = "event_type"  # a frame's event type kirod does not read
    STOP_REASON = "stop_reason"  # a metadataEvent stopReason kirod does not know
    ERROR_REASON = "error_reason"  # an error's __type or reason unknown for its status
    HTTP_STATUS = "http_status"  # a status from a Kiro endpoint that kirod does not classify
    TAIL_MISSING = "tail_missing"  # an answer that ended cleanly without its tail frames
    CATALOG_FIELD = "catalog_field"  # a catalog field, input type, schema key or enum value
    SCHEMA_REFUSAL = "schema_refusal"  # Kiro refused a request field kirod sent
    WINDOW = "window"  # a learned context window that differs from the listed one
    USAGE_FIELD = "usage_field"  # a usage-API field kirod does not read


# A value that reads as a code or a name (an event type, a reason, a key, a model id) is kept;
# ARNs, ids (a UUID, a long hex run) and more than `_KEPT_DIGITS` digits (an account number, a
# date) are masked, so a version like `claude-sonnet-4.5` stays readable and an id does not.
_CODE = re.compile(r"[A-Za-z_?][\w.:$/*#,+-]*")
_ARN = re.compile(r"arn:[\w-]*:[^\s,;]*")
_ID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}|[0-9a-fA-F]{12,}")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[^,./:$]+")
_KEPT_DIGITS = 4


def shape_value(value: object) -> str:
    """A fact as it may be stored: a number as itself, a code-like word (its ARNs as `arn:*`,
    its ids as `<id>`, its digits as `#` when they could count something), anything else (free
    text, content) only by its length."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        return type(value).__name__
    masked = _ID.sub("<id>", _ARN.sub("arn:*", value))
    if sum(char.isdigit() for char in masked) > _KEPT_DIGITS:
        masked = _DIGITS.sub("#", masked)
    if (
        len(masked) <= MAX_VALUE_CHARS
        and _CODE.fullmatch(masked.replace("<id>", "_id_"))
        and all(len(word) <= MAX_WORD_CHARS for word in _WORD.findall(masked))
    ):
        return masked
    return f"<{len(value)} chars>"


def type_name(value: object) -> str:
    """The JSON type of `value`, as a shape names it."""
    match value:
        case None:
            return "null"
        case bool():
            return "boolean"
        case int() | float():
            return "number"
        case str():
            return "string"
        case Mapping():
            return "object"
        case list() | tuple():
            return "array"
    return type(value).__name__


def key_names(mapping: Mapping[str, object], limit: int = 12) -> str:
    """The sorted key names of `mapping` as one fact, each as `shape_value` keeps it (a key that
    is no code as `?`), as many as a fact holds (`MAX_VALUE_CHARS`) and the count of the rest."""
    names = sorted({name if _CODE.fullmatch(name := shape_value(key)) else "?" for key in mapping})
    kept: list[str] = []
    for name in names[:limit]:
        if len(",".join([*kept, name])) > MAX_VALUE_CHARS - 4:
            break
        kept.append(name)
    more = len(names) - len(kept)
    return ",".join(kept) + (f",+{more}" if more > 0 else "")


Shape = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class Record:
    """One shape of one kind on one UTC day, summed."""

    day: str  # YYYY-MM-DD, UTC
    kind: Kind
    where: str
    shape: Shape
    count: int
    first_seen: float
    last_seen: float
    region: str | None = None
    version: str = __version__

    def merge(self, other: Record) -> None:
        self.count += other.count
        self.first_seen = min(self.first_seen, other.first_seen)
        self.last_seen = max(self.last_seen, other.last_seen)
        self.region = self.region or other.region


Key = tuple[str, Kind, str, Shape]


@dataclass(frozen=True, slots=True)
class Seen:
    """One observation as a `watching` block saw it."""

    kind: Kind
    where: str
    shape: Shape


MAX_WATCHED = 32
# The observations of the `watching` block the current task (or the task that started it) is in.
_watched: contextvars.ContextVar[list[Seen] | None] = contextvars.ContextVar(
    "kirod_drift_watched", default=None
)


@contextlib.contextmanager
def watching() -> Iterator[list[Seen]]:
    """What this task, and the tasks it starts, observe inside the block (at most
    `MAX_WATCHED`), besides the sums every observation goes to: `kiroctl doctor --live` tells
    which of its checks met drift, whatever other requests meet at the same time."""
    seen: list[Seen] = []
    token = _watched.set(seen)
    try:
        yield seen
    finally:
        _watched.reset(token)


@dataclass(slots=True)
class _Day:
    day: str
    shapes: dict[Kind, set[tuple[str, Shape]]] = field(default_factory=dict)


class Drift:
    """Observations summed by (day, kind, where, shape) until `take` hands them to the store."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        log_interval_s: float = LOG_INTERVAL_S,
    ) -> None:
        self._clock = clock
        self._pending: dict[Key, Record] = {}
        self._logs: dict[Kind, log.Throttle] = {
            kind: log.Throttle(logger, log_interval_s) for kind in Kind
        }
        self._today = _Day("")

    def observe(
        self, kind: Kind, where: str, *, region: str | None = None, **facts: object
    ) -> None:
        """Record that Kiro's `where` answered with something of `kind` that kirod does not know;
        `facts` are its shape (names, types, codes, counts) and pass through `shape_value`."""
        now = self._clock()
        day = time.strftime("%Y-%m-%d", time.gmtime(now))
        shape: Shape = tuple(
            sorted((name, shape_value(value)) for name, value in facts.items() if value is not None)
        )[:MAX_FACTS]
        where = shape_value(where)
        watched = _watched.get()
        if watched is not None and len(watched) < MAX_WATCHED:
            watched.append(Seen(kind, where, shape))
        if self._today.day != day:
            self._today = _Day(day)
        seen = self._today.shapes.setdefault(kind, set())
        if (where, shape) not in seen:
            if len(seen) >= MAX_SHAPES_PER_DAY:
                where, shape = OTHER, ()
            seen.add((where, shape))
        key = (day, kind, where, shape)
        record = self._pending.get(key)
        if record is None:
            record = self._pending[key] = Record(day, kind, where, shape, 0, now, now, region)
        record.count += 1
        record.last_seen = now
        record.region = record.region or region
        self._logs[kind].event(
            "kiro_drift",
            level=logging.WARNING,
            kind=kind.value,
            where=where,
            region=region,
            **dict(shape),
        )

    def pending(self) -> list[Record]:
        """What was observed and not yet taken, as copies (for reports before the next write)."""
        return [
            Record(r.day, r.kind, r.where, r.shape, r.count, r.first_seen, r.last_seen, r.region)
            for r in self._pending.values()
        ]

    def take(self) -> list[Record]:
        """What was observed since the last `take`, for the store; the sums start again."""
        taken, self._pending = list(self._pending.values()), {}
        return taken

    def give_back(self, records: list[Record]) -> None:
        """Records the store could not take: summed in again, to be written next time."""
        for record in records:
            key = (record.day, record.kind, record.where, record.shape)
            kept = self._pending.get(key)
            if kept is None:
                self._pending[key] = record
            else:
                kept.merge(record)
