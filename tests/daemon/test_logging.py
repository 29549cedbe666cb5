"""Log lines: one per event, carrying the request id, in text or JSON."""

from __future__ import annotations

import json
import logging
import sys

from kirod import log
from kirod.daemon.logging import JsonFormatter, TextFormatter


def record(name: str, **fields: object) -> logging.LogRecord:
    logger = logging.getLogger("kirod.test")
    rec = logger.makeRecord("kirod.test", logging.INFO, __file__, 1, name, (), None)
    setattr(rec, log.FIELDS_ATTR, fields)
    return rec


def test_text_lines_quote_values_that_need_it() -> None:
    token = log.request_id_var.set("req_abc")
    try:
        line = TextFormatter().format(record("request", path="/v1/x", note="two words", n=3))
    finally:
        log.request_id_var.reset(token)
    assert "\n" not in line
    assert ' info kirod.test request path=/v1/x note="two words" n=3 request_id=req_abc' in line


def test_json_lines_are_one_object_per_event() -> None:
    line = JsonFormatter().format(record("ready", public="127.0.0.1:1", multi="a\nb"))
    assert "\n" not in line
    doc = json.loads(line)
    assert doc["event"] == "ready"
    assert doc["public"] == "127.0.0.1:1"
    assert doc["multi"] == "a\nb"
    assert "request_id" not in doc


def test_exceptions_are_reduced_to_their_type() -> None:
    try:
        raise ValueError("secret detail sk-123")
    except ValueError:
        rec = logging.getLogger("kirod.test").makeRecord(
            "kirod.test", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    for formatter in (TextFormatter(), JsonFormatter()):
        line = formatter.format(rec)
        assert "ValueError" in line
        assert "secret detail" not in line


def test_control_characters_never_reach_a_line_raw() -> None:
    hostile = "/v1/\x1b]0;pwned\x07\rfake line\x7f\x9b"
    for formatter in (TextFormatter(), JsonFormatter()):
        line = formatter.format(record("request", path=hostile))
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in line), repr(line)
    text = TextFormatter().format(record("request", path=hostile))
    assert json.loads(text.split("path=", 1)[1]) == hostile  # escaped, not lost


def test_a_record_is_rendered_once_per_format() -> None:
    """stderr's handler and the log tail share the line; another format renders its own."""
    rec = record("request", path="/v1/messages")
    text = TextFormatter().format(rec)
    assert TextFormatter().format(rec) is text
    as_json = JsonFormatter().format(rec)
    assert json.loads(as_json)["path"] == "/v1/messages"
    assert TextFormatter().format(rec) is text
