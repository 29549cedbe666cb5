"""Log formatting: one line per event, text or JSON, journald-friendly."""

from __future__ import annotations

import collections
import functools
import json
import logging
import math
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from kirod.log import FIELDS_ATTR, ROOT, request_id_var
from kirod.report_types import LogLines

# Quoted: separators, and every control character a client could smuggle into a value (a path
# with ESC or CR must not rewrite a terminal or forge a log line). json.dumps escapes them all,
# and every non-ASCII character, except DEL, done by hand.
_NEEDS_QUOTES = re.compile(r'[\x00-\x20"=\x7f-\x9f]')


def _render_value(value: Any) -> str:
    if value.__class__ is int or (value.__class__ is float and math.isfinite(value)):
        return repr(value)  # as json.dumps spells it, a few times faster, and never quoted
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text == "" or _NEEDS_QUOTES.search(text):
        return json.dumps(text).replace("\x7f", "\\u007f")
    return text


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    given = getattr(record, FIELDS_ATTR, None) or {}
    fields: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    request_id = request_id_var.get()
    if request_id is not None and "request_id" not in fields:
        fields["request_id"] = request_id
    return fields


@functools.lru_cache(maxsize=4)
def _second(epoch_second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_second))


def _timestamp(record: logging.LogRecord) -> str:
    return f"{_second(int(record.created))}.{int(record.msecs):03d}Z"


_LINE_ATTR = "kirod_line"


def _once(record: logging.LogRecord, render: Callable[[logging.LogRecord], str]) -> str:
    """`render(record)`, computed once per line format: stderr and the `kiroctl logs` tail both
    write each line, and the second handler takes the first one's string."""
    lines: dict[str, str] = record.__dict__.setdefault(_LINE_ATTR, {})
    key = render.__qualname__
    line = lines.get(key)
    if line is None:
        line = lines[key] = render(record)
    return line


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return _once(record, self._render)

    def _render(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record), record.levelname.lower(), record.name, record.getMessage()]
        parts += [f"{key}={_render_value(value)}" for key, value in _fields(record).items()]
        if record.exc_info and record.exc_info[0] is not None:
            parts.append(f"exc_type={record.exc_info[0].__name__}")
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return _once(record, self._render)

    def _render(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        doc.update(_fields(record))
        if record.exc_info and record.exc_info[0] is not None:
            doc["exc_type"] = record.exc_info[0].__name__
        return json.dumps(doc, default=str, separators=(",", ":")).replace("\x7f", "\\u007f")


def configure(level: str, fmt: str) -> None:
    """Send kirod's events to stderr; third-party loggers are kept at warning."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger(ROOT).setLevel(level.upper())
    # No line shows the caller's file, thread or process: the logging HOWTO's "Optimization"
    # switches skip collecting them, a third of the cost of each record (one per request).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


TAIL_MAX_BYTES = 1 << 20  # what the in-memory tail keeps of the newest lines
MAX_LINE_BYTES = 8192  # a longer line is cut, so that one event cannot fill the tail


class LogTail(logging.Handler):
    """The newest lines of the daemon's log, numbered from 1, for `kiroctl logs` (`GET /logs`).

    kirod logs to stderr (journald, launchd or a terminal keeps it); this handler keeps the same
    lines, formatted as stderr's are, in memory up to `TAIL_MAX_BYTES`, so that the control API can
    hand out the lines after a number without knowing where stderr goes.
    """

    def __init__(self, formatter: logging.Formatter, *, max_bytes: int = TAIL_MAX_BYTES) -> None:
        super().__init__()
        self.setFormatter(formatter)
        self._lines: collections.deque[tuple[int, str]] = collections.deque()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._last = 0  # the number of the newest line
        self._tail_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        if len(line) > MAX_LINE_BYTES:
            line = line[:MAX_LINE_BYTES] + "…"
        with self._tail_lock:
            self._last += 1
            self._lines.append((self._last, line))
            self._bytes += len(line) + 1
            while self._bytes > self._max_bytes and len(self._lines) > 1:
                _, dropped = self._lines.popleft()
                self._bytes -= len(dropped) + 1

    def read(self, *, after: int | None, lines: int, max_bytes: int) -> LogLines:
        """The lines numbered above `after` (None: the newest `lines`), at most `max_bytes`."""
        with self._tail_lock:
            kept = list(self._lines)
            last = self._last
        if after is None:
            chosen = kept[-lines:] if lines > 0 else []
            missed = 0
        else:
            after = min(max(after, 0), last)
            chosen = [item for item in kept if item[0] > after]
            first = chosen[0][0] if chosen else last + 1
            missed = max(0, first - after - 1)
        out: list[str] = []
        size = 0
        number = after if after is not None else (chosen[0][0] - 1 if chosen else last)
        for line_number, line in chosen:
            size += len(line.encode("utf-8", "replace")) + 1
            if out and size > max_bytes:  # always one line, however long (MAX_LINE_BYTES)
                return LogLines(tuple(out), number, missed, more=True)
            out.append(line)
            number = line_number
        return LogLines(tuple(out), number, missed)


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of `log_format` `fmt`: JSON or text lines."""
    return JsonFormatter() if fmt == "json" else TextFormatter()
