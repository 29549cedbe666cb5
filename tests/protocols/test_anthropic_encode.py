"""Canonical events → Anthropic SSE and JSON, checked by the official `anthropic` SDK itself.

The SDK talks to the encoder's bytes through an in-memory httpx transport, so its own SSE parser,
event models and stream accumulator judge the output; pydantic validation of every event against
`RawMessageStreamEvent` adds the strictness the accumulator's lenient construction lacks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from kirod.canonical.assemble import assemble
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
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
from kirod.canonical.request import (
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from kirod.errors import ErrorKind
from kirod.protocols.anthropic import (
    MessagesStreamEncoder,
    ThinkingSigner,
    VerifiedSignature,
    decode_messages,
    message_json,
)
from kirod.protocols.anthropic import encode as anthropic_encode

SIGNER = ThinkingSigner(b"encode-test-secret-0123456789")
MODEL = "claude-opus-4-7"
EVENT_ADAPTER: TypeAdapter[RawMessageStreamEvent] = TypeAdapter(RawMessageStreamEvent)


def encoder(**kwargs: Any) -> MessagesStreamEncoder:
    return MessagesStreamEncoder(message_id="0001", model=MODEL, signer=SIGNER, **kwargs)


def encode(events: list[CanonicalEvent], **kwargs: Any) -> bytes:
    enc = encoder(**kwargs)
    return b"".join(frame for event in events for frame in enc.feed(event))


def parse_sse(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event name, JSON data) pairs; every event has exactly one of each line."""
    assert data.endswith(b"\n\n")
    events = []
    for chunk in data.decode().split("\n\n")[:-1]:
        name_line, data_line = chunk.split("\n")
        assert name_line.startswith("event: ")
        assert data_line.startswith("data: ")
        events.append((name_line.removeprefix("event: "), json.loads(data_line[6:])))
    return events


def validated(data: bytes) -> list[dict[str, Any]]:
    """The events' JSON, each checked strictly against the SDK's event union."""
    events = []
    for name, payload in parse_sse(data):
        assert payload["type"] == name
        EVENT_ADAPTER.validate_python(payload)
        events.append(payload)
    return events


@contextmanager
def sdk(handler: Callable[[httpx2.Request], httpx2.Response]) -> Iterator[anthropic.Anthropic]:
    transport = httpx2.MockTransport(handler)
    with anthropic.Anthropic(
        api_key="sk-kirod-test",
        base_url="http://kirod.test",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    ) as client:
        yield client


def sse_response(body: bytes) -> Callable[[httpx2.Request], httpx2.Response]:
    return lambda _: httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=body
    )


def json_response(body: dict[str, Any]) -> Callable[[httpx2.Request], httpx2.Response]:
    return lambda _: httpx2.Response(200, json=body)


ASK: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "read a.txt"}],
}


def streamed(events: list[CanonicalEvent]) -> Message:
    with sdk(sse_response(encode(events))) as client, client.messages.stream(**ASK) as stream:
        return stream.get_final_message()


def created(events: list[CanonicalEvent]) -> Message:
    body = message_json(assemble(events), message_id="0001", model=MODEL, signer=SIGNER)
    with sdk(json_response(body)) as client:
        return client.messages.create(**ASK)


def block(index: int, kind: BlockKind, *deltas: CanonicalEvent) -> list[CanonicalEvent]:
    return [BlockStart(index, kind), *deltas, BlockStop(index)]


START = MessageStart("upstream-id", "claude-opus-4.7", 321)
TEXT_STREAM: list[CanonicalEvent] = [
    START,
    *block(0, BlockKind.TEXT, TextDelta(0, "Hello, "), TextDelta(0, "world.")),
    Usage(330, 4),
    MessageStop(StopReason.END_TURN),
]
THINKING_TEXT = "The user wants a.txt. I will call Read."
TOOL_STREAM: list[CanonicalEvent] = [
    START,
    *block(
        0,
        BlockKind.THINKING,
        ThinkingDelta(0, "The user wants a.txt. "),
        ThinkingDelta(0, "I will call Read."),
        SignatureDelta(0, "EqQBCkgIARAB"),
        SignatureDelta(0, "GAIiQL3+sig=="),
    ),
    BlockStart(1, BlockKind.TOOL_USE, "tooluse_Q7x2", "Read"),
    ToolInputDelta(1, '{"file_'),
    ToolInputDelta(1, 'path": "/tmp/a.txt", '),
    ToolInputDelta(1, '"limit": 20}'),
    BlockStop(1),
    Usage(340, 57),
    MessageStop(StopReason.TOOL_USE),
]


def test_text_stream_shape() -> None:
    events = validated(encode(TEXT_STREAM))
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0]["message"] == {
        "id": "msg_0001",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 321,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    assert events[1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    assert events[2]["delta"] == {"type": "text_delta", "text": "Hello, "}
    assert events[4] == {"type": "content_block_stop", "index": 0}
    assert events[5] == {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {
            "input_tokens": 330,
            "output_tokens": 4,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    assert events[6] == {"type": "message_stop"}


def test_text_stream_accumulates_to_the_non_streaming_message() -> None:
    message = streamed(TEXT_STREAM)
    assert message.id == "msg_0001"
    assert message.model == MODEL
    assert message.content[0].type == "text"
    assert message.content[0].text == "Hello, world."
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (330, 4)
    assert message.model_dump() == created(TEXT_STREAM).model_dump()


def test_thinking_then_tool_use_stream() -> None:
    events = validated(encode(TOOL_STREAM))
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert [d["type"] for d in deltas] == [
        "thinking_delta",
        "thinking_delta",
        "signature_delta",
        "input_json_delta",
        "input_json_delta",
        "input_json_delta",
    ]
    # Tool input streams as it comes, fragment for fragment.
    assert [d["partial_json"] for d in deltas[3:]] == [
        '{"file_',
        'path": "/tmp/a.txt", ',
        '"limit": 20}',
    ]
    assert events[1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert events[6]["content_block"] == {
        "type": "tool_use",
        "id": "tooluse_Q7x2",
        "name": "Read",
        "input": {},
    }
    # One signature, kirod's, at the end of the block; it carries the upstream one.
    signature = deltas[2]["signature"]
    assert SIGNER.verify(THINKING_TEXT, signature) == VerifiedSignature("EqQBCkgIARABGAIiQL3+sig==")
    assert events[5] == {"type": "content_block_stop", "index": 0}
    assert events[-2]["delta"]["stop_reason"] == "tool_use"

    message = streamed(TOOL_STREAM)
    assert message.model_dump() == created(TOOL_STREAM).model_dump()
    thinking, tool = message.content
    assert thinking.type == "thinking"
    assert (thinking.thinking, thinking.signature) == (THINKING_TEXT, signature)
    assert tool.type == "tool_use"
    assert (tool.id, tool.name, tool.input) == (
        "tooluse_Q7x2",
        "Read",
        {"file_path": "/tmp/a.txt", "limit": 20},
    )


def test_echoed_turn_decodes_to_the_upstream_reasoning_and_call_id() -> None:
    """What the SDK accumulated goes back as history and maps to what Kiro produced."""
    message = streamed(TOOL_STREAM)
    body = {
        **ASK,
        "messages": [
            *ASK["messages"],
            {"role": "assistant", "content": [b.to_dict() for b in message.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": message.content[1].id, "content": "hi"}
                ],
            },
        ],
    }
    request = decode_messages(body, {}, request_id="r", signer=SIGNER)
    assert request.messages[1].content == (
        ThinkingBlock(THINKING_TEXT, "EqQBCkgIARABGAIiQL3+sig=="),
        ToolUseBlock("tooluse_Q7x2", "Read", {"file_path": "/tmp/a.txt", "limit": 20}),
    )
    assert request.messages[2].content == (ToolResultBlock("tooluse_Q7x2", (TextBlock("hi"),)),)


def test_prompt_tag_thinking_is_signed_too() -> None:
    events: list[CanonicalEvent] = [
        START,
        *block(0, BlockKind.THINKING, ThinkingDelta(0, "hmm")),
        *block(1, BlockKind.TEXT, TextDelta(1, "Done.")),
        MessageStop(StopReason.END_TURN),
    ]
    signatures = [
        e["delta"]["signature"]
        for e in validated(encode(events))
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "signature_delta"
    ]
    assert len(signatures) == 1
    assert SIGNER.verify("hmm", signatures[0]) == VerifiedSignature(None)
    assert streamed(events).model_dump() == created(events).model_dump()


def test_redacted_thinking_is_wrapped() -> None:
    events: list[CanonicalEvent] = [
        START,
        RedactedThinking(0, "gAAAA-opaque=="),
        *block(1, BlockKind.TEXT, TextDelta(1, "Answer.")),
        Usage(321, 9),
        MessageStop(StopReason.END_TURN),
    ]
    parsed = validated(encode(events))
    assert parsed[1]["content_block"]["type"] == "redacted_thinking"
    assert SIGNER.unwrap_redacted(parsed[1]["content_block"]["data"]) == "gAAAA-opaque=="
    assert parsed[2] == {"type": "content_block_stop", "index": 0}
    message = streamed(events)
    assert message.model_dump() == created(events).model_dump()
    assert message.content[0].type == "redacted_thinking"


def test_message_json_blocks() -> None:
    completion = assemble([*TOOL_STREAM[:-2], RedactedThinking(2, "blob"), *TOOL_STREAM[-2:]])
    body = message_json(completion, message_id="0001", model=MODEL, signer=SIGNER)
    Message.model_validate(body)
    assert body["id"] == "msg_0001"
    assert body["content"][1:] == [
        {
            "type": "tool_use",
            "id": "tooluse_Q7x2",
            "name": "Read",
            "input": {"file_path": "/tmp/a.txt", "limit": 20},
        },
        {"type": "redacted_thinking", "data": SIGNER.wrap_redacted("blob")},
    ]
    assert body["stop_reason"] == "tool_use"
    assert body["usage"]["input_tokens"] == 340
    assert SIGNER.verify(THINKING_TEXT, body["content"][0]["signature"]) is not None
    assert RedactedThinkingBlock("blob") in completion.content


@pytest.mark.parametrize(
    ("reason", "sequence", "wire"),
    [
        (StopReason.END_TURN, None, "end_turn"),
        (StopReason.MAX_TOKENS, None, "max_tokens"),
        (StopReason.STOP_SEQUENCE, "\n\nHuman:", "stop_sequence"),
        (StopReason.TOOL_USE, None, "tool_use"),
        (StopReason.REFUSAL, None, "refusal"),
    ],
)
def test_stop_reasons(reason: StopReason, sequence: str | None, wire: str) -> None:
    events: list[CanonicalEvent] = [
        START,
        *block(0, BlockKind.TEXT, TextDelta(0, "x")),
        MessageStop(reason, sequence),
    ]
    delta = validated(encode(events))[-2]
    assert delta["delta"] == {"stop_reason": wire, "stop_sequence": sequence}
    # Without a Usage event the start estimate stands.
    assert (delta["usage"]["input_tokens"], delta["usage"]["output_tokens"]) == (321, 0)
    message = streamed(events)
    assert (message.stop_reason, message.stop_sequence) == (wire, sequence)
    assert message.model_dump() == created(events).model_dump()


def test_ping() -> None:
    assert encoder().ping() == b'event: ping\ndata: {"type":"ping"}\n\n'
    assert parse_sse(encoder().ping()) == [("ping", {"type": "ping"})]


@pytest.mark.parametrize(
    ("kind", "wire"),
    [
        (ErrorKind.OVERLOADED, "overloaded_error"),
        (ErrorKind.UNAVAILABLE, "api_error"),
        (ErrorKind.RATE_LIMIT, "rate_limit_error"),
        (ErrorKind.UPSTREAM, "api_error"),
        (ErrorKind.INVALID_REQUEST, "invalid_request_error"),
    ],
)
def test_error_event_mid_stream(kind: ErrorKind, wire: str) -> None:
    events: list[CanonicalEvent] = [
        START,
        BlockStart(0, BlockKind.TEXT),
        TextDelta(0, "partial"),
        ErrorEvent(kind, "Kiro failed to answer", "upstream_error"),
    ]
    body = encode(events, request_id="req_9")
    name, payload = parse_sse(body)[-1]
    assert name == "error"
    assert payload == {
        "type": "error",
        "error": {"type": wire, "message": "Kiro failed to answer"},
        "request_id": "req_9",
    }
    with (
        sdk(sse_response(body)) as client,
        pytest.raises(anthropic.APIStatusError) as caught,
        client.messages.stream(**ASK) as stream,
    ):
        stream.get_final_message()
    assert caught.value.body == payload


def test_error_event_without_request_id() -> None:
    frames = encoder().feed(ErrorEvent(ErrorKind.OVERLOADED, "busy"))
    assert parse_sse(b"".join(frames)) == [
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    ]


@settings(max_examples=200)
@given(st.integers(0, 10_000), st.text())
def test_a_text_delta_is_the_bytes_of_its_event_dict(index: int, text: str) -> None:
    """The template that writes text deltas is byte for byte what the generic encoding writes."""
    data = {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }
    assert anthropic_encode._text_delta(index, text) == anthropic_encode._event(data)
