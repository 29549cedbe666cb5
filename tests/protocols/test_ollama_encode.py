"""Canonical events → Ollama NDJSON lines and the non-streaming object."""

from __future__ import annotations

import json
from typing import Any

from kirod.canonical.assemble import CanonicalCompletion
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.request import TextBlock, ThinkingBlock, ToolUseBlock
from kirod.errors import ErrorKind
from kirod.protocols.ollama import OllamaStreamEncoder, Timing, ollama_chat_json

NOW = "2026-01-02T03:04:05.000006Z"


def encode(events: list[CanonicalEvent], ticks: list[int]) -> list[dict[str, Any]]:
    times = iter(ticks)
    encoder = OllamaStreamEncoder(
        model="claude-sonnet-4-6", started_ns=1_000, clock=lambda: next(times), now=lambda: NOW
    )
    out = b"".join(chunk for event in events for chunk in encoder.feed(event))
    assert out.endswith(b"\n")
    return [json.loads(line) for line in out.decode().splitlines()]


def tool(index: int, call_id: str, name: str) -> BlockStart:
    return BlockStart(index, BlockKind.TOOL_USE, tool_use_id=call_id, tool_name=name)


def test_text_thinking_a_tool_call_and_the_final_counts() -> None:
    lines = encode(
        [
            MessageStart("msg_1", "claude-sonnet-4.6", 42),
            BlockStart(0, BlockKind.THINKING),
            ThinkingDelta(0, "Hmm."),
            BlockStop(0),
            BlockStart(1, BlockKind.TEXT),
            TextDelta(1, "Let me "),
            TextDelta(1, "look."),
            BlockStop(1),
            tool(2, "tooluse_a", "ls"),
            ToolInputDelta(2, '{"dir"'),
            ToolInputDelta(2, ': "/tmp"}'),
            BlockStop(2),
            tool(3, "tooluse_b", "pwd"),
            BlockStop(3),
            Usage(42, 17),
            MessageStop(StopReason.TOOL_USE),
        ],
        ticks=[3_000, 10_000],
    )
    assert [line["message"] for line in lines[:-1]] == [
        {"role": "assistant", "content": "", "thinking": "Hmm."},
        {"role": "assistant", "content": "Let me "},
        {"role": "assistant", "content": "look."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "tooluse_a",
                    "function": {"index": 0, "name": "ls", "arguments": {"dir": "/tmp"}},
                }
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "tooluse_b", "function": {"index": 1, "name": "pwd", "arguments": {}}}
            ],
        },
    ]
    assert all(line["done"] is False for line in lines[:-1])
    assert {(line["model"], line["created_at"]) for line in lines} == {("claude-sonnet-4-6", NOW)}
    assert lines[-1] == {
        "model": "claude-sonnet-4-6",
        "created_at": NOW,
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "total_duration": 9_000,
        "load_duration": 0,
        "prompt_eval_count": 42,
        "prompt_eval_duration": 2_000,
        "eval_count": 17,
        "eval_duration": 7_000,
    }


def test_an_answer_cut_by_the_output_limit_is_done_for_length() -> None:
    lines = encode(
        [
            MessageStart("msg_1", "m", 5),
            BlockStart(0, BlockKind.TEXT),
            TextDelta(0, "abc"),
            BlockStop(0),
            MessageStop(StopReason.MAX_TOKENS),
        ],
        ticks=[2_000, 4_000],
    )
    assert lines[-1]["done_reason"] == "length"


def test_a_failure_is_an_error_line_and_nothing_follows() -> None:
    lines = encode(
        [
            MessageStart("msg_1", "m", 5),
            BlockStart(0, BlockKind.TEXT),
            TextDelta(0, "ab"),
            ErrorEvent(ErrorKind.UPSTREAM, "Kiro stopped answering", "upstream_error"),
            BlockStop(0),
            MessageStop(StopReason.END_TURN),
        ],
        ticks=[2_000],
    )
    assert lines[-1] == {"error": "Kiro stopped answering"}
    assert len(lines) == 2


def test_tool_input_that_is_not_an_object_ends_the_stream_with_an_error() -> None:
    lines = encode(
        [
            MessageStart("msg_1", "m", 5),
            tool(0, "tooluse_a", "ls"),
            ToolInputDelta(0, "[1, 2]"),
            BlockStop(0),
            MessageStop(StopReason.TOOL_USE),
        ],
        ticks=[],
    )
    assert lines == [{"error": "the model produced tool input that is not a JSON object"}]


def test_the_keepalive_is_an_empty_chunk() -> None:
    encoder = OllamaStreamEncoder(model="m", started_ns=0, now=lambda: NOW)
    assert json.loads(encoder.keepalive()) == {
        "model": "m",
        "created_at": NOW,
        "message": {"role": "assistant", "content": ""},
        "done": False,
    }


def test_the_non_streaming_object() -> None:
    completion = CanonicalCompletion(
        message_id="msg_1",
        model="claude-sonnet-4.6",
        content=(
            ThinkingBlock("Hmm.", "sig"),
            TextBlock("Let me "),
            TextBlock("look."),
            ToolUseBlock("tooluse_a", "ls", {"dir": "/"}),
        ),
        stop_reason=StopReason.TOOL_USE,
        stop_sequence=None,
        usage=Usage(42, 17),
    )
    answer = ollama_chat_json(
        completion, model="claude-sonnet-4-6", timing=Timing(0, 10, 30), now=NOW
    )
    assert answer == {
        "model": "claude-sonnet-4-6",
        "created_at": NOW,
        "message": {
            "role": "assistant",
            "content": "Let me look.",
            "thinking": "Hmm.",
            "tool_calls": [
                {
                    "id": "tooluse_a",
                    "function": {"index": 0, "name": "ls", "arguments": {"dir": "/"}},
                }
            ],
        },
        "done": True,
        "done_reason": "stop",
        "total_duration": 30,
        "load_duration": 0,
        "prompt_eval_count": 42,
        "prompt_eval_duration": 10,
        "eval_count": 17,
        "eval_duration": 20,
    }
