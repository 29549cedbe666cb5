"""Log formatting: one line per event, text or JSON, journald-friendly."""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
import time
from typing import Any

from kirod.log import FIELDS_ATTR, request_id_var

# Quoted: separators, and every control character a client could smuggle into a value (a path
# with ESC or CR must not rewrite a terminal or forge a log line). json.dumps escapes them all,
# and every non-ASCII character, except DEL, done by hand.
_NEEDS_QUOTES = re.compile(r'[\x00-\x20"=\x7f-\x9f]')


def _render_value(value: Any) -> str:
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


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record), record.levelname.lower(), record.name, record.getMessage()]
        parts += [f"{key}={_render_value(value)}" for key, value in _fields(record).items()]
        if record.exc_info and record.exc_info[0] is not None:
            parts.append(f"exc_type={record.exc_info[0].__name__}")
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
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
    logging.getLogger("kirod").setLevel(level.upper())
