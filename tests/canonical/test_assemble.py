"""Folding event streams into completions, and the failures that must surface as ApiError."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kirod.canonical.assemble import Assembler, CanonicalCompletion, assemble
from kirod.canonical.events import (
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
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.request import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock
from kirod.errors import ApiError, ErrorKind

START = MessageStart("msg_1", "claude-opus-4.7", 40)


def tool_events(index: int, tool_id: str, name: str, *parts: str) -> list[CanonicalEvent]:
    return [
        BlockStart(index, BlockKind.TOOL_USE, tool_id, name),
        *(ToolInputDelta(index, p) for p in parts),
        BlockStop(index),
    ]


def test_text_stream() -> None:
    completion = assemble(
        [
            START,
            BlockStart(0, BlockKind.TEXT),
            TextDelta(0, "Hello, "),
            TextDelta(0, "world"),
            BlockStop(0),
            Usage(40, 3, credits=0.01),
            MessageStop(StopReason.END_TURN),
        ]
    )
    assert completion == CanonicalCompletion(
        message_id="msg_1",
        model="claude-opus-4.7",
        content=(TextBlock("Hello, world"),),
        stop_reason=StopReason.END_TURN,
        stop_sequence=None,
        usage=Usage(40, 3, credits=0.01),
    )


def test_every_output_block_kind() -> None:
    completion = assemble(
        [
            START,
            BlockStart(0, BlockKind.THINKING),
            ThinkingDelta(0, "First, "),
            ThinkingDelta(0, "read the file."),
            SignatureDelta(0, "EqQB"),
            SignatureDelta(0, "Ckg="),
            BlockStop(0),
            RedactedThinking(1, "b64-blob"),
            BlockStart(2, BlockKind.THINKING),
            ThinkingDelta(2, "unsigned"),
            BlockStop(2),
            BlockStart(3, BlockKind.TEXT),
            TextDelta(3, "Reading."),
            BlockStop(3),
            *tool_events(4, "tu_1", "Read", '{"path": "a.txt"}'),
            MessageStop(StopReason.TOOL_USE),
        ]
    )
    assert completion.content == (
        ThinkingBlock("First, read the file.", "EqQBCkg="),
        RedactedThinkingBlock("b64-blob"),
        ThinkingBlock("unsigned", None),
        TextBlock("Reading."),
        ToolUseBlock("tu_1", "Read", {"path": "a.txt"}),
    )
    assert completion.stop_reason is StopReason.TOOL_USE


def test_tool_input_split_across_many_deltas() -> None:
    arguments = '{"command": "ls -la /tmp", "timeout": 30, "env": {"A": "1"}, "flags": [1, 2]}'
    parts = [arguments[i : i + 3] for i in range(0, len(arguments), 3)]
    completion = assemble(
        [START, *tool_events(0, "tu_1", "Bash", *parts), MessageStop(StopReason.TOOL_USE)]
    )
    [block] = completion.content
    assert block == ToolUseBlock(
        "tu_1",
        "Bash",
        {"command": "ls -la /tmp", "timeout": 30, "env": {"A": "1"}, "flags": [1, 2]},
    )


def test_multiple_tool_uses_keep_their_order() -> None:
    completion = assemble(
        [
            START,
            *tool_events(0, "tu_1", "Read", '{"path":', ' "a"}'),
            *tool_events(1, "tu_2", "Glob", '{"pattern": "*.py"}'),
            *tool_events(2, "tu_3", "Now"),
            MessageStop(StopReason.TOOL_USE),
        ]
    )
    assert completion.content == (
        ToolUseBlock("tu_1", "Read", {"path": "a"}),
        ToolUseBlock("tu_2", "Glob", {"pattern": "*.py"}),
        ToolUseBlock("tu_3", "Now", {}),
    )


def test_usage_defaults_to_message_start_and_last_usage_wins() -> None:
    bare = assemble([START, MessageStop(StopReason.END_TURN)])
    assert bare.usage == Usage(40, 0, credits=None)
    assert bare.content == ()

    revised = assemble(
        [START, Usage(40, 1), Usage(55, 9, credits=0.0421), MessageStop(StopReason.MAX_TOKENS)]
    )
    assert revised.usage == Usage(55, 9, credits=0.0421)
    assert revised.stop_reason is StopReason.MAX_TOKENS


def test_stop_sequence_is_carried() -> None:
    completion = assemble(
        [
            START,
            BlockStart(0, BlockKind.TEXT),
            TextDelta(0, "one"),
            BlockStop(0),
            MessageStop(StopReason.STOP_SEQUENCE, "END"),
        ]
    )
    assert (completion.stop_reason, completion.stop_sequence) == (StopReason.STOP_SEQUENCE, "END")


@pytest.mark.parametrize(
    "prefix",
    [[], [START], [START, BlockStart(0, BlockKind.TEXT), TextDelta(0, "partial")]],
    ids=["before_start", "after_start", "inside_block"],
)
def test_error_terminal_raises_api_error(prefix: list[CanonicalEvent]) -> None:
    events = [*prefix, ErrorEvent(ErrorKind.OVERLOADED, "upstream is busy", "overloaded")]
    with pytest.raises(ApiError) as caught:
        assemble(events)
    assert caught.value.kind is ErrorKind.OVERLOADED
    assert caught.value.message == "upstream is busy"
    assert caught.value.code == "overloaded"


def test_assembler_raises_from_feed_and_again_from_result() -> None:
    assembler = Assembler()
    assembler.feed(START)
    with pytest.raises(ApiError, match="cut off"):
        assembler.feed(ErrorEvent(ErrorKind.UPSTREAM, "cut off"))
    with pytest.raises(ApiError, match="cut off"):
        assembler.result()


@pytest.mark.parametrize(
    "parts",
    [['{"path": "a.t'], ["[1, 2]"], ['"text"'], ["null"], ["{} {}"]],
    ids=["truncated", "array", "string", "null", "trailing_data"],
)
def test_tool_input_that_is_not_an_object(parts: list[str]) -> None:
    assembler = Assembler()
    assembler.feed(START)
    *body, stop = tool_events(0, "tu_1", "Read", *parts)
    for event in body:
        assembler.feed(event)
    with pytest.raises(ApiError) as caught:
        assembler.feed(stop)
    assert caught.value.kind is ErrorKind.UPSTREAM
    assert caught.value.code == "tool_input_invalid"
    with pytest.raises(ApiError, match="not a JSON object"):
        assembler.result()


def test_assembler_validates_the_stream() -> None:
    assembler = Assembler()
    with pytest.raises(EventOrderError):
        assembler.feed(TextDelta(0, "x"))


def test_result_before_the_stream_ends() -> None:
    assembler = Assembler()
    assembler.feed(START)
    with pytest.raises(EventOrderError, match="without MessageStop"):
        assembler.result()


async def test_assembler_folds_an_async_stream() -> None:
    events: list[CanonicalEvent] = [
        START,
        BlockStart(0, BlockKind.TEXT),
        TextDelta(0, "hi"),
        BlockStop(0),
        MessageStop(StopReason.END_TURN),
    ]

    async def stream() -> AsyncIterator[CanonicalEvent]:
        for event in events:
            yield event

    assembler = Assembler()
    async for event in stream():
        assembler.feed(event)
    assert assembler.result().content == (TextBlock("hi"),)
