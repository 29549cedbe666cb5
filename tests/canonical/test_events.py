"""The event grammar: well-formed streams pass, and each broken rule is caught."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest

from kirod.canonical.events import (
    SCHEMA_VERSION,
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    EventOrderError,
    MessageStart,
    MessageStop,
    RedactedThinking,
    SignatureDelta,
    StopReason,
    StreamValidator,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.errors import ApiError, ErrorKind, KirodError

START = MessageStart("msg_1", "claude-sonnet-4-5", 12)
END = MessageStop(StopReason.END_TURN)
FAIL = ErrorEvent(ErrorKind.UPSTREAM, "upstream failed", "upstream_error")


def text_block(index: int, *texts: str) -> list[CanonicalEvent]:
    return [
        BlockStart(index, BlockKind.TEXT),
        *(TextDelta(index, t) for t in texts),
        BlockStop(index),
    ]


def tool_block(index: int, tool_id: str, name: str, *parts: str) -> list[CanonicalEvent]:
    return [
        BlockStart(index, BlockKind.TOOL_USE, tool_id, name),
        *(ToolInputDelta(index, p) for p in parts),
        BlockStop(index),
    ]


def validate(events: Sequence[CanonicalEvent]) -> StreamValidator:
    validator = StreamValidator()
    for event in events:
        validator.feed(event)
    validator.finish()
    return validator


VALID: dict[str, list[CanonicalEvent]] = {
    "text": [START, *text_block(0, "Hel", "lo"), Usage(12, 2), END],
    "thinking_then_tool": [
        START,
        BlockStart(0, BlockKind.THINKING),
        ThinkingDelta(0, "Let me look."),
        SignatureDelta(0, "sig-a"),
        SignatureDelta(0, "sig-b"),
        BlockStop(0),
        *tool_block(1, "tu_1", "Read", '{"path":', '"a.txt"}'),
        Usage(12, 30, credits=0.04),
        MessageStop(StopReason.TOOL_USE),
    ],
    "multiple_tools": [
        START,
        *text_block(0, "Two calls."),
        *tool_block(1, "tu_1", "Read", '{"path":"a"}'),
        *tool_block(2, "tu_2", "Read", '{"path":"b"}'),
        MessageStop(StopReason.TOOL_USE),
    ],
    "redacted_thinking_takes_an_index": [
        START,
        RedactedThinking(0, "opaque"),
        *text_block(1, "ok"),
        END,
    ],
    "empty_message": [START, MessageStop(StopReason.MAX_TOKENS)],
    "stop_sequence": [START, *text_block(0, "a"), MessageStop(StopReason.STOP_SEQUENCE, "\n\n")],
    "error_before_start": [FAIL],
    "error_inside_block": [START, BlockStart(0, BlockKind.TEXT), TextDelta(0, "par"), FAIL],
    "usage_inside_block": [START, BlockStart(0, BlockKind.TEXT), Usage(12, 1), BlockStop(0), END],
}


@pytest.mark.parametrize("events", VALID.values(), ids=VALID.keys())
def test_valid_streams_pass(events: list[CanonicalEvent]) -> None:
    assert validate(events).ended


class FutureTextDelta(TextDelta):
    __slots__ = ()
    version: ClassVar[int] = SCHEMA_VERSION + 1


INVALID: dict[str, tuple[list[CanonicalEvent], str]] = {
    "nothing_before_start": ([TextDelta(0, "x")], "before MessageStart"),
    "block_before_start": ([BlockStart(0, BlockKind.TEXT)], "before MessageStart"),
    "second_start": ([START, START], "second MessageStart"),
    "first_index_not_zero": ([START, BlockStart(1, BlockKind.TEXT)], "index 1, expected 0"),
    "index_skipped": (
        [START, *text_block(0, "a"), BlockStart(2, BlockKind.TEXT)],
        "index 2, expected 1",
    ),
    "index_reused": (
        [START, *text_block(0, "a"), BlockStart(0, BlockKind.TEXT)],
        "index 0, expected 1",
    ),
    "two_blocks_open": (
        [START, BlockStart(0, BlockKind.TEXT), BlockStart(1, BlockKind.TEXT)],
        "while block 0 is open",
    ),
    "redacted_inside_block": (
        [START, BlockStart(0, BlockKind.THINKING), RedactedThinking(1, "x")],
        "while block 0 is open",
    ),
    "redacted_wrong_index": ([START, RedactedThinking(3, "x")], "index 3, expected 0"),
    "delta_without_block": ([START, TextDelta(0, "x")], "not open"),
    "delta_for_other_index": (
        [START, BlockStart(0, BlockKind.TEXT), TextDelta(1, "x")],
        "not open",
    ),
    "delta_after_stop": ([START, *text_block(0, "a"), TextDelta(0, "x")], "not open"),
    "text_in_thinking": (
        [START, BlockStart(0, BlockKind.THINKING), TextDelta(0, "x")],
        "TextDelta in a THINKING block",
    ),
    "thinking_in_text": (
        [START, BlockStart(0, BlockKind.TEXT), ThinkingDelta(0, "x")],
        "ThinkingDelta in a TEXT block",
    ),
    "signature_in_tool": (
        [START, BlockStart(0, BlockKind.TOOL_USE, "tu", "Read"), SignatureDelta(0, "s")],
        "SignatureDelta in a TOOL_USE block",
    ),
    "tool_input_in_text": (
        [START, BlockStart(0, BlockKind.TEXT), ToolInputDelta(0, "{}")],
        "ToolInputDelta in a TEXT block",
    ),
    "tool_block_without_id": (
        [START, BlockStart(0, BlockKind.TOOL_USE, None, "Read")],
        "lacks a tool_use_id",
    ),
    "tool_block_without_name": (
        [START, BlockStart(0, BlockKind.TOOL_USE, "tu", None)],
        "lacks a tool_use_id or tool_name",
    ),
    "text_block_names_tool": (
        [START, BlockStart(0, BlockKind.TEXT, "tu", "Read")],
        "TEXT block 0 names a tool",
    ),
    "stop_without_block": ([START, BlockStop(0)], "not open"),
    "stop_wrong_index": ([START, BlockStart(0, BlockKind.TEXT), BlockStop(1)], "not open"),
    "message_stop_with_open_block": (
        [START, BlockStart(0, BlockKind.TEXT), END],
        "MessageStop while block 0 is open",
    ),
    "event_after_message_stop": ([START, END, Usage(1, 1)], "after the terminal event"),
    "event_after_error": ([START, FAIL, END], "after the terminal event"),
    "start_after_error": ([FAIL, START], "after the terminal event"),
    "wrong_version": ([START, BlockStart(0, BlockKind.TEXT), FutureTextDelta(0, "x")], "schema 2"),
}


@pytest.mark.parametrize(("events", "message"), INVALID.values(), ids=INVALID.keys())
def test_grammar_violations_are_caught(events: list[CanonicalEvent], message: str) -> None:
    validator = StreamValidator()
    *prefix, culprit = events
    for event in prefix:
        validator.feed(event)
    with pytest.raises(EventOrderError, match=message):
        validator.feed(culprit)


@pytest.mark.parametrize(
    "events",
    [[], [START], [START, *text_block(0, "a")], [START, BlockStart(0, BlockKind.TEXT)]],
    ids=["empty", "start_only", "no_message_stop", "open_block"],
)
def test_finish_requires_a_terminal_event(events: list[CanonicalEvent]) -> None:
    validator = StreamValidator()
    for event in events:
        validator.feed(event)
    assert not validator.ended
    with pytest.raises(EventOrderError, match="without MessageStop or ErrorEvent"):
        validator.finish()


def test_event_order_error_is_a_kirod_error() -> None:
    assert issubclass(EventOrderError, KirodError)
    assert not issubclass(EventOrderError, ApiError)


def test_every_event_carries_the_schema_version() -> None:
    events: list[CanonicalEvent] = [
        START,
        BlockStart(0, BlockKind.TEXT),
        TextDelta(0, ""),
        ThinkingDelta(0, ""),
        SignatureDelta(0, ""),
        RedactedThinking(0, ""),
        ToolInputDelta(0, ""),
        BlockStop(0),
        Usage(0, 0),
        END,
        FAIL,
    ]
    assert {event.version for event in events} == {SCHEMA_VERSION}


def test_error_event_round_trips_an_api_error() -> None:
    error = ApiError(ErrorKind.RATE_LIMIT, "slow down", code="throttled")
    event = ErrorEvent.from_error(error)
    assert event == ErrorEvent(ErrorKind.RATE_LIMIT, "slow down", "throttled")
    again = event.to_error()
    assert (again.kind, again.message, again.code) == (error.kind, error.message, error.code)
