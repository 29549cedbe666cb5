"""Canonical event streams and SSE parsing shared by the Responses and Chat codec tests."""

from __future__ import annotations

import json
from typing import Any

from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
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

START = MessageStart("msg_up", "claude-sonnet-4.5", 42)
USAGE = Usage(42, 17)


def text(index: int, *parts: str) -> list[CanonicalEvent]:
    return [
        BlockStart(index, BlockKind.TEXT),
        *(TextDelta(index, p) for p in parts),
        BlockStop(index),
    ]


def thinking(index: int, *parts: str, signature: str | None = None) -> list[CanonicalEvent]:
    signed: list[CanonicalEvent] = [SignatureDelta(index, signature)] if signature else []
    return [
        BlockStart(index, BlockKind.THINKING),
        *(ThinkingDelta(index, p) for p in parts),
        *signed,
        BlockStop(index),
    ]


def tool(index: int, tool_id: str, name: str, *parts: str) -> list[CanonicalEvent]:
    return [
        BlockStart(index, BlockKind.TOOL_USE, tool_id, name),
        *(ToolInputDelta(index, p) for p in parts),
        BlockStop(index),
    ]


def redacted(index: int, data: str) -> list[CanonicalEvent]:
    return [RedactedThinking(index, data)]


def stream(
    *blocks: list[CanonicalEvent],
    stop: StopReason = StopReason.END_TURN,
    usage: Usage = USAGE,
) -> list[CanonicalEvent]:
    """A whole successful stream: start, the blocks in order, usage, stop."""
    return [START, *(event for block in blocks for event in block), usage, MessageStop(stop)]


def parse_sse(chunks: list[bytes]) -> list[tuple[str | None, str]]:
    """(event name, data) per SSE event; each chunk must be exactly one well-formed event."""
    events = []
    for chunk in chunks:
        raw = chunk.decode()
        assert raw.endswith("\n\n"), raw
        name, data = None, None
        for line in raw[:-2].split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            else:
                assert field == "data", raw
                data = value
        assert data is not None, raw
        events.append((name, data))
    return events


def sse_json(chunks: list[bytes]) -> list[dict[str, Any]]:
    """The JSON data of every event, skipping a terminal `[DONE]`."""
    return [json.loads(data) for _, data in parse_sse(chunks) if data != "[DONE]"]
